/* order.c — vector clocks over the program's streams (see order.h, docs/decisions.md G7).
 *
 * Streams live in a table of VG_ORDER_STREAMS slots, found by a linear scan (programs use
 * a handful); events in an open-addressed table of EVENTS entries that forgets the oldest
 * on collision. Every operation is O(streams) at most. A slot remembers the launch number
 * when it was made (`born`): launches numbered up to it belong to an earlier stream that
 * had the same handle, whose order is no longer known, so they count as ordered.
 */
#include "order.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "driver/driver.h"

enum { KIND_LEGACY, KIND_BLOCKING, KIND_NONBLOCKING };

typedef struct ostream {
    CUstream handle;
    bool used;
    uint8_t kind;
    uint64_t born; /* launch number when the slot was made */
    uint64_t last; /* its latest launch (0: none) */
    uint64_t host; /* its launches up to this one are known complete */
    uint64_t mark; /* the legacy stream: its latest operation (launch, record, wait) came
                      after every launch numbered up to this, and blocking streams' later
                      work comes after it */
} ostream_t;

#define EVENTS 4096
typedef struct oevent {
    CUevent e;
    int slot;      /* the recording stream's slot */
    uint64_t born; /* that slot's `born` then (a reused slot is another stream) */
    uint64_t seq;  /* the launch number at the record */
    uint64_t tick; /* the record's own number (g_tick) */
} oevent_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ostream_t g_s[VG_ORDER_STREAMS];
static uint64_t g_clock[VG_ORDER_STREAMS][VG_ORDER_STREAMS]; /* [s][t], see order.h */
static int g_n; /* slots [0, g_n) may be used */
static _Atomic uint64_t g_tick; /* event records so far (written under g_lock) */
static uint64_t g_waited[VG_ORDER_STREAMS][VG_ORDER_STREAMS]; /* [s][t]: the newest record
                                                   on t that s itself waited for (a tick) */
static oevent_t g_ev[EVENTS];

static CUstream norm(CUstream s) { return s == CU_STREAM_LEGACY ? NULL : s; }

static uint8_t kind_of(CUstream s) {
    if (s == NULL)
        return KIND_LEGACY;
    if (s == CU_STREAM_PER_THREAD) /* it synchronises with the legacy stream */
        return KIND_BLOCKING;
    unsigned flags = 0;
    if (!vg__drv_has(cuStreamGetFlags) || vg__cuStreamGetFlags(s, &flags) != CUDA_SUCCESS)
        return KIND_BLOCKING; /* (unknown: assume the implicit order, so no false report) */
    return (flags & CU_STREAM_NON_BLOCKING) ? KIND_NONBLOCKING : KIND_BLOCKING;
}

bool vg__stream_blocking(CUstream s) { return kind_of(norm(s)) != KIND_NONBLOCKING; }

static int find(CUstream s) {
    for (int i = 0; i < g_n; i++)
        if (g_s[i].used && g_s[i].handle == s)
            return i;
    return -1;
}

/* The slot of stream s, made if needed (lock held; `kind` was learnt without it). -1 if
 * the table is full. */
static int slot(CUstream s, uint8_t kind, uint64_t born) {
    int i = find(s);
    if (i >= 0)
        return i;
    for (i = 0; i < VG_ORDER_STREAMS && g_s[i].used; i++)
        ;
    if (i == VG_ORDER_STREAMS)
        return -1;
    g_s[i] = (ostream_t){.handle = s, .used = true, .kind = kind, .born = born, .host = born};
    memset(g_clock[i], 0, sizeof g_clock[i]);
    memset(g_waited[i], 0, sizeof g_waited[i]);
    for (int k = 0; k < VG_ORDER_STREAMS; k++)
        g_clock[k][i] = g_waited[k][i] = 0;
    if (i >= g_n)
        g_n = i + 1;
    return i;
}

