/* pinned.h — pinned host memory (S11): what the program pinned, by site; its cap, its
 * warning, its statistics.
 *
 * The interposer's hooks of cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister and their
 * frees call these around the driver's call: vg__pinned_admit before it (the cap),
 * vg__pinned_added or vg__pinned_failed after it; vg__pinned_remove before a free or an
 * unregistration, vg__pinned_free_time after it. Leaks at exit and growth per step are
 * reported by leaks.c from the records and the sites' pinned counters (sites.h).
 */
#ifndef VG_PINNED_H
#define VG_PINNED_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

/* One pinned range, as the driver returned or registered it. */
typedef struct vg_pinned_rec {
    uintptr_t base;
    uint64_t size;
    uint32_t site;     /* where the program pinned it */
    bool registered;   /* cuMemHostRegister (else cuMemHostAlloc / cuMemAllocHost) */
    const char *cache; /* the host caching allocator that pinned it, if its C stack said so */
    uint64_t id;       /* its number among the process's pinnings, from 1 */
} vg_pinned_rec_t;

/* Before the driver pins n bytes for `call` (the program's call at `site`): false if
 * that would take the process past pinned_limit; then the failure has been explained (a
 * report in guard mode, a log line otherwise) and the hook returns
 * CUDA_ERROR_OUT_OF_MEMORY without calling the driver. True: the bytes are counted
 * until vg__pinned_added or vg__pinned_failed says how the call ended. */
bool vg__pinned_admit(uint64_t n, uint32_t site, const char *call);
/* The driver pinned [p, p + n) in elapsed_ns; cache: the host caching allocator that
 * asked (leaks.h, vg__host_cache_here), or NULL. */
void vg__pinned_added(const void *p, uint64_t n, uint32_t site, bool registered,
                      const char *cache, uint64_t elapsed_ns);
/* The driver refused to pin n bytes with `result` (a CUresult): the admitted bytes go;
 * CUDA_ERROR_OUT_OF_MEMORY is explained as the cap's failure is. */
void vg__pinned_failed(uint64_t n, uint32_t site, const char *call, int result);
/* Before the driver frees (registered: unregisters) p: forget its record. True, and *rec
 * (may be NULL) its record, if p was pinned that way. */
bool vg__pinned_remove(const void *p, bool registered, vg_pinned_rec_t *rec);
/* The driver refused to free or unregister r (removed by vg__pinned_remove): it counts
 * again. */
void vg__pinned_restore(const vg_pinned_rec_t *r);
/* A free or unregistration took elapsed_ns in the driver. */
void vg__pinned_free_time(uint64_t elapsed_ns);

/* Is [lo, hi) inside one pinned range? */
bool vg__pinned_contains(uintptr_t lo, uintptr_t hi);
/* Call fn on every pinned range (under the module's lock: fn must not call back). */
void vg__pinned_each(void (*fn)(const vg_pinned_rec_t *r, void *arg), void *arg);

/* The process's counters (vramguard.h; alloc/stats.c writes them as JSON and as rows of
 * the summary table). */
void vg__pinned_stats(vg_host_stats_t *out);
struct vg_events;
/* For snapshots: a copy of the pinned events kept (alloc, free, oom), a ring as a heap's
 * (the caller frees out->ring). False if the process never pinned memory vramguard saw. */
bool vg__pinned_events(struct vg_events *out);
/* verbose: the peak and what is still pinned, a line at exit. */
void vg__pinned_describe_exit(void);

#endif /* VG_PINNED_H */
