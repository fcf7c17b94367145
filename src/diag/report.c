/* report.c — printing error reports, keeping their JSON, and the kernel-launch record.
 *
 * Reports read like the established memory checkers': a headline, where the damage is
 * relative to the allocation, the allocation and its stacks, the kernels launched since
 * its last clean check, and what found it. Every line starts with "==vramguard== " so a
 * report can be picked out of a program's own output. Stacks are symbolized here, when
 * the report is printed (D9).
 */
#define _GNU_SOURCE
#include "report.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/driver.h"
#include "alloc/heap.h"
#include "base/options.h"
#include "order.h"
#include "pyframes.h"
#include "sites.h"
#include "suppress.h"
#include "alloc/events.h"

#define PREFIX "==vramguard== "

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_counts[VG_REPORT_NKINDS];
static uint64_t g_total;
static vg_buf_t g_json; /* the reports' objects, comma-separated */

static const char *kind_headline(vg_report_kind_t k) {
    switch (k) {
#define VG_X(id, json, headline)                                                            \
    case VG_REPORT_##id: return headline;
        VG_REPORT_KINDS(VG_X)
#undef VG_X
    default: return "error";
    }
}

/* A leak is found at exit, or when the program destroys the allocations' context. */
static const char *headline(const vg_report_t *r) {
    if (r->headline)
        return r->headline;
    if (r->kind == VG_REPORT_LEAK && r->found && strcmp(r->found, "at exit") != 0)
        return strstr(r->found, "reset") ? "memory still allocated when its context was reset"
                                         : "memory still allocated when its context was destroyed";
    return kind_headline(r->kind);
}


/* ---------------------------------------------------------------------------------------
 * Kernel launches: a ring of the most recent ones.
 * ------------------------------------------------------------------------------------- */

#define LAUNCHES 1024

typedef struct launch {
    uint64_t seq;
    char name[160];    /* a kernel's; a copy's is made from the four below when copied out */
    const char *call;  /* a copy: the call that made it (a string that lives forever) */
    unsigned index, count; /* copy `index` of a batch of `count` (1: not a batch) */
    uint64_t bytes;
    CUstream stream;
    uint32_t site;
    uint64_t ptrs[VG_LAUNCH_PTRS]; /* words of its arguments that may be device pointers */
    uint16_t where[VG_LAUNCH_PTRS]; /* VG_ARG_WHERE of each */
    int nptrs;         /* (described only when printed: the lookup takes heap locks) */
    uint64_t at_event; /* the allocator event sequence number when it was launched */
    uint64_t t_ns;
    bool captured;     /* into a CUDA graph: it runs when the graph is launched */
    bool copy;         /* an asynchronous copy or memset, not a kernel */
} launch_t;

static launch_t g_launches[LAUNCHES];
static pthread_mutex_t g_launch_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t vg__launch_note(const char *name, CUstream stream, uint32_t site) {
    return vg__launch_note_args(name, stream, site, NULL, NULL, 0, -1);
}

/* `"argument":2,"offset":OFF,"argument_byte":8,"launched_at":` for word a (the
 * allocation at `user`; argument_byte: where in a struct argument): the site follows. */
static void arg_json(vg_buf_t *b, const launch_t *l, int a, uint64_t user) {
    vg__buf_printf(b, "\"argument\":%u,\"offset\":%lld,\"argument_byte\":%u,\"launched_at\":",
                   (unsigned)(l->where[a] >> 8), (long long)(l->ptrs[a] - user),
                   (l->where[a] & 0xffu) * 8u);
}

/* The first of launch l's argument words pointing into [lo, hi] (an allocation, its end
 * included), or -1. */
static int arg_into(const launch_t *l, uint64_t lo, uint64_t hi) {
    for (int a = 0; a < l->nptrs; a++)
        if (l->ptrs[a] >= lo && l->ptrs[a] <= hi)
            return a;
    return -1;
}

/* "argument 2", or "argument 2 (bytes 8-15)" for a word inside a struct argument. */
static const char *arg_text(char out[32], const launch_t *l, int a) {
    unsigned index = l->where[a] >> 8, byte = (l->where[a] & 0xff) * 8u;
    if (byte)
        snprintf(out, 32, "argument %u (bytes %u-%u)", index, byte, byte + 7);
    else
        snprintf(out, 32, "argument %u", index);
    return out;
}

/* The launch's pointer arguments that lie in vramguard allocations, described into out.
 * Takes the heap locks: only where none is held. */
static void describe_args(const launch_t *l, char *out, size_t n) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < l->nptrs && used + 1 < n; i++) {
        char d[96];
        if (l->ptrs[i] && vg__describe_device_ptr(l->ptrs[i], d, sizeof d)) {
            char at[32];
            int w = snprintf(out + used, n - used, "%s%s = %s", used ? "; " : "",
                             arg_text(at, l, i), d);
            used = w > 0 ? VG_MIN(used + (size_t)w, n - 1) : used;
        }
    }
}

/* A launch record copied out of the ring, with a copy's name made. */
static void copy_out(launch_t *out, const launch_t *l) {
    *out = *l;
    if (!l->call)
        return;
    if (l->count > 1)
        snprintf(out->name, sizeof out->name, "%s (copy %u of %u) of %llu bytes", l->call,
                 l->index + 1, l->count, (unsigned long long)l->bytes);
    else
        snprintf(out->name, sizeof out->name, "%s of %llu bytes", l->call,
                 (unsigned long long)l->bytes);
}

/* Record a launch; `copy` (NULL for a kernel) names the copy's call, its index and count
 * in a batch and its bytes (its name is made only when a report needs it). */
typedef struct copy_info {
    const char *call;
    unsigned index, count;
    uint64_t bytes;
} copy_info_t;

