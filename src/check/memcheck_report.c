/* memcheck_report.c — what memcheck's device callback logged, turned into reports
 * (memcheck.h, docs/memcheck.md).
 *
 * A record holds the access (address, size, read or write, the shadow word that refused
 * it), where it ran (launch number, block, thread, pc). The launch's kernel, stream and
 * launch site come from memcheck.c's ring; the allocation from the heap as it is now,
 * told apart by the shadow word: a freed allocation's word says "freed" even if the
 * memory was reused since. One report per kernel, instruction and kind of error; the rest
 * are counted and said at exit.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/memcheck_abi.h"
#include "access.h"
#include "base/common.h"
#include "base/options.h"
#include "diag/report.h"
#include "diag/sites.h"
#include "driver/driver.h"
#include "memcheck.h"
#include "tensormaps.h"

static _Atomic uint64_t g_found, g_reported, g_lost;

#define FAULT_UNINIT 100 /* (beside access.h's VG_FAULT_*: a read of bytes never written) */

/* Allocations memcheck reported a write to, by side: guard mode's check of the same
 * damage (a redzone, the poison) says nothing more (vg__memcheck_saw). */
#define SAW 8192
static uint64_t g_saw[SAW];
static pthread_mutex_t g_saw_lock = PTHREAD_MUTEX_INITIALIZER;

static bool saw(uint64_t id, int side, bool add) {
    uint64_t key = id * 4 + (uint64_t)side + 1;
    pthread_mutex_lock(&g_saw_lock);
    bool found = false;
    for (size_t k = 0; k < SAW; k++) {
        uint64_t *slot = &g_saw[(key * 0x9E3779B97F4A7C15ull + k) % SAW];
        if (*slot == key) {
            found = true;
            break;
        }
        if (*slot == 0) {
            if (add)
                *slot = key;
            break;
        }
    }
    pthread_mutex_unlock(&g_saw_lock);
    return found;
}

bool vg__memcheck_saw(uint64_t id, int side) { return vg__memcheck_on() && saw(id, side, false); }