/* Lock, and the slot of s (made if new: its kind is asked of the driver first, unlocked). */
static int lock_slot(CUstream s, uint64_t born) {
    pthread_mutex_lock(&g_lock);
    int i = find(s);
    if (i >= 0)
        return i;
    pthread_mutex_unlock(&g_lock);
    uint8_t kind = kind_of(s);
    pthread_mutex_lock(&g_lock);
    return slot(s, kind, born);
}

static void merge(uint64_t *into, const uint64_t *from) {
    for (int k = 0; k < g_n; k++)
        if (from[k] > into[k])
            into[k] = from[k];
}

static bool joins_legacy(const ostream_t *x) { return x->kind != KIND_NONBLOCKING; }

static bool ordered(int s, int t, uint64_t seq) {
    const ostream_t *S = &g_s[s], *T = &g_s[t];
    if (seq <= T->born || seq <= T->host || g_clock[s][t] >= seq)
        return true;
    if (!joins_legacy(S) || !joins_legacy(T))
        return false;
    /* The legacy default stream waits for every blocking stream's earlier work, and they
     * for its: S's later work comes after T's launch if either is the legacy stream, or if
     * the legacy stream did anything after it. What such a stream waited for counts too. */
    if (S->kind == KIND_LEGACY || T->kind == KIND_LEGACY)
        return true;
    for (int k = 0; k < g_n; k++) {
        const ostream_t *X = &g_s[k];
        if (!X->used || !joins_legacy(X))
            continue;
        if ((X->kind == KIND_LEGACY && X->mark >= seq) || g_clock[k][t] >= seq)
            return true;
    }
    return false;
}