static VG_TLS_FAST uint64_t t_noted; /* this thread's last kernel launch noted */
static VG_TLS_FAST uint32_t t_noted_site;

uint64_t vg__launch_take_noted(uint32_t *site) {
    uint64_t seq = t_noted;
    *site = t_noted_site;
    t_noted = 0;
    return seq;
}

static uint64_t note(const char *name, CUstream stream, uint32_t site, const uint64_t *ptrs,
                     const uint16_t *where, int nptrs, int captured,
                     const copy_info_t *copy) {
    if (nptrs > VG_LAUNCH_PTRS)
        nptrs = VG_LAUNCH_PTRS;
    if (captured < 0)
        captured = vg__stream_capturing(stream);
    pthread_mutex_lock(&g_launch_lock);
    uint64_t seq = vg__launch_seq() + 1;
    launch_t *l = &g_launches[seq % LAUNCHES];
    l->seq = seq;
    if (copy) {
        l->name[0] = '\0';
        l->call = copy->call;
        l->index = copy->index;
        l->count = copy->count;
        l->bytes = copy->bytes;
    } else {
        if (!name || !*name)
            name = "(unnamed kernel)";
        size_t len = strnlen(name, sizeof l->name - 1); /* (no formatting on this path) */
        memcpy(l->name, name, len);
        l->name[len] = '\0';
        l->call = NULL;
    }
    l->stream = stream;
    l->site = site;
    l->nptrs = ptrs ? nptrs : 0;
    for (int i = 0; i < l->nptrs; i++) {
        l->ptrs[i] = ptrs[i];
        l->where[i] = where ? where[i] : VG_ARG_WHERE(i, 0);
    }
    l->at_event = vg__event_seq();
    l->t_ns = vg__now_coarse_ns();
    l->captured = captured != 0;
    l->copy = copy != NULL;
    if (!captured && vg__opt.mode >= VG_MODE_GUARD) /* (G7 is guard mode's; under the
                                                     * launch lock: a free sees both or neither) */
        vg__order_launch(stream, seq);
    vg__launch_seq_publish(seq);
    uint32_t kept_site = l->site;
    pthread_mutex_unlock(&g_launch_lock);
    if (!copy) { /* (memcheck's launch callback, inside the driver's launch, takes it) */
        t_noted = seq;
        t_noted_site = kept_site;
    }
    return seq;
}

uint64_t vg__launch_note_args(const char *name, CUstream stream, uint32_t site,
                              const uint64_t *ptrs, const uint16_t *where, int nptrs,
                              int captured) {
    return note(name, stream, site, ptrs, where, nptrs, captured, NULL);
}

uint64_t vg__copy_note(const char *call, unsigned index, unsigned count, CUstream stream,
                       uint32_t site, uint64_t dst, uint64_t src, uint64_t bytes) {
    copy_info_t info = {call ? call : "(a copy)", index, count, bytes};
    uint64_t ptrs[2];
    uint16_t where[2];
    int n = 0;
    if (dst) {
        ptrs[n] = dst;
        where[n++] = VG_ARG_WHERE(0, 0);
    }
    if (src) {
        ptrs[n] = src;
        where[n++] = VG_ARG_WHERE(1, 0);
    }
    return note(NULL, stream, site, ptrs, where, n, -1, &info);
}

bool vg__launch_find_unordered(CUstream s, uint64_t lo, uint64_t hi, uint64_t since,
                               bool (*exempt)(CUstream t, void *arg), void *arg,
                               uint64_t *seq, int *argi) {
    enum { CANDIDATES = 16 };
    launch_t c[CANDIDATES];
    int ca[CANDIDATES], n = 0;
    pthread_mutex_lock(&g_launch_lock); /* newest first; the order is asked unlocked */
    uint64_t last = vg__launch_seq();
    uint64_t first = last >= LAUNCHES ? last - LAUNCHES + 1 : 1;
    for (uint64_t q = last; q >= first && q > since && n < CANDIDATES; q--) {
        const launch_t *l = &g_launches[q % LAUNCHES];
        int a = l->captured || l->stream == s ? -1 : arg_into(l, lo, hi);
        if (a >= 0) {
            c[n] = *l;
            ca[n++] = a;
        }
    }
    pthread_mutex_unlock(&g_launch_lock);
    for (int i = 0; i < n; i++) {
        if ((exempt && exempt(c[i].stream, arg)) || vg__order_after(s, c[i].stream, c[i].seq))
            continue;
        *seq = c[i].seq;
        *argi = ca[i];
        return true;
    }
    return false;
}

/* A copy of launch `seq` if the ring still holds it. */
static bool launch_by_seq(uint64_t seq, launch_t *out) {
    pthread_mutex_lock(&g_launch_lock);
    const launch_t *l = &g_launches[seq % LAUNCHES];
    bool ok = seq && l->seq == seq;
    if (ok)
        copy_out(out, l);
    pthread_mutex_unlock(&g_launch_lock);
    return ok;
}


static void stream_text(char out[48], CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY)
        snprintf(out, 48, "the default stream");
    else if (s == CU_STREAM_PER_THREAD)
        snprintf(out, 48, "the per-thread default stream");
    else
        snprintf(out, 48, "stream %p", (void *)s);
}

static void site_lines(vg_buf_t *b, uint32_t site, const char *indent, int max) {
    vg_site_t *s = vg__site(site);
    if (!s || !s->nframes) {
        vg__buf_printf(b, "%s(no stack: stack_depth=0 or not captured)\n", indent);
        return;
    }
    uint32_t shown = vg__site_symbolize(s);
    for (uint32_t i = 0; i < shown && (int)i < max; i++)
        vg__buf_printf(b, "%s#%u %s\n", indent, i, vg__symbolize(s->frames[i]));
}

