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

#include "common.h"

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

static bool lookup(const table_t *t, uintptr_t a) {
    size_t lo = 0, hi = t ? t->n : 0;
    while (lo < hi) { /* the last range starting at or below a */
        size_t mid = (lo + hi) / 2;
        if (t->r[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && a < t->r[lo - 1].hi;
}

bool vg__is_code(uintptr_t addr, bool may_refresh) {
    table_t *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (lookup(t, addr))
        return true;
    if (!may_refresh)
        return false;
    uint64_t now = vg__now_coarse_ns();
    uint64_t next = atomic_load_explicit(&g_next_refresh_ns, memory_order_relaxed);
    if (t && now < next)
        return false;
    atomic_store_explicit(&g_next_refresh_ns, now + 10 * 1000 * 1000, memory_order_relaxed);
    rebuild();
    return lookup(atomic_load_explicit(&g_table, memory_order_acquire), addr);
}