static oevent_t *event_at(CUevent e, bool make) {
    size_t h = ((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ull >> 52; /* 12 bits: EVENTS */
    oevent_t *free_one = NULL;
    for (int probe = 0; probe < 8; probe++) {
        oevent_t *x = &g_ev[(h + (size_t)probe) & (EVENTS - 1)];
        if (x->e == e)
            return x;
        if (!x->e && !free_one)
            free_one = x;
    }
    if (!make)
        return NULL;
    return free_one ? free_one : &g_ev[h & (EVENTS - 1)]; /* (forget the oldest there) */
}

/* The event's recording stream's slot, or -1 when unknown. */
static int event_slot(CUevent e, uint64_t *seq) {
    oevent_t *x = e ? event_at(e, false) : NULL;
    if (!x || x->slot < 0 || !g_s[x->slot].used || g_s[x->slot].born != x->born)
        return -1;
    *seq = x->seq;
    return x->slot;
}

/* ---------------------------------------------------------------------------------------
 * What the program did
 * ------------------------------------------------------------------------------------- */

/* An operation on stream slot i, issued after the launches numbered up to `after`: on the
 * legacy stream it orders blocking streams' later work after those launches. */
static void legacy_op(int i, uint64_t after) {
    if (i >= 0 && g_s[i].kind == KIND_LEGACY && after > g_s[i].mark)
        g_s[i].mark = after;
}

void vg__order_launch(CUstream s, uint64_t seq) {
    int i = lock_slot(norm(s), seq - 1);
    if (i >= 0 && seq > g_s[i].last)
        g_s[i].last = seq;
    legacy_op(i, seq - 1);
    pthread_mutex_unlock(&g_lock);
}

void vg__order_event_record(CUevent e, CUstream s) {
    if (!e)
        return;
    uint64_t now = vg__launch_seq();
    int i = lock_slot(norm(s), now);
    oevent_t *x = event_at(e, true);
    *x = (oevent_t){.e = e, .slot = i, .born = i >= 0 ? g_s[i].born : 0, .seq = now,
                    .tick = ++g_tick};
    legacy_op(i, now);
    pthread_mutex_unlock(&g_lock);
}

void vg__order_stream_wait(CUstream s, CUevent e) {
    uint64_t now = vg__launch_seq(), seq = 0;
    int i = lock_slot(norm(s), now);
    if (i >= 0) {
        int t = event_slot(e, &seq);
        if (t < 0) { /* unknown event: take it as ordering everything so far */
            for (int k = 0; k < g_n; k++)
                g_clock[i][k] = now;
        } else {
            if (seq > g_clock[i][t])
                g_clock[i][t] = seq;
            merge(g_clock[i], g_clock[t]);
            uint64_t tick = event_at(e, false)->tick;
            if (tick > g_waited[i][t])
                g_waited[i][t] = tick;
        }
        legacy_op(i, now);
    }
    pthread_mutex_unlock(&g_lock);
}

static void host_knows(int t, uint64_t seq) {
    if (seq > g_s[t].host)
        g_s[t].host = seq;
    for (int k = 0; k < g_n; k++)
        if (g_s[k].used && g_clock[t][k] > g_s[k].host)
            g_s[k].host = g_clock[t][k];
}

static void all_done_locked(uint64_t now) {
    for (int k = 0; k < g_n; k++)
        if (g_s[k].used && now > g_s[k].host)
            g_s[k].host = now;
}

void vg__order_stream_done(CUstream s) {
    uint64_t now = vg__launch_seq();
    pthread_mutex_lock(&g_lock);
    s = norm(s);
    int i = find(s);
    if (i >= 0)
        host_knows(i, now);
    if (s == NULL) /* the legacy stream waited for every blocking stream */
        for (int k = 0; k < g_n; k++)
            if (g_s[k].used && g_s[k].kind == KIND_BLOCKING)
                host_knows(k, now);
    pthread_mutex_unlock(&g_lock);
}

void vg__order_event_done(CUevent e) {
    uint64_t now = vg__launch_seq(), seq = 0;
    pthread_mutex_lock(&g_lock);
    int t = event_slot(e, &seq);
    if (t < 0)
        all_done_locked(now);
    else
        host_knows(t, seq);
    pthread_mutex_unlock(&g_lock);
}

void vg__order_all_done(void) {
    uint64_t now = vg__launch_seq();
    pthread_mutex_lock(&g_lock);
    all_done_locked(now);
    pthread_mutex_unlock(&g_lock);
}

void vg__order_stream_destroyed(CUstream s) {
    pthread_mutex_lock(&g_lock);
    int i = norm(s) ? find(norm(s)) : -1; /* (the legacy stream is never destroyed) */
    if (i >= 0)
        g_s[i].used = false;
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------------------------------
 * Questions
 * ------------------------------------------------------------------------------------- */

bool vg__order_after(CUstream s, CUstream t, uint64_t seq) {
    int i = lock_slot(norm(s), vg__launch_seq());
    int j = find(norm(t));
    bool r = i < 0 || j < 0 || i == j || ordered(i, j, seq);
    pthread_mutex_unlock(&g_lock);
    return r;
}

uint64_t vg__order_tick(void) { return atomic_load_explicit(&g_tick, memory_order_acquire); }

bool vg__order_waited_after(CUstream s, CUstream t, uint64_t tick) {
    if (s == CU_STREAM_PER_THREAD || t == CU_STREAM_PER_THREAD)
        return false; /* (one handle for every thread's own stream) */
    pthread_mutex_lock(&g_lock);
    int i = find(norm(s)), j = find(norm(t));
    bool r = i >= 0 && j >= 0 && i != j && g_waited[i][j] > tick;
    pthread_mutex_unlock(&g_lock);
    return r;
}

bool vg__order_may_race(CUstream s, uint64_t since) {
    pthread_mutex_lock(&g_lock);
    int i = find(norm(s));
    bool r = false;
    for (int t = 0; t < g_n && !r; t++) {
        const ostream_t *T = &g_s[t];
        if (t == i || !T->used || T->last <= since)
            continue;
        r = i < 0 || !ordered(i, t, T->last); /* (every condition holds for a prefix) */
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* ---------------------------------------------------------------------------------------
 * The launch number (report.c's launch record numbers launches; the order counts them)
 * ------------------------------------------------------------------------------------- */

_Atomic uint64_t vg__launches;