static void site_json(vg_buf_t *b, uint32_t site) {
    vg_site_t *s = vg__site(site);
    vg__buf_putc(b, '[');
    if (s && s->nframes) {
        uint32_t shown = vg__site_symbolize(s);
        for (uint32_t i = 0; i < shown; i++) {
            if (i)
                vg__buf_putc(b, ',');
            vg__buf_json_str(b, vg__symbolize(s->frames[i]));
        }
    }
    vg__buf_putc(b, ']');
}

/* Copy the launches after `since` (oldest first, the last `max`) into out[]. */
static int launches_since(uint64_t since, int max, launch_t *out) {
    pthread_mutex_lock(&g_launch_lock);
    uint64_t last = vg__launch_seq();
    uint64_t from = since + 1;
    if (last >= LAUNCHES && from < last - LAUNCHES + 1)
        from = last - LAUNCHES + 1;
    if (last - from + 1 > (uint64_t)max && last >= from)
        from = last - (uint64_t)max + 1;
    int n = 0;
    for (uint64_t s = from; s <= last && n < max; s++)
        copy_out(&out[n++], &g_launches[s % LAUNCHES]);
    pthread_mutex_unlock(&g_launch_lock);
    return n;
}

/* Of the launches after `since`, those given a pointer into [lo, hi] (an allocation, its
 * end included): the likely writers of damage found there, however many other kernels
 * ran since (a training step runs thousands). The last `max`, oldest first, with the
 * argument that pointed there. Returns how many were found in all. */
static int launches_touching(uint64_t since, uint64_t lo, uint64_t hi, int max, launch_t *out,
                             int *arg) {
    launch_t *ls = calloc(LAUNCHES, sizeof *ls);
    if (!ls)
        return 0;
    int n = launches_since(since, LAUNCHES, ls), found = 0;
    for (int i = n - 1; i >= 0; i--) { /* newest first, kept from the end of out[] */
        int a = arg_into(&ls[i], lo, hi);
        if (a < 0)
            continue;
        if (found < max) {
            out[max - 1 - found] = ls[i];
            arg[max - 1 - found] = a;
        }
        found++;
    }
    free(ls);
    int kept = VG_MIN(found, max);
    memmove(out, out + max - kept, (size_t)kept * sizeof *out);
    memmove(arg, arg + max - kept, (size_t)kept * sizeof *arg);
    return found;
}

enum { TOUCHING = 4 };

/* ", launched at FRAME" for a launch list's one line. When the frame is a function defined
 * in a header and not inlined (a launch wrapper), its caller follows: ", launched at
 * ex_fill (common.h:126), called from main (app.c:50)". (An inlined one already names the
 * function it was inlined into.) */
static void launch_site_text(vg_buf_t *b, uint32_t site) {
    vg_site_t *s = vg__site(site);
    if (!s || !s->nframes)
        return;
    vg__symbolize_batch(s->frames, s->nframes > 1 ? 2 : 1);
    const char *first = vg__symbolize(s->frames[0]);
    vg__buf_printf(b, ", launched at %s", first);
    const char *loc = strrchr(first, '(');
    const char *dot = loc ? strrchr(loc, '.') : NULL;
    bool header = dot && (strncmp(dot, ".h:", 3) == 0 || strncmp(dot, ".hpp:", 5) == 0 ||
                          strncmp(dot, ".cuh:", 5) == 0);
    if (header && !strstr(first, " inlined into ") && s->nframes > 1)
        vg__buf_printf(b, ", called from %s", vg__symbolize(s->frames[1]));
}

/* The bytes around an allocation whose pointers a launch list names: its own, its end,
 * and in guard mode its redzones (a pointer there is no error by itself, docs/decisions.md
 * G11, but a kernel given one is a likely culprit of damage to the allocation). */
static void touching_range(uint64_t user, uint64_t size, uint64_t *lo, uint64_t *hi) {
    bool guard = vg__opt.mode >= VG_MODE_GUARD; /* (guard.c's layout: the left redzone is
                                                  * `redzone` rounded up to 512 bytes, the
                                                  * right one at least `redzone`) */
    uint64_t l = guard ? vg__align_up(vg__opt.redzone, 512) : 0, r = guard ? vg__opt.redzone : 0;
    *lo = user >= l ? user - l : 0;
    *hi = user + size + r;
}

/* Where pointer p lies relative to the allocation: "the allocation + 16", "16 bytes
 * before the allocation (in its redzone)", "8 bytes past its end (in its redzone)". */
static const char *pointer_text(char out[96], uint64_t p, uint64_t user, uint64_t size) {
    if (p < user)
        snprintf(out, 96, "%llu bytes before the allocation (in its redzone)",
                 (unsigned long long)(user - p));
    else if (p > user + size)
        snprintf(out, 96, "%llu bytes past its end (in its redzone)",
                 (unsigned long long)(p - user - size));
    else
        snprintf(out, 96, "the allocation + %llu", (unsigned long long)(p - user));
    return out;
}

static void launches_touching_describe(vg_buf_t *b, uint64_t since, uint64_t user,
                                       uint64_t size, const char *indent) {
    if (vg__launch_seq() - since <= 1)
        return; /* (one kernel ran: the list above names it already) */
    launch_t ls[TOUCHING];
    int arg[TOUCHING];
    uint64_t lo, hi;
    touching_range(user, size, &lo, &hi);
    int found = launches_touching(since, lo, hi, TOUCHING, ls, arg);
    if (found == 0)
        return;
    bool outside = false;
    for (int i = 0; i < VG_MIN(found, TOUCHING); i++)
        outside |= ls[i].ptrs[arg[i]] < user || ls[i].ptrs[arg[i]] > user + size;
    vg__buf_printf(b, "%sof those, given a pointer into this allocation%s (the likely writer%s):\n",
                   indent, outside ? " or its redzones" : "", found == 1 ? "" : "s");
    if (found > TOUCHING)
        vg__buf_printf(b, "%s  ... %d earlier, then:\n", indent, found - TOUCHING);
    for (int i = 0; i < VG_MIN(found, TOUCHING); i++) {
        char st[48], at[32], where[96];
        stream_text(st, ls[i].stream);
        vg__buf_printf(b, "%s  %s on %s, %s = %s", indent, ls[i].name, st,
                       arg_text(at, &ls[i], arg[i]),
                       pointer_text(where, ls[i].ptrs[arg[i]], user, size));
        launch_site_text(b, ls[i].site);
        vg__buf_putc(b, '\n');
    }
}

