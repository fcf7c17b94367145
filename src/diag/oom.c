/* oom.c — explaining an allocation failure in the user's terms (scenarios S6, S7).
 *
 * The explanation states the request, the device's memory and what the driver says is
 * free, the cap if one is set, what vramguard holds (allocated, cached), the largest
 * block that could be served now, why the request failed (larger than the device, over
 * the limit, the device is full, or the cache is fragmented), and the allocation sites
 * holding the most memory. It is built into the thread's last-error text; the caller
 * decides whether to print it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"
#include "alloc/hooks.h"
#include "oom.h"
#include "pyframes.h"
#include "sites.h"

typedef struct site_rank {
    uint32_t id;
    int64_t bytes, count;
} site_rank_t;

static int by_bytes_desc(const void *a, const void *b) {
    const site_rank_t *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

void vg__sites_top(vg_buf_t *b, int n, const char *indent, bool pinned) {
    uint32_t count = vg__site_count();
    site_rank_t *r = malloc((size_t)count * sizeof *r);
    if (!r)
        return;
    int k = 0;
    for (uint32_t id = 0; id < count; id++) {
        vg_site_t *s = vg__site(id);
        if (!s)
            continue;
        int64_t bytes = atomic_load(pinned ? &s->pinned_bytes : &s->live_bytes);
        if (bytes > 0)
            r[k++] = (site_rank_t){id, bytes, atomic_load(pinned ? &s->pinned_count : &s->live_count)};
    }
    qsort(r, (size_t)k, sizeof *r, by_bytes_desc);
    if (k == 0)
        vg__buf_printf(b, "%s%s\n", indent, pinned ? "(nothing pinned)" : "(no live allocations)");
    for (int i = 0; i < k && i < n; i++) {
        vg_site_t *s = vg__site(r[i].id);
        char sz[32];
        vg__buf_printf(b, "%s%s in %lld allocation%s from", indent, vg__fmt_bytes(sz, (uint64_t)r[i].bytes),
                       (long long)r[i].count, r[i].count == 1 ? "" : "s");
        if (r[i].id == 0 || s->nframes == 0) {
            vg__buf_printf(b, " an unknown site (stack_depth=0)\n");
            continue;
        }
        vg__buf_printf(b, ":\n");
        uint32_t shown = vg__site_symbolize(s);
        for (uint32_t f = 0; f < shown && f < 6; f++)
            vg__buf_printf(b, "%s    #%u %s\n", indent, f, vg__symbolize(s->frames[f]));
    }
    if (k > n)
        vg__buf_printf(b, "%s... and %d more site%s\n", indent, k - n, k - n == 1 ? "" : "s");
    free(r);
}

static bool add_held(vg_block_t *b, void *arg) {
    if (b->state != VG_BLOCK_FREE)
        *(uint64_t *)arg += b->size;
    return true;
}

/* Mapped bytes of the small-request range that no block holds (A6). */
static uint64_t small_free(const vg_heap_t *h) {
    vg_segment_t *seg = h->small_seg;
    if (!seg)
        return 0;
    uint64_t held = 0;
    vg__segment_each_block(seg, add_held, &held);
    uint64_t mapped = (uint64_t)seg->nmapped * h->page;
    return mapped > held ? mapped - held : 0;
}

