/* stats.h — updating the statistics (the struct itself is public: vg_stats_t).
 *
 * Every counter is a vg_stat_t {current, peak, allocated, freed}; pooled counters have
 * one per pool (all, small, large) and an update touches "all" and the block's pool.
 * Updates happen under the heap's lock, so they are plain adds.
 */
#ifndef VG_STATS_H
#define VG_STATS_H

#include <stdint.h>

#include "../../include/vramguard.h"

static inline void vg__stat_add(vg_stat_t *s, int64_t d) {
    s->current += d;
    if (d > 0) {
        s->allocated += d;
        if (s->current > s->peak)
            s->peak = s->current;
    } else {
        s->freed -= d;
    }
}

static inline int vg__pool_of(uint64_t block_size) {
    return block_size <= (1ull << 20) ? VG_POOL_SMALL : VG_POOL_LARGE;
}

/* Add d to st[all] and st[pool]. */
static inline void vg__stat_pool(vg_stat_t st[VG_POOLS], int pool, int64_t d) {
    vg__stat_add(&st[VG_POOL_ALL], d);
    vg__stat_add(&st[pool], d);
}

struct vg_heap;
/* Fill the computed fields (inactive split, largest blocks) of h->stats and copy it out
 * (heap lock held). */
void vg__stats_snapshot(struct vg_heap *h, vg_stats_t *out);
/* The PyTorch-layout summary table of a stats snapshot, with the process's pinned host
 * memory below (host: NULL, or none pinned: no rows). */
char *vg__stats_summary(const vg_stats_t *s, int device, const vg_host_stats_t *host);
/* Pinned host memory counters as torch.cuda.host_memory_stats()'s JSON (caller frees). */
char *vg__host_stats_json(const vg_host_stats_t *h);
char *vg__stats_json(const vg_stats_t *s);

#endif /* VG_STATS_H */