static void launches_touching_json(vg_buf_t *b, uint64_t since, uint64_t user, uint64_t size) {
    launch_t ls[TOUCHING];
    int arg[TOUCHING];
    uint64_t lo, hi;
    touching_range(user, size, &lo, &hi);
    int found = launches_touching(since, lo, hi, TOUCHING, ls, arg);
    vg__buf_putc(b, '[');
    for (int i = 0; i < VG_MIN(found, TOUCHING); i++) {
        vg__buf_printf(b, "%s{\"seq\":%llu,\"name\":", i ? "," : "", (unsigned long long)ls[i].seq);
        vg__buf_json_str(b, ls[i].name);
        vg__buf_printf(b, ",\"stream\":\"0x%llx\",", (unsigned long long)(uintptr_t)ls[i].stream);
        arg_json(b, &ls[i], arg[i], user);
        site_json(b, ls[i].site);
        vg__buf_putc(b, '}');
    }
    vg__buf_putc(b, ']');
}

void vg__launches_describe(vg_buf_t *b, uint64_t since, int max, const char *indent) {
    launch_t *ls = calloc((size_t)max, sizeof *ls);
    if (!ls)
        return;
    int n = launches_since(since, max, ls);
    uint64_t total = vg__launch_seq() - since;
    if (n == 0 && vg__launch_seq() == 0 && vg__opt.python_frames) /* (the PyTorch package) */
        vg__buf_printf(b, "%s(none seen: the package alone does not see kernel launches; "
                       "`python -m vramguard run --mode=guard` does, unless --interpose=off)\n",
                       indent);
    else if (n == 0 && vg__launch_seq() == 0)
        vg__buf_printf(b, "%s(none seen: vramguard sees kernel launches only under `vramguard "
                       "run` or through vg_kernel_launched)\n", indent);
    else if (n == 0)
        vg__buf_printf(b, "%s(none recorded)\n", indent);
    if (total > (uint64_t)n)
        vg__buf_printf(b, "%s... %llu earlier launch%s, then:\n", indent,
                       (unsigned long long)(total - (uint64_t)n), total - (uint64_t)n == 1 ? "" : "es");
    for (int i = 0; i < n; i++) {
        char st[48];
        stream_text(st, ls[i].stream);
        vg__buf_printf(b, "%s%s on %s", indent, ls[i].name, st);
        launch_site_text(b, ls[i].site);
        vg__buf_putc(b, '\n');
    }
    free(ls);
}

void vg__launches_json(vg_buf_t *b, uint64_t since, int max, bool describe) {
    launch_t *ls = calloc((size_t)max, sizeof *ls);
    vg__buf_putc(b, '[');
    int n = ls ? launches_since(since, max, ls) : 0;
    for (int i = 0; i < n; i++) {
        vg__buf_printf(b, "%s{\"seq\":%llu,\"name\":", i ? "," : "",
                       (unsigned long long)ls[i].seq);
        vg__buf_json_str(b, ls[i].name);
        vg__buf_printf(b, ",\"stream\":\"0x%llx\",\"at_event\":%llu,\"t_ns\":%llu,\"launched_at\":",
                       (unsigned long long)(uintptr_t)ls[i].stream,
                       (unsigned long long)ls[i].at_event, (unsigned long long)ls[i].t_ns);
        site_json(b, ls[i].site);
        char args[400];
        if (describe && (describe_args(&ls[i], args, sizeof args), args[0])) {
            vg__buf_printf(b, ",\"pointer_arguments\":");
            vg__buf_json_str(b, args);
        }
        vg__buf_putc(b, '}');
    }
    vg__buf_putc(b, ']');
    free(ls);
}

void vg__launches_by_stream(vg_buf_t *b, int per_stream, const char *indent) {
    enum { MAXS = 16 };
    launch_t *ls = calloc(LAUNCHES, sizeof *ls);
    if (!ls)
        return;
    int n = launches_since(0, LAUNCHES, ls);
    CUstream streams[MAXS];
    int ns = 0;
    for (int i = n - 1; i >= 0; i--) { /* streams, most recently used first */
        int k = 0;
        while (k < ns && streams[k] != ls[i].stream)
            k++;
        if (k == ns && ns < MAXS)
            streams[ns++] = ls[i].stream;
    }
    if (ns == 0)
        vg__buf_printf(b, "%s(no kernel launches recorded)\n", indent);
    for (int k = 0; k < ns; k++) {
        char st[48];
        stream_text(st, streams[k]);
        vg__buf_printf(b, "%son %s, the last %s:\n", indent, st,
                       per_stream == 1 ? "launch" : "launches (newest last)");
        int shown = 0, first = n;
        for (int i = n - 1; i >= 0 && shown < per_stream; i--)
            if (ls[i].stream == streams[k])
                first = i, shown++;
        for (int i = first; i < n; i++) {
            if (ls[i].stream != streams[k])
                continue;
            vg__buf_printf(b, "%s  %s (launch #%llu)", indent, ls[i].name,
                           (unsigned long long)ls[i].seq);
            vg_site_t *s = vg__site(ls[i].site);
            if (s && s->nframes) {
                uint32_t shown = vg__site_symbolize(s);
                vg__buf_printf(b, ", launched at:\n");
                for (uint32_t f = 0; f < shown && f < 4; f++)
                    vg__buf_printf(b, "%s      #%u %s\n", indent, f, vg__symbolize(s->frames[f]));
            } else {
                vg__buf_putc(b, '\n');
            }
            char args[400];
            describe_args(&ls[i], args, sizeof args);
            if (args[0])
                vg__buf_printf(b, "%s    its pointer arguments: %s\n", indent, args);
        }
    }
    free(ls);
}