static uint64_t mix(uint64_t a, uint64_t b) {
    return (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
}

static const char *op_name(uint32_t flags) {
    return flags & VG_MC_ATOMIC ? "atomic" : flags & VG_MC_WRITE ? "write" : "read";
}

/* The allocation the access is about, from heap h (locked) or, if not h's, any heap of
 * this process that answers without waiting. */
static int classify(vg_heap_t *h, uint64_t a, uint32_t size, vg_access_fault_t *f) {
    int c = vg__access_classify_locked(h, a, size, f);
    for (int i = 0; c < 0 && i < vg__heap_count(); i++) {
        vg_heap_t *o = vg__heap_at(i);
        if (o == h || pthread_mutex_trylock(&o->lock) != 0)
            continue;
        c = vg__access_classify_locked(o, a, size, f);
        pthread_mutex_unlock(&o->lock);
    }
    return c;
}

/* Where the access lies ("4 bytes starting 0 bytes past the end of a 4000-byte
 * allocation", as a copy's report says it), or what was never written. */
static void where_text(char *out, size_t n, const vg_access_fault_t *f, uint64_t a,
                       uint32_t size) {
    int64_t lo = (int64_t)(a - f->user);
    if (f->what == FAULT_UNINIT)
        snprintf(out, n, "bytes %lld to %lld of a %llu-byte allocation, which nothing has "
                 "written since it was allocated",
                 (long long)lo, (long long)lo + size - 1, (unsigned long long)f->size);
    else
        vg__access_where(out, n, f, a, size);
}

static void stream_text(char *out, size_t n, CUstream s) {
    if (s == NULL || s == CU_STREAM_LEGACY)
        snprintf(out, n, "the default stream");
    else if (s == CU_STREAM_PER_THREAD)
        snprintf(out, n, "the per-thread default stream");
    else
        snprintf(out, n, "stream %p", (void *)s);
}

/* The bad accesses of one poll that share a kernel (by name and the text of its launch
 * site), an allocation (or, for memory no allocation holds, a 512-byte granule), read or
 * write and kind: one report for all of them, naming the first. */
typedef struct group {
    uint64_t key;
    vg_mc_record_t first;
    vg_mc_launch_t l;
    bool known;
    vg_access_fault_t f;
    uint64_t count;
    int64_t lo, hi; /* offsets of the accesses' first and last bytes from the allocation */
} group_t;

/* The text keys of the launch sites one poll's records name (vg__site_text_key: two
 * calls on one line, as an unrolled loop makes, are two sites with one text). */
typedef struct site_keys {
    uint32_t site[16];
    uint64_t key[16];
    int n;
} site_keys_t;

static uint64_t site_key(site_keys_t *c, uint32_t site) {
    for (int i = 0; i < c->n; i++)
        if (c->site[i] == site)
            return c->key[i];
    uint64_t k = vg__site_text_key(site);
    if (c->n < 16)
        c->site[c->n] = site, c->key[c->n++] = k;
    return k;
}

/* What record rec is about: its launch and allocation; the group's key. */
static uint64_t describe(vg_heap_t *h, const vg_mc_record_t *rec, group_t *g, site_keys_t *sk) {
    memset(g, 0, sizeof *g);
    g->first = *rec;
    g->known = vg__memcheck_launch(rec->launch, &g->l);
    vg_access_fault_t *f = &g->f;
    int c = classify(h, rec->addr, rec->size, f);
    if (rec->shadow == VG_MC_FREED && f->what != VG_FAULT_FREED) { /* (reused since) */
        f->what = VG_FAULT_FREED;
        if (c == 0)
            f->has_block = false;
    }
    if (c == 0 && rec->shadow != VG_MC_FREED && f->has_block && f->what == 0)
        f->what = VG_FAULT_BOUNDS; /* (the memory was allocated since: the access was not) */
    if (rec->shadow != VG_MC_FREED && f->what == VG_FAULT_FREED)
        f->what = VG_FAULT_BOUNDS; /* (out of its bounds then; the allocation freed since) */
    if (rec->shadow == VG_MC_UNINIT)
        f->what = FAULT_UNINIT;
    bool write = rec->flags & (VG_MC_WRITE | VG_MC_ATOMIC);
    int64_t off = f->has_block ? (int64_t)(rec->addr - f->user) : (int64_t)rec->addr;
    g->lo = off;
    g->hi = off + rec->size - 1;
    g->count = 1;
    uint64_t where = f->has_block ? f->id : rec->addr >> VG_MC_SHIFT;
    int side = f->what == FAULT_UNINIT ? 3 : f->what == VG_FAULT_FREED ? 2
             : f->has_block && off < 0 ? 0 : 1;
    if (write && f->has_block && f->id)
        saw(f->id, side, true);
    return mix(mix((uint64_t)(uintptr_t)g->l.name, site_key(sk, g->l.site)),
               mix(where, (uint64_t)side << 1 | write));
}

static void emit(const group_t *g) {
    const vg_mc_record_t *rec = &g->first;
    const vg_access_fault_t *f = &g->f;
    const char *kernel = g->known ? vg__kernel_name(g->l.name) : "(a kernel launched long ago)";
    atomic_fetch_add(&g_reported, 1);
    vg_report_t r = {.kind = VG_REPORT_OOB_AFTER, .clean_seq = UINT64_MAX,
                     .call_site = g->known ? g->l.site : 0, .kernel = g->known ? g->l.name : NULL,
                     .call_what = "the kernel was launched at"};
    vg__access_fill_report(&r, f);
    const char *op = op_name(rec->flags);
    bool write = rec->flags & (VG_MC_WRITE | VG_MC_ATOMIC);
    int64_t off = (int64_t)(rec->addr - f->user);
    char head[96], where[200], pc[640], src[512] = "", st[48], more[160] = "";
    if (f->what == FAULT_UNINIT) {
        r.kind = VG_REPORT_UNINIT_READ;
        snprintf(head, sizeof head, "kernel reads memory never written since its allocation");
    } else if (f->what == VG_FAULT_FREED) {
        r.kind = VG_REPORT_USE_AFTER_FREE;
        snprintf(head, sizeof head, "kernel %s freed memory", write ? "writes to" : "reads");
    } else if (f->has_block && off < 0) {
        r.kind = VG_REPORT_OOB_BEFORE;
        snprintf(head, sizeof head, "kernel %s before the start of an allocation",
                 write ? "writes" : "reads");
    } else if (f->has_block) {
        snprintf(head, sizeof head, "kernel %s past the end of an allocation",
                 write ? "writes" : "reads");
    } else {
        snprintf(head, sizeof head, "kernel %s memory no allocation holds",
                 write ? "writes" : "reads");
    }
    r.headline = head;
    where_text(where, sizeof where, f, rec->addr, rec->size);
    if (g->known)
        vg__memcheck_pc_text(&g->l, rec->pc, pc, sizeof pc, src, sizeof src);
    else
        snprintf(pc, sizeof pc, "pc 0x%llx", (unsigned long long)rec->pc);
    stream_text(st, sizeof st, g->l.stream);
    if (g->count > 1 && f->has_block)
        snprintf(more, sizeof more, "; %llu such accesses logged, to bytes %lld to %lld of it",
                 (unsigned long long)g->count, (long long)g->lo, (long long)g->hi);
    else if (g->count > 1)
        snprintf(more, sizeof more, "; %llu such accesses logged",
                 (unsigned long long)g->count);
    char short_name[VG_KERNEL_SHORT + 1];
    int len = snprintf(r.lead, sizeof r.lead, "%s (launch #%llu on %s), block (%u,%u,%u) "
                       "thread (%u,%u,%u) %s %s%s",
                       vg__kernel_name_short(kernel, short_name, sizeof short_name),
                       (unsigned long long)g->l.seq, st, rec->block[0], rec->block[1],
                       rec->block[2], rec->thread[0], rec->thread[1], rec->thread[2],
                       rec->flags & VG_MC_ATOMIC ? "updates atomically"
                       : write                   ? "writes"
                                                 : "reads",
                       where, more);
    if (len >= (int)sizeof r.lead) /* (cut: say so) */
        memcpy(r.lead + sizeof r.lead - 4, "...", 4);
    snprintf(r.detail, sizeof r.detail,
             "at %s, address 0x%llx\n"
             "memcheck mode checked it on the device, before the access was made: on a GPU "
             "the\naccess went ahead (it lies in vramguard's memory, so the driver does not "
             "fault)",
             pc, (unsigned long long)rec->addr);
    vg_buf_t j = {0};
    vg__buf_printf(&j, ",\"access\":{\"operation\":\"%s\",\"size\":%u,\"address\":\"0x%llx\","
                   "\"offset\":%lld,\"past_end\":%lld,\"before_start\":%lld,\"accesses\":%llu,"
                   "\"kernel\":",
                   op, rec->size, (unsigned long long)rec->addr,
                   f->has_block ? (long long)off : 0LL,
                   f->has_block && off + (int64_t)rec->size > (int64_t)f->size
                       ? (long long)(off + rec->size - f->size) : 0LL,
                   f->has_block && off < 0 ? (long long)-off : 0LL,
                   (unsigned long long)g->count);
    vg__buf_json_str(&j, kernel);
    vg__buf_printf(&j, ",\"launch\":%llu,\"block\":[%u,%u,%u],\"thread\":[%u,%u,%u],\"pc\":",
                   (unsigned long long)g->l.seq, rec->block[0], rec->block[1], rec->block[2],
                   rec->thread[0], rec->thread[1], rec->thread[2]);
    vg__buf_json_str(&j, pc);
    vg__buf_printf(&j, ",\"source\":");
    if (src[0])
        vg__buf_json_str(&j, src);
    else
        vg__buf_printf(&j, "null");
    vg__buf_printf(&j, ",\"stream\":\"%p\",\"checked_on_device\":true}", (void *)g->l.stream);
    if (j.data && j.len < sizeof r.json)
        memcpy(r.json, j.data, j.len + 1);
    vg__buf_free(&j);
    r.found = "by memcheck mode's device callback (the Compute Sanitizer API)";
    vg__report(&r);
}

#define GROUPS 64

/* Records [0, n) of one poll, grouped and reported (each group once per run). */
static void report_all(vg_heap_t *h, const vg_mc_record_t *recs, size_t n) {
    group_t *gs = calloc(GROUPS, sizeof *gs);
    if (!gs)
        return;
    size_t ng = 0;
    site_keys_t sk = {.n = 0};
    for (size_t i = 0; i < n; i++) {
        group_t one;
        uint64_t key = describe(h, &recs[i], &one, &sk);
        atomic_fetch_add(&g_found, 1);
        size_t k = 0;
        while (k < ng && gs[k].key != key)
            k++;
        if (k < ng) {
            gs[k].count++;
            gs[k].lo = one.lo < gs[k].lo ? one.lo : gs[k].lo;
            gs[k].hi = one.hi > gs[k].hi ? one.hi : gs[k].hi;
            continue;
        }
        if (ng == GROUPS) { /* (many at once: report these, start again) */
            for (size_t q = 0; q < ng; q++)
                if (vg__report_first_time(gs[q].key))
                    emit(&gs[q]);
            ng = 0;
        }
        gs[ng] = one;
        gs[ng++].key = key;
    }
    for (size_t q = 0; q < ng; q++)
        if (vg__report_first_time(gs[q].key))
            emit(&gs[q]);
    free(gs);
}

void vg__memcheck_poll(vg_heap_t *h) {
    vg_mc_log_t *log = vg__memcheck_log(h);
    if (!log)
        return;
    uint32_t *read = &log->read;
    uint32_t count = __atomic_load_n(&log->count, __ATOMIC_ACQUIRE);
    if (*read == count)
        return;
    /* Indices [read, read + capacity) get a record; later ones, taken while the log was
     * full, never do (kernels/memcheck_abi.h). */
    uint32_t kept = count - *read < log->capacity ? count - *read : log->capacity;
    uint32_t end = *read + kept;
    vg_mc_record_t *recs = malloc((size_t)log->capacity * sizeof *recs);
    size_t n = 0;
    while (recs && *read != end) {
        const vg_mc_record_t *slot = &log->rec[*read % log->capacity];
        if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != *read + 1)
            break; /* still being written: read it next time */
        recs[n++] = *slot;
        __atomic_store_n(read, *read + 1, __ATOMIC_RELEASE);
    }
    if (*read == end && end != count) /* (the indices that got no record) */
        __atomic_store_n(read, count, __ATOMIC_RELEASE);
    uint32_t dropped = __atomic_exchange_n(&log->dropped, 0, __ATOMIC_ACQ_REL);
    atomic_fetch_add(&g_lost, dropped);
    if (recs)
        report_all(h, recs, n);
    free(recs);
}