void vg__oom_explain(vg_heap_t *h, uint64_t requested, uint64_t size, CUstream stream) {
    vg_buf_t b = {0};
    char s1[32], s2[32], s3[32], s4[32];
    size_t drv_free = 0, drv_total = 0;
    bool have_info = vg__cuMemGetInfo(&drv_free, &drv_total) == CUDA_SUCCESS;
    char name[128] = "";
    vg__cuDeviceGetName(name, sizeof name, h->device);
    const vg_stats_t *st = &h->stats;
    uint64_t reserved = (uint64_t)st->reserved_bytes[VG_POOL_ALL].current;
    uint64_t allocated = (uint64_t)st->allocated_bytes[VG_POOL_ALL].current;
    uint64_t cached = reserved > allocated ? reserved - allocated : 0;
    uint64_t servable = size == UINT64_MAX ? 0 : vg__heap_largest_servable(h);
    uint64_t in_small = small_free(h);
    uint64_t pooled, graphs;
    vg__gpool_totals(h, &pooled, &graphs);

    vg__buf_printf(&b, "out of memory: cannot allocate %s (%llu bytes) on device %d",
                   vg__fmt_bytes(s1, requested), (unsigned long long)requested, h->device);
    if (stream)
        vg__buf_printf(&b, " (stream %p)", (void *)stream);
    vg__buf_printf(&b, "\n  device %d%s%s%s: %s in total", h->device, name[0] ? " (" : "", name,
                   name[0] ? ")" : "", vg__fmt_bytes(s2, h->device_total));
    if (have_info)
        vg__buf_printf(&b, ", %s free according to the driver", vg__fmt_bytes(s3, drv_free));
    vg__buf_printf(&b, "\n");
    if (h->limit)
        vg__buf_printf(&b, "  vramguard's limit on this device: %s (option limit)\n",
                       vg__fmt_bytes(s1, h->limit));
    vg__buf_printf(&b, "  vramguard holds %s: %s allocated in %lld block%s, %s cached and free\n",
                   vg__fmt_bytes(s1, reserved), vg__fmt_bytes(s2, allocated),
                   (long long)st->allocation[VG_POOL_ALL].current,
                   st->allocation[VG_POOL_ALL].current == 1 ? "" : "s",
                   vg__fmt_bytes(s3, cached));
    if (graphs)
        vg__buf_printf(&b, "  of that, CUDA graphs keep %s (%s of it freed by their captures, "
                           "reusable only by them while the graphs exist)\n",
                       vg__fmt_bytes(s1, graphs), vg__fmt_bytes(s2, pooled));
    vg__buf_printf(&b, "  the largest block that could be served now: %s\n",
                   vg__fmt_bytes(s4, servable));

    /* Why. */
    vg__buf_printf(&b, "  why: ");
    if (size == UINT64_MAX || requested > h->device_total)
        vg__buf_printf(&b, "the request is larger than the whole device (%s)",
                       vg__fmt_bytes(s1, h->device_total));
    else if (h->limit && size > h->limit)
        vg__buf_printf(&b, "the request is larger than the limit set for this device");
    else if (h->limit && reserved + (size > cached ? size - cached : 0) > h->limit)
        vg__buf_printf(&b, "serving it would take vramguard over its limit (%s already "
                           "allocated)",
                       vg__fmt_bytes(s1, allocated));
    else if (cached >= size && cached - pooled < size)
        vg__buf_printf(&b, "%s is cached and free, but %s of it is kept for CUDA graphs, which "
                           "may replay into it: destroy the graphs no longer needed (PyTorch: "
                           "reset() them or drop every reference)",
                       vg__fmt_bytes(s1, cached), vg__fmt_bytes(s2, pooled));
    else if (cached >= size && servable < size && size > h->small_max &&
             in_small >= cached / 2)
        vg__buf_printf(&b, "%s is cached and free, but %s of it lies in the range of small "
                           "requests (up to %s), in pages that live small allocations share: "
                           "a larger request cannot use it (the largest that could be served "
                           "now is %s; small_max=0 keeps one range for every size, "
                           "docs/decisions.md A6)",
                       vg__fmt_bytes(s1, cached), vg__fmt_bytes(s2, in_small),
                       vg__fmt_bytes(s3, h->small_max), vg__fmt_bytes(s4, servable));
    else if (cached >= size && servable < size)
        vg__buf_printf(&b, "%s is cached and free, but in pieces: the largest that could be "
                           "served now is %s (%s)",
                       vg__fmt_bytes(s1, cached), vg__fmt_bytes(s2, servable),
                       h->vmm ? "the pieces lie in pages that live allocations also use: only "
                                "whole idle pages can be moved to where they would join"
                       : vg__opt.vmm == VG_VMM_OFF
                           ? "memory is fragmented; vmm=off was given: with virtual memory "
                             "management (vmm=auto) free pages join wherever they lie"
                       : vg__alloc_plain_segments()
                           ? "memory is fragmented; under an NVTX tool (compute-sanitizer) "
                             "vramguard uses cuMemAlloc segments, whose free pieces join only "
                             "within a segment (docs/decisions.md G12)"
                           : "memory is fragmented; the driver or device offers no virtual "
                             "memory management, with which free pages would join");
    else if (allocated + size > h->device_total)
        vg__buf_printf(&b, "live allocations (%s) plus this request exceed the device",
                       vg__fmt_bytes(s1, allocated));
    else
        vg__buf_printf(&b, "the device has too little free memory (other processes or "
                           "contexts may hold it)");
    vg__buf_printf(&b, "\n  top holders by allocation site:\n");
    vg__sites_top(&b, 5, "    ", false);
    if (vg__pyframes_missed())
        vg__buf_printf(&b, "  (C frames: with python_frames=1, as in guard mode, the sites are "
                           "the Python lines that allocated)\n");
    vg__error(VG_ERR_OUT_OF_MEMORY, "%s", b.data ? b.data : "out of memory");
    vg__buf_free(&b);
}