/* ---------------------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------------------- */

/* "offset 4000" or "offsets 4000 to 4255". */
static const char *offsets(char out[64], int64_t first, int64_t last) {
    if (first == last)
        snprintf(out, 64, "offset %lld", (long long)first);
    else
        snprintf(out, 64, "offsets %lld to %lld", (long long)first, (long long)last);
    return out;
}

static void damage_text(vg_buf_t *b, const vg_report_t *r) {
    uint64_t n = r->bad_bytes;
    const char *bytes = n == 1 ? "byte" : "bytes";
    int64_t sz = (int64_t)r->size;
    char off[64];
    offsets(off, r->off_first, r->off_last);
    switch (r->kind) {
    case VG_REPORT_OOB_AFTER:
    case VG_REPORT_OOB_BEFORE: {
        /* d: bytes between the allocation's edge and the nearest damaged byte */
        bool after = r->kind == VG_REPORT_OOB_AFTER;
        int64_t d = after ? r->off_first - sz : -r->off_last - 1;
        char where[64];
        if (d == 0)
            snprintf(where, sizeof where, "right %s", after ? "after the end" : "before the start");
        else
            snprintf(where, sizeof where, "%s %lld byte%s %s", after ? "starting" : "ending",
                     (long long)d, d == 1 ? "" : "s", after ? "past the end" : "before the start");
        vg__buf_printf(b, PREFIX "  %llu %s overwritten %s of a %llu-byte allocation (%s)\n",
                       (unsigned long long)n, bytes, where, (unsigned long long)r->size, off);
        break;
    }
    case VG_REPORT_USE_AFTER_FREE: {
        const char *where = r->off_first >= sz ? " (past its end)"
                            : r->off_last < 0  ? " (before its start)"
                                               : "";
        vg__buf_printf(b, PREFIX "  %llu %s written at %s%s of a %llu-byte allocation after it "
                              "was freed\n",
                       (unsigned long long)n, bytes, off, where, (unsigned long long)r->size);
        break;
    }
    default: break;
    }
    if (r->has_damage)
        vg__buf_printf(b, PREFIX "  (the first changed bytes read %02x %02x %02x %02x)\n",
                       r->damage_word & 0xff, (r->damage_word >> 8) & 0xff,
                       (r->damage_word >> 16) & 0xff, (r->damage_word >> 24) & 0xff);
}

static void json_report(vg_buf_t *j, const vg_report_t *r) {
    vg__buf_printf(j, "{\"kind\":\"%s\",\"message\":", vg__report_kind_json(r->kind));
    vg__buf_json_str(j, headline(r));
    vg__buf_printf(j, ",\"pid\":%d,\"rank\":%d,\"device\":%d,\"stream\":\"0x%llx\",\"at_event\":%llu,"
                      "\"t_ns\":%llu",
                   (int)getpid(), vg__rank(), r->device, (unsigned long long)(uintptr_t)r->stream,
                   (unsigned long long)vg__event_seq(), (unsigned long long)vg__now_coarse_ns());
    if (r->has_block) {
        vg__buf_printf(j, ",\"allocation\":{\"address\":\"0x%llx\",\"size\":%llu,\"id\":%llu,"
                          "\"allocated_at\":",
                       (unsigned long long)r->user, (unsigned long long)r->size,
                       (unsigned long long)r->id);
        site_json(j, r->alloc_site);
        if (r->in_graph)
            vg__buf_printf(j, ",\"in_cuda_graph\":true");
        if (r->managed)
            vg__buf_printf(j, ",\"managed\":true");
        if (r->free_site) {
            vg__buf_printf(j, ",\"freed_at\":");
            site_json(j, r->free_site);
        }
        vg__buf_putc(j, '}');
    }
    if (r->has_damage) {
        int64_t distance = r->kind == VG_REPORT_OOB_AFTER    ? r->off_first - (int64_t)r->size
                           : r->kind == VG_REPORT_OOB_BEFORE ? -r->off_last
                                                             : 0;
        vg__buf_printf(j, ",\"damage\":{\"first_offset\":%lld,\"last_offset\":%lld,"
                          "\"bytes\":%llu,\"distance\":%lld,\"first_bytes\":\"%08x\"}",
                       (long long)r->off_first, (long long)r->off_last,
                       (unsigned long long)r->bad_bytes, (long long)distance, r->damage_word);
    }
    if (r->call_site) {
        vg__buf_printf(j, ",\"call_at\":");
        site_json(j, r->call_site);
    }
    if (r->kind == VG_REPORT_LEAK || r->kind == VG_REPORT_GROWTH) {
        vg__buf_printf(j, ",\"bytes\":%llu,\"count\":%llu,\"allocated_at\":",
                       (unsigned long long)r->bytes, (unsigned long long)r->count);
        site_json(j, r->alloc_site);
    }
    if (r->pinned)
        vg__buf_printf(j, ",\"pinned_host\":true");
    if (r->kind == VG_REPORT_GROWTH)
        vg__buf_printf(j, ",\"growth_per_step\":%lld,\"steps\":%u",
                       (long long)r->growth_per_step, r->steps);
    if (r->clean_seq != UINT64_MAX && r->has_block) {
        vg__buf_printf(j, ",\"kernels_since_last_clean_check\":");
        vg__launches_json(j, r->clean_seq, 16, false); /* (heap locks may be held) */
        vg__buf_printf(j, ",\"kernels_given_this_allocation\":");
        launches_touching_json(j, r->clean_seq, r->user, r->size);
    }
    launch_t l;
    if (r->kind == VG_REPORT_UNORDERED_FREE && launch_by_seq(r->kernel_seq, &l)) {
        vg__buf_printf(j, ",\"freed_on_stream\":\"0x%llx\",\"kernel\":{\"seq\":%llu,\"name\":",
                       (unsigned long long)(uintptr_t)r->free_stream, (unsigned long long)l.seq);
        vg__buf_json_str(j, l.name);
        vg__buf_printf(j, ",\"stream\":\"0x%llx\",", (unsigned long long)(uintptr_t)l.stream);
        arg_json(j, &l, r->kernel_arg, r->user);
        site_json(j, l.site);
        vg__buf_putc(j, '}');
    }
    if (r->kind == VG_REPORT_CUDA_ERROR) {
        vg__buf_printf(j, ",\"last_kernels\":");
        vg__launches_json(j, 0, 16, true); /* (reported with no heap lock held) */
    }
    if (r->found) {
        vg__buf_printf(j, ",\"found\":");
        vg__buf_json_str(j, r->found);
    }
    if (r->json[0])
        vg__buf_append(j, r->json, strlen(r->json));
    if (r->lead[0]) {
        vg__buf_printf(j, ",\"summary\":");
        vg__buf_json_str(j, r->lead);
    }
    if (r->detail[0]) {
        vg__buf_printf(j, ",\"detail\":");
        vg__buf_json_str(j, r->detail);
    }
    vg__buf_putc(j, '}');
}

