/* textmap.c — the executable segments of the loaded objects (see textmap.h).
 *
 * A sorted array of [lo, hi) ranges, published with a release store and never freed
 * (a replaced table is kept on a list: readers may still hold it, and there are only as
 * many as there were dlopen()s that changed the set). Rebuilt with dl_iterate_phdr when a
 * lookup misses and the loader's "objects added" count moved, at most every 10 ms.
 */
#define _GNU_SOURCE
#include "textmap.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/common.h"

typedef struct table {
    struct table *retired;   /* the table this one replaced */
    unsigned long long adds; /* the loader's dlpi_adds when built */
    size_t n, cap;
    struct { uintptr_t lo, hi; } r[];
} table_t;

static _Atomic(table_t *) g_table;
static pthread_mutex_t g_build_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_next_refresh_ns;

static int collect(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    table_t **tp = arg;
    table_t *t = *tp;
    t->adds = info->dlpi_adds;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        if (t->n == t->cap) {
            size_t cap = t->cap * 2;
            table_t *g = realloc(t, sizeof *t + cap * sizeof t->r[0]);
            if (!g)
                return 1; /* keep what we have */
            *tp = t = g;
            t->cap = cap;
        }
        t->r[t->n].lo = info->dlpi_addr + ph->p_vaddr;
        t->r[t->n].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        t->n++;
    }
    return 0;
}

static int by_lo(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the first object is enough */
}

static void rebuild(void) {
    pthread_mutex_lock(&g_build_lock);
    table_t *old = atomic_load_explicit(&g_table, memory_order_acquire);
    unsigned long long adds = 0;
    dl_iterate_phdr(read_adds, &adds);
    if (!old || old->adds != adds) {
        table_t *t = malloc(sizeof *t + 64 * sizeof t->r[0]);
        if (t) {
            t->n = 0;
            t->cap = 64;
            dl_iterate_phdr(collect, &t);
            qsort(t->r, t->n, sizeof t->r[0], by_lo);
            t->retired = old;
            atomic_store_explicit(&g_table, t, memory_order_release);
        }
    }
    pthread_mutex_unlock(&g_build_lock);
}

/* 1 + the index of the range holding a, or 0. */
static size_t lookup_index(const table_t *t, uintptr_t a) {
    size_t lo = 0, hi = t ? t->n : 0;
    while (lo < hi) { /* the last range starting at or below a */
        size_t mid = (lo + hi) / 2;
        if (t->r[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && a < t->r[lo - 1].hi ? lo : 0;
}

static bool lookup(const table_t *t, uintptr_t a) { return lookup_index(t, a) != 0; }

/* Per thread, the last ranges that matched (of table t_cache_table): a backtrace's
 * return addresses fall in two or three objects, so most checks are two compares. */
static VG_TLS_FAST const table_t *t_cache_table;
static VG_TLS_FAST uintptr_t t_cache_lo[2], t_cache_hi[2];
static VG_TLS_FAST unsigned t_cache_next;
static VG_TLS_FAST uintptr_t t_last_miss; /* the frame a walk usually ends on */

/* Remember, for this thread and table t, a range that matched or the address that missed. */
static void cache_use(const table_t *t) {
    if (t_cache_table != t) {
        t_cache_table = t;
        t_cache_lo[0] = t_cache_hi[0] = t_cache_lo[1] = t_cache_hi[1] = 0;
        t_last_miss = 0;
    }
}

bool vg__is_code(uintptr_t addr, bool may_refresh) {
    table_t *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (t && t == t_cache_table) {
        if ((addr >= t_cache_lo[0] && addr < t_cache_hi[0]) ||
            (addr >= t_cache_lo[1] && addr < t_cache_hi[1]))
            return true;
        if (addr == t_last_miss)
            return false; /* a walk usually ends on the same frame: known not code */
    }
    size_t i = t ? lookup_index(t, addr) : 0;
    if (i > 0) {
        cache_use(t);
        unsigned k = t_cache_next++ & 1;
        t_cache_lo[k] = t->r[i - 1].lo;
        t_cache_hi[k] = t->r[i - 1].hi;
        return true;
    }
    bool hit = false;
    uint64_t now = may_refresh ? vg__now_coarse_ns() : 0;
    if (may_refresh && (!t || now >= atomic_load_explicit(&g_next_refresh_ns, memory_order_relaxed))) {
        /* Perhaps a library loaded since the table was built: at most every 10 ms. */
        atomic_store_explicit(&g_next_refresh_ns, now + 10 * 1000 * 1000, memory_order_relaxed);
        rebuild();
        t = atomic_load_explicit(&g_table, memory_order_acquire);
        hit = lookup(t, addr);
    }
    if (!hit && t) {
        cache_use(t);
        t_last_miss = addr;
    }
    return hit;
}