void vg__memcheck_exit_summary(void) {
    if (!vg__memcheck_on())
        return;
    uint64_t modules, unpatched, checked, skipped;
    vg__memcheck_counts(&modules, &unpatched, &checked, &skipped);
    uint64_t found = atomic_load(&g_found), reported = atomic_load(&g_reported),
             lost = atomic_load(&g_lost);
    if (found > reported || lost) {
        char more[160] = "";
        if (lost)
            snprintf(more, sizeof more, "; %llu of them came while the log was full (it keeps "
                     "1024 between two checks) and were counted, not described",
                     (unsigned long long)lost);
        vg__log("memcheck: %llu bad accesses in all, %llu report%s (one per kernel, allocation "
                "and kind of error)%s",
                (unsigned long long)(found + lost), (unsigned long long)reported,
                reported == 1 ? "" : "s", more);
    }
    if (!vg__opt.verbose)
        return;
    char spared[160] = ""; /* (memcheck_kernels left modules unpatched) */
    if (unpatched)
        snprintf(spared, sizeof spared, ", %llu left unpatched (no kernel memcheck_kernels "
                 "names: they run unchecked, at full speed)", (unsigned long long)unpatched);
    vg__log("memcheck: %llu modules patched%s; %llu launches checked, %llu not "
            "(memcheck_every, memcheck_kernels, or before the first allocation); device "
            "callback %s",
            (unsigned long long)modules, spared, (unsigned long long)checked,
            (unsigned long long)skipped, vg__memcheck_callback());
    uint64_t maps, carried;
    vg__tensormap_counts(&maps, &carried);
    if (vg__opt.initcheck)
        vg__log("memcheck: initcheck: %llu tensor maps built; %llu launches carried one (what "
                "their bulk tensor copies may write counted as written)",
                (unsigned long long)maps, (unsigned long long)carried);
}