/* Texts a suppression rule may match (suppress.h): site's frames, and the file of the
 * program or library each C frame lies in. Appends to texts[]; returns the count. */
static size_t site_texts(uint32_t site, const char **texts, size_t n, size_t max) {
    vg_site_t *s = site ? vg__site(site) : NULL;
    if (!s || !s->nframes)
        return n;
    uint32_t shown = vg__site_symbolize(s);
    for (uint32_t i = 0; i < shown && n + 2 <= max; i++) {
        texts[n++] = vg__symbolize(s->frames[i]);
        const char *module = vg__is_pyframe(s->frames[i]) ? NULL : vg__frame_module(s->frames[i]);
        if (module)
            texts[n++] = module;
    }
    return n;
}

/* Is report r suppressed by a rule of the `suppressions` file? Its stacks (allocation,
 * free, call, and for an unordered free the kernel's launch) and the kernel's name. */
static bool suppressed(const vg_report_t *r) {
    const char *texts[4 * 2 * 64 + 1];
    size_t n = 0;
    uint32_t sites[4] = {r->alloc_site, r->free_site, r->call_site, 0};
    launch_t l;
    if (r->kind == VG_REPORT_UNORDERED_FREE && launch_by_seq(r->kernel_seq, &l)) {
        texts[n++] = l.name;
        sites[3] = l.site;
    }
    if (r->kernel)
        texts[n++] = r->kernel;
    for (int i = 0; i < 4; i++)
        n = site_texts(sites[i], texts, n, VG_ARRAY_LEN(texts));
    return vg__suppressed(r->kind, texts, n);
}

/* halt_on_error: the summary and the JSON now, then the process stops where it is (no exit
 * handler runs: the caller may hold vramguard's locks, and the program's state is what the
 * user wants to see). */
static _Noreturn void halt(void) {
    static atomic_flag halting = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&halting))
        for (;;) /* another thread's report stops the process */
            pause();
    static const char note[] = PREFIX "stopping at the first error (halt_on_error=1)\n";
    vg__report_write(note, sizeof note - 1);
    vg__report_finish(); /* (exits here with error_exitcode when it is set) */
    fflush(NULL);
    signal(SIGABRT, SIG_DFL);
    abort();
}

void vg__report(const vg_report_t *r) {
    if (vg__suppressions_any() && suppressed(r))
        return;
    vg_buf_t b = {0};
    char sz[32], st[48];
    vg__buf_printf(&b, PREFIX "ERROR: %s\n", headline(r));
    if (r->has_damage)
        damage_text(&b, r);
    if (r->lead[0])
        vg__buf_printf(&b, PREFIX "  %s\n", r->lead);
    if (r->has_block) {
        stream_text(st, r->stream);
        char human[40] = "";
        if (r->size >= 1024)
            snprintf(human, sizeof human, " (%s)", vg__fmt_bytes(sz, r->size));
        vg__buf_printf(&b, PREFIX "  the allocation: 0x%llx, %llu bytes%s, allocation #%llu on "
                              "device %d%s, %s\n",
                       (unsigned long long)r->user, (unsigned long long)r->size, human,
                       (unsigned long long)r->id, r->device,
                       r->managed ? " (managed memory)" : "", st);
        if (r->managed && r->has_damage)
            vg__buf_printf(&b, PREFIX "  (the host reaches managed memory too: it may have "
                                  "written these bytes, as may the kernels and copies below)\n");
        if (r->in_graph)
            vg__buf_printf(&b, PREFIX "  (allocated while a CUDA graph was captured: the graph's "
                                  "kernels use it at every replay)\n");
        vg__buf_printf(&b, PREFIX "  allocated at:\n");
        site_lines(&b, r->alloc_site, PREFIX "    ", 12);
        if (r->free_site) {
            vg__buf_printf(&b, PREFIX "  freed at:\n");
            site_lines(&b, r->free_site, PREFIX "    ", 12);
        }
    }
    if (r->kind == VG_REPORT_LEAK || r->kind == VG_REPORT_GROWTH) {
        if (r->kind == VG_REPORT_GROWTH)
            vg__buf_printf(&b, PREFIX "  %s from this site grew in each of the last %u "
                                  "steps, by %s per step on average\n",
                           r->pinned ? "pinned host memory" : "live memory", r->steps,
                           vg__fmt_bytes(sz, (uint64_t)r->growth_per_step));
        char tot[32];
        vg__buf_printf(&b, PREFIX "  %s%s%s in %llu allocation%s from:\n",
                       r->kind == VG_REPORT_GROWTH ? "now " : "", vg__fmt_bytes(tot, r->bytes),
                       r->pinned ? " of pinned host memory" : "", (unsigned long long)r->count,
                       r->count == 1 ? "" : "s");
        site_lines(&b, r->alloc_site, PREFIX "    ", 12);
    }
    if (r->call_site) {
        vg__buf_printf(&b, PREFIX "  %s:\n", r->call_what ? r->call_what : "the call was at");
        site_lines(&b, r->call_site, PREFIX "    ", 12);
    }
    if (r->has_block && r->has_damage && r->clean_seq != UINT64_MAX) {
        vg__buf_printf(&b, PREFIX "  kernels and copies launched since its last clean check:\n");
        vg__launches_describe(&b, r->clean_seq, 8, PREFIX "    ");
        launches_touching_describe(&b, r->clean_seq, r->user, r->size, PREFIX "  ");
    }
    if (r->detail[0]) {
        for (const char *l = r->detail; *l;) {
            const char *nl = strchr(l, '\n');
            size_t len = nl ? (size_t)(nl - l) : strlen(l);
            vg__buf_printf(&b, PREFIX "  %.*s\n", (int)len, l);
            l += len + (nl ? 1 : 0);
        }
    }
    if (r->found)
        vg__buf_printf(&b, PREFIX "  found: %s\n", r->found);
    vg__buf_printf(&b, PREFIX "\n");
    vg_buf_t j = {0};
    json_report(&j, r);
    pthread_mutex_lock(&g_lock);
    g_counts[r->kind]++;
    g_total++;
    if (g_json.len)
        vg__buf_append(&g_json, ",\n", 2);
    vg__buf_append(&g_json, j.data ? j.data : "{}", j.data ? j.len : 2);
    pthread_mutex_unlock(&g_lock);
    if (r->kind != VG_REPORT_LEAK) /* (leaks are found at exit, which writes one anyway) */
        vg__snapshot_on(r->kind == VG_REPORT_OUT_OF_MEMORY ? "oom" : "error");
    if (b.data)
        vg__report_write(b.data, b.len);
    vg__buf_free(&b);
    vg__buf_free(&j);
    if (vg__opt.halt_on_error && r->kind != VG_REPORT_LEAK && r->kind != VG_REPORT_OUT_OF_MEMORY)
        halt();
}

void vg__report_cuda_error(CUresult r, const char *call) {
    static _Atomic int reported; /* a sticky error: every later call returns it again */
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY || atomic_exchange(&reported, (int)r))
        return;
    vg_report_t rep = {.kind = VG_REPORT_CUDA_ERROR, .clean_seq = UINT64_MAX};
    vg_buf_t d = {0};
    vg__buf_printf(&d, "%s returned %s: %s\n", call, vg__cu_error_name(r), vg__cu_error_text(r));
    vg__buf_printf(&d, "CUDA reports a kernel's fault at the next call that waits for it, so "
                       "this line is rarely the culprit.\nThe kernels and copies launched last, "
                       "by stream (the fault is most likely in one of them):\n");
    vg__launches_by_stream(&d, 2, "  ");
    snprintf(rep.detail, sizeof rep.detail, "%s", d.data ? d.data : "");
    vg__buf_free(&d);
    rep.found = "by the CUDA error check (memory errors guard mode already found are "
                "reported beside this one)";
    vg__report(&rep);
}

bool vg__report_first_time(uint64_t key) {
    enum { SEEN = 512 };
    static uint64_t seen[SEEN];
    static int nseen;
    pthread_mutex_lock(&g_lock);
    bool repeat = false;
    for (int i = 0; i < nseen && !repeat; i++)
        repeat = seen[i] == key;
    if (!repeat && nseen < SEEN)
        seen[nseen++] = key;
    pthread_mutex_unlock(&g_lock);
    return !repeat;
}

void vg__report_unordered_free(const vg_unordered_t *u) {
    launch_t l;
    bool known = launch_by_seq(u->kernel_seq, &l);
    /* Once per allocation site, free site and kernel launch site: a training loop would
     * repeat it every step. */
    uint64_t key = ((uint64_t)u->alloc_site * 0x9E3779B97F4A7C15ull) ^
                   ((uint64_t)u->free_site << 21) ^ (known ? (uint64_t)l.site << 42 : 0);
    if (!vg__report_first_time(key ^ VG_REPORT_UNORDERED_FREE))
        return;
    vg_report_t rep = {.kind = VG_REPORT_UNORDERED_FREE, .device = u->device,
                       .stream = u->stream, .has_block = true, .user = u->user,
                       .size = u->size, .id = u->id, .alloc_site = u->alloc_site,
                       .free_site = u->free_site, .clean_seq = UINT64_MAX,
                       .kernel_seq = u->kernel_seq, .kernel_arg = u->kernel_arg,
                       .free_stream = u->free_stream};
    vg_report_t *r = &rep;
    char fs[48], ks[48];
    stream_text(fs, r->free_stream);
    vg_buf_t d = {0};
    if (known) {
        stream_text(ks, l.stream);
        char at[32], short_name[VG_KERNEL_SHORT + 1];
        snprintf(r->lead, sizeof r->lead,
                 "freed on %s while %s%s (launch #%llu, on %s) may still use it: its "
                 "%s points to the allocation + %llu",
                 fs, l.copy ? "" : "kernel ",
                 vg__kernel_name_short(l.name, short_name, sizeof short_name),
                 (unsigned long long)l.seq, ks,
                 arg_text(at, &l, r->kernel_arg),
                 (unsigned long long)(l.ptrs[r->kernel_arg] - r->user));
        vg__buf_printf(&d, "%s at:\n", l.copy ? "it was queued" : "the kernel was launched");
        site_lines(&d, l.site, "  ", 6);
    } else {
        snprintf(r->lead, sizeof r->lead,
                 "freed on %s while launch #%llu, on another stream, may still use it", fs,
                 (unsigned long long)r->kernel_seq);
    }
    vg__buf_printf(&d,
                   "Nothing orders the free after it: the freeing stream waited for no event "
                   "recorded after it,\nthe host did not wait for it, and no record_stream names "
                   "its stream. The next allocation\non the freeing stream can get this memory "
                   "while it still reads or writes there (guard\nmode's quarantine holds it back; "
                   "without vramguard, the next tensor would). Before the\nfree, make the freeing "
                   "stream wait for that stream (an event recorded there; PyTorch:\n"
                   "torch.cuda.current_stream().wait_stream(side)), or record the use (PyTorch:\n"
                   "x.record_stream(side); C: vg_record_stream).\n");
    snprintf(r->detail, sizeof r->detail, "%s", d.data ? d.data : "");
    vg__buf_free(&d);
    r->found = "when the allocation was freed (whether or not the kernel had run yet)";
    vg__report(r);
}

uint64_t vg__report_count(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_total;
    pthread_mutex_unlock(&g_lock);
    return n;
}

uint64_t vg__report_count_kind(vg_report_kind_t k) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_counts[k];
    pthread_mutex_unlock(&g_lock);
    return n;
}

char *vg__reports_json(void) {
    vg_buf_t b = {0};
    pthread_mutex_lock(&g_lock);
    vg__buf_printf(&b, "[\n%s\n]\n", g_json.data ? g_json.data : "");
    pthread_mutex_unlock(&g_lock);
    return b.data;
}


void vg__report_finish(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t total = g_total;
    uint64_t counts[VG_REPORT_NKINDS];
    memcpy(counts, g_counts, sizeof counts);
    pthread_mutex_unlock(&g_lock);
    char supp[1024]; /* (a fast-mode run whose reports were all suppressed says so too) */
    vg__suppressions_summary(supp, sizeof supp);
    if (vg__opt.mode >= VG_MODE_GUARD || total || supp[0]) {
        vg_buf_t b = {0};
        if (!total) {
            vg__buf_printf(&b, PREFIX "ERROR SUMMARY: no errors found\n");
        } else {
            vg__buf_printf(&b, PREFIX "ERROR SUMMARY: %llu error%s:", (unsigned long long)total,
                           total == 1 ? "" : "s");
            const char *sep = " ";
            for (int k = 0; k < VG_REPORT_NKINDS; k++) {
                if (!counts[k])
                    continue;
                vg__buf_printf(&b, "%s%llu %s", sep, (unsigned long long)counts[k],
                               vg__report_kind_json((vg_report_kind_t)k));
                sep = ", ";
            }
            vg__buf_putc(&b, '\n');
        }
        if (supp[0])
            vg__buf_printf(&b, PREFIX "%s\n", supp);
        if (b.data)
            vg__report_write(b.data, b.len);
        vg__buf_free(&b);
    }
    if (vg__opt.report_json[0]) {
        char *j = vg__reports_json();
        if (j && vg__write_file(vg__opt.report_json, j, strlen(j)) != VG_OK)
            vg__log("cannot write the JSON report: %s", vg_last_error());
        free(j);
    }
    if (total && vg__opt.error_exitcode) {
        fflush(NULL);
        _exit((int)vg__opt.error_exitcode);
    }
}

bool vg__describe_device_ptr(uint64_t p, char *out, size_t n) {
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        pthread_mutex_lock(&h->lock);
        vg_block_t *b = vg__heap_block_containing(h, p);
        bool found = b && (b->state == VG_BLOCK_ALLOCATED || b->state == VG_BLOCK_QUARANTINED);
        if (found) {
            char sz[32], human[40] = "";
            if (b->requested >= 1024)
                snprintf(human, sizeof human, ", %s", vg__fmt_bytes(sz, b->requested));
            snprintf(out, n, "%sallocation #%llu (%llu bytes%s) %s %llu",
                     b->state == VG_BLOCK_QUARANTINED ? "freed " : "",
                     (unsigned long long)b->id, (unsigned long long)b->requested, human,
                     p >= b->user ? "+" : "-",
                     (unsigned long long)(p >= b->user ? p - b->user : b->user - p));
        }
        pthread_mutex_unlock(&h->lock);
        if (found)
            return true;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Snapshots asked for (written by snapshot.c's vg__snapshot_maybe)
 * ------------------------------------------------------------------------------------- */

static _Atomic int g_snapshot_wanted; /* 1: oom, 2: error */

void vg__snapshot_on(const char *reason) {
    if (!vg__opt.snapshot[0])
        return;
    int bit = strcmp(reason, "oom") == 0 ? 1 : 2;
    atomic_fetch_or(&g_snapshot_wanted, bit);
}

int vg__snapshot_wanted_take(void) {
    int want = atomic_load_explicit(&g_snapshot_wanted, memory_order_relaxed);
    if (want)
        atomic_fetch_and(&g_snapshot_wanted, ~want);
    return want;
}
