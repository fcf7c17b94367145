/* segment.c — the allocator's physical memory (docs/decisions.md A1).
 *
 * VMM heaps reserve one virtual range of twice the device's memory and map 2 MiB pages
 * into it, one physical handle per page, where blocks need them. Physical memory comes,
 * in this order, from:
 *   1. spare handles (unmapped pages kept after earlier moves),
 *   2. cuMemCreate, within the `limit` option and the device's memory,
 *   3. under memory pressure, idle pages: mapped pages lying wholly inside free blocks
 *      whose last use has completed — unmapped and mapped again where they are needed.
 * So memory that is free is never stranded by fragmentation: a request fails only when
 * live data fills the pages. Pages are moved only under pressure, because moving them
 * eagerly makes a repeating workload move them back and forth on every iteration.
 *
 * Without VMM (vmm=off, or no driver/device support) segments are cuMemAlloc'd chunks
 * with PyTorch's sizes: 2 MiB for requests up to 1 MiB, 20 MiB up to 10 MiB, the request
 * rounded to 2 MiB above. A segment whose blocks are all free and complete can be freed.
 * A managed heap's segments (guard mode's managed memory) are cuMemAllocManaged'd chunks
 * of the same sizes.
 *
 * Reserved memory (stats.reserved_bytes) is every physical byte held: mapped pages, spare
 * pages and cuMemAlloc'd segments. A page counts in the pool of the range it is mapped
 * into (the small-request range: the small pool), an unmapped one in the large pool; a
 * page that moves between the ranges moves between the pools (page_moved). All functions run with the heap's lock held and may
 * call the driver; the heap's context is current (heap.c sees to it).
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "heap.h"
#include "hooks.h"
#include "base/options.h"

#define SLAB 256

/* ---------------------------------------------------------------------------------------
 * Block structs: recycled through a free list, allocated in slabs.
 * ------------------------------------------------------------------------------------- */

vg_block_t *vg__block_new(vg_heap_t *h) {
    if (!h->block_pool) {
        vg_block_t *slab = malloc(SLAB * sizeof *slab);
        if (!slab)
            return NULL;
        for (int i = 0; i < SLAB; i++) {
            slab[i].fnext = h->block_pool;
            h->block_pool = &slab[i];
        }
    }
    vg_block_t *b = h->block_pool;
    h->block_pool = b->fnext;
    memset(b, 0, sizeof *b);
    return b;
}

void vg__block_put(vg_heap_t *h, vg_block_t *b) {
    b->state = VG_BLOCK_PUT; /* poison: a stale pointer to it is caught by the validator */
    b->fnext = h->block_pool;
    h->block_pool = b;
}

/* ---------------------------------------------------------------------------------------
 * Segments
 * ------------------------------------------------------------------------------------- */

static vg_segment_t *segment_add(vg_heap_t *h, uint64_t base, uint64_t size, bool vmm,
                                 uint8_t cls) {
    vg_segment_t *seg = calloc(1, sizeof *seg);
    vg_block_t *b = vg__block_new(h);
    if (!seg || !b) {
        free(seg);
        if (b)
            vg__block_put(h, b);
        return NULL;
    }
    seg->base = base;
    seg->size = size;
    seg->vmm = vmm;
    seg->small = cls == VG_CLASS_SMALL;
    seg->cls = cls;
    if (vmm) {
        seg->npages = size / h->page;
        seg->pages = calloc(seg->npages, sizeof *seg->pages);
        if (!seg->pages) {
            free(seg);
            vg__block_put(h, b);
            return NULL;
        }
    }
    b->addr = base;
    b->size = size;
    b->seg = seg;
    b->state = VG_BLOCK_FREE;
    b->mapped = !vmm;
    seg->first = b;
    seg->next = h->segments;
    h->segments = seg;
    vg__addrindex_span(base, size);
    vg__tlsf_insert(&h->index, b);
    vg__tell_segment_added(h, seg); /* (compute-sanitizer: a heap, G12) */
    return seg;
}

/* Reserve device address space for a segment: twice the device's memory (or at_least),
 * or, for the small-request range, as much as the device's memory. */
static vg_status_t reserve_range(vg_heap_t *h, uint64_t at_least, bool small,
                                 vg_segment_t **out) {
    uint64_t want = vg__align_up(small ? VG_MAX(h->device_total, at_least)
                                       : VG_MAX(2 * h->device_total, at_least),
                                 h->page);
    for (int tries = 0; tries < 4; tries++) {
        CUdeviceptr va = 0;
        bool pushed = vg__heap_ctx_enter(h); /* (the first small request may come here) */
        CUresult r = vg__cuMemAddressReserve(&va, want, h->page, 0, 0);
        vg__heap_ctx_leave(pushed);
        if (r == CUDA_SUCCESS) {
            vg_segment_t *seg =
                segment_add(h, va, want, true, small ? VG_CLASS_SMALL : VG_CLASS_GENERAL);
            if (!seg) {
                vg__cuMemAddressFree(va, want);
                return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
            }
            vg__stat_pool(h->stats.segment, small ? VG_POOL_SMALL : VG_POOL_LARGE, 1);
            *out = seg;
            return VG_OK;
        }
        if (want / 2 < at_least)
            return vg__error(vg__cu_status(r), "cuMemAddressReserve(%llu bytes) failed: %s",
                             (unsigned long long)want, vg__cu_error_name(r));
        want = vg__align_up(want / 2, h->page);
    }
    return vg__error(VG_ERR_OUT_OF_MEMORY, "no device address space left to reserve");
}

/* Who may access the heap's pages: its device, and every device that can reach its
 * memory peer to peer (docs/decisions.md A11). Memory from cuMemAlloc becomes reachable
 * from a peer once the program enables peer access (cudaDeviceEnablePeerAccess); pages
 * mapped through the VMM calls only with an access entry for that device, which the
 * program cannot know to ask for. */
static void access_init(vg_heap_t *h) {
    h->access[0] = (CUmemAccessDesc){.location = h->prop.location,
                                     .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    h->naccess = 1;
    int n = 0;
    if (!vg__drv_has(cuDeviceCanAccessPeer) || vg__cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return;
    for (int d = 0; d < n && h->naccess < VG_MAX_ACCESS; d++) {
        int can = 0;
        if (d == h->device || vg__cuDeviceCanAccessPeer(&can, d, h->device) != CUDA_SUCCESS ||
            !can)
            continue;
        h->access[h->naccess++] = (CUmemAccessDesc){
            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d},
            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    }
}

/* Grant access to [p, p + n): to every device of h->access, or, if the driver refuses the
 * peers, to the heap's device alone from then on (said once). */
static CUresult set_access(vg_heap_t *h, CUdeviceptr p, size_t n) {
    CUresult r = vg__cuMemSetAccess(p, n, h->access, (size_t)h->naccess);
    if (r != CUDA_SUCCESS && h->naccess > 1) {
        vg__log("device %d: the driver did not grant the peer devices access to vramguard's "
                "pages (%s): from now on only device %d reaches them, so another device's "
                "kernels cannot read them even with peer access enabled",
                h->device, vg__cu_error_name(r), h->device);
        h->naccess = 1;
        r = vg__cuMemSetAccess(p, n, h->access, 1);
    }
    return r;
}

vg_status_t vg__heap_init_segments(vg_heap_t *h) {
    int vmm = 0;
    if (vg__cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                 h->device) != CUDA_SUCCESS)
        vmm = 0;
    bool have = vmm && vg__drv_has(cuMemCreate) && vg__drv_has(cuMemMap) &&
                vg__drv_has(cuMemUnmap) && vg__drv_has(cuMemSetAccess) &&
                vg__drv_has(cuMemAddressReserve) && vg__drv_has(cuMemRelease) &&
                vg__drv_has(cuMemGetAllocationGranularity);
    if (vg__opt.vmm == VG_VMM_OFF || h->managed || /* (managed: cuMemAllocManaged chunks) */
        vg__alloc_plain_segments())                 /* (compute-sanitizer's pools: G12) */
        have = false;
    else if (vg__opt.vmm == VG_VMM_ON && !have)
        return vg__error(VG_ERR_NOT_SUPPORTED,
                         "vmm=on, but device %d or its driver has no virtual memory management "
                         "(use vmm=auto to fall back to cuMemAlloc segments)",
                         h->device);
    h->vmm = false;
    h->page = 2ull << 20;
    if (have) {
        memset(&h->prop, 0, sizeof h->prop);
        h->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        h->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        h->prop.location.id = h->device;
        access_init(h);
        size_t gran = 0;
        CUresult r = vg__cuMemGetAllocationGranularity(&gran, &h->prop,
                                                       CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        if (r == CUDA_SUCCESS && gran >= VG_ALIGN && (gran & (gran - 1)) == 0) {
            h->page = gran;
            vg_segment_t *seg;
            if (reserve_range(h, h->page, false, &seg) == VG_OK)
                h->vmm = true;
        }
        if (!h->vmm && vg__opt.vmm == VG_VMM_ON)
            return vg__error(VG_ERR_NOT_SUPPORTED,
                             "vmm=on, but reserving device address space failed on device %d",
                             h->device);
    }
    return VG_OK;
}

vg_segment_t *vg__segment_small_range(vg_heap_t *h) {
    if (!h->small_seg && h->vmm) {
        vg_segment_t *seg;
        if (reserve_range(h, h->page, true, &seg) == VG_OK)
            h->small_seg = seg;
        else
            h->small_max = 0; /* no address space for it: one range for all requests */
    }
    return h->small_seg;
}

vg_segment_t *vg__segment_arena(vg_heap_t *h, uint64_t bytes) {
    uint64_t want = vg__align_up(bytes ? bytes : 1, h->page);
    CUdeviceptr va = 0;
    bool pushed = vg__heap_ctx_enter(h);
    CUresult r = h->vmm ? vg__cuMemAddressReserve(&va, want, h->page, 0, 0)
                        : CUDA_ERROR_NOT_SUPPORTED;
    vg__heap_ctx_leave(pushed);
    if (r != CUDA_SUCCESS)
        return NULL;
    vg_segment_t *seg = segment_add(h, va, want, true, VG_CLASS_ARENA);
    if (!seg) {
        vg__cuMemAddressFree(va, want);
        return NULL;
    }
    vg__stat_pool(h->stats.segment, VG_POOL_LARGE, 1);
    return seg;
}

void vg__segment_arena_retire(vg_heap_t *h, vg_segment_t *seg) {
    for (vg_block_t *b = seg->first; b; b = b->next) /* (its free blocks change class) */
        if (b->state == VG_BLOCK_FREE)
            vg__tlsf_remove(&h->index, b);
    seg->cls = VG_CLASS_GENERAL;
    for (vg_block_t *b = seg->first; b; b = b->next)
        if (b->state == VG_BLOCK_FREE)
            vg__tlsf_insert(&h->index, b);
}

static uint64_t plain_segment_size(uint64_t size) {
    if (size <= (1ull << 20))
        return 2ull << 20;
    if (size < (10ull << 20))
        return 20ull << 20;
    return vg__align_up(size, 2ull << 20);
}

static bool over_limit(vg_heap_t *h, uint64_t more) {
    return h->limit && (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current + more > h->limit;
}

vg_status_t vg__segment_grow(vg_heap_t *h, uint64_t size, vg_block_t **out) {
    if (h->vmm) { /* only when no reservation has a free range this large */
        vg_segment_t *seg;
        vg_status_t st = reserve_range(h, size, false, &seg);
        if (st != VG_OK)
            return st;
        *out = seg->first;
        return VG_OK;
    }
    uint64_t segsize = plain_segment_size(size);
    if (over_limit(h, segsize))
        return VG_ERR_OUT_OF_MEMORY;
    CUdeviceptr p = 0;
    CUresult r = h->managed ? vg__cuMemAllocManaged(&p, segsize, CU_MEM_ATTACH_GLOBAL)
                            : vg__cuMemAlloc(&p, segsize);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return VG_ERR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS)
        return vg__error(vg__cu_status(r), "%s(%llu bytes) failed: %s",
                         h->managed ? "cuMemAllocManaged" : "cuMemAlloc",
                         (unsigned long long)segsize, vg__cu_error_name(r));
    vg_segment_t *seg = segment_add(h, p, segsize, false, VG_CLASS_GENERAL);
    if (!seg) {
        vg__cuMemFree(p);
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    }
    int pool = segsize == (2ull << 20) ? VG_POOL_SMALL : VG_POOL_LARGE;
    vg__stat_pool(h->stats.reserved_bytes, pool, (int64_t)segsize);
    vg__stat_pool(h->stats.segment, pool, 1);
    h->stats.num_device_alloc++;
    vg__event(h, VG_EV_MAP, p, segsize, NULL, 0);
    *out = seg->first;
    return VG_OK;
}

/* ---------------------------------------------------------------------------------------
 * Pages
 * ------------------------------------------------------------------------------------- */

size_t vg__segment_unmapped_pages(const vg_segment_t *seg, uint64_t addr, uint64_t size) {
    if (!seg->vmm)
        return 0;
    uint64_t page = seg->size / seg->npages;
    size_t p0 = (addr - seg->base) / page, p1 = (addr + size - 1 - seg->base) / page, n = 0;
    for (size_t i = p0; i <= p1; i++)
        n += !seg->pages[i];
    return n;
}

bool vg__segment_range_mapped(const vg_segment_t *seg, uint64_t addr, uint64_t size) {
    return vg__segment_unmapped_pages(seg, addr, size) == 0;
}

static bool spare_push(vg_heap_t *h, CUmemGenericAllocationHandle hd) {
    if (h->nspare == h->capspare) {
        size_t cap = h->capspare ? h->capspare * 2 : 64;
        CUmemGenericAllocationHandle *p = realloc(h->spare, cap * sizeof *p);
        if (!p)
            return false;
        h->spare = p;
        h->capspare = cap;
    }
    h->spare[h->nspare++] = hd;
    return true;
}

/* A page was mapped into seg (mapped) or unmapped from it: a page of the small-request
 * range counts in the small pool, any other in the large pool. */
static void page_moved(vg_heap_t *h, const vg_segment_t *seg, bool mapped) {
    if (!seg->small)
        return;
    int64_t d = mapped ? (int64_t)h->page : -(int64_t)h->page;
    vg__stat_add(&h->stats.reserved_bytes[VG_POOL_LARGE], -d);
    vg__stat_add(&h->stats.reserved_bytes[VG_POOL_SMALL], d);
}

/* Release a physical page; if the driver refuses, keep it as a spare (still counted). */
static void page_release(vg_heap_t *h, CUmemGenericAllocationHandle hd) {
    if (vg__cuMemRelease(hd) == CUDA_SUCCESS)
        vg__stat_pool(h->stats.reserved_bytes, VG_POOL_LARGE, -(int64_t)h->page);
    else
        spare_push(h, hd);
}

/* Give back handles taken for a mapping that did not complete. */
static void handles_return(vg_heap_t *h, CUmemGenericAllocationHandle *hs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!spare_push(h, hs[i]))
            page_release(h, hs[i]);
}

typedef struct steal_ctx {
    vg_heap_t *h;
    const vg_segment_t *target;
    size_t p0, p1;             /* pages of the target range: never stolen */
    size_t need, got;
    CUmemGenericAllocationHandle *out;
    bool release;              /* trim: release the handles instead of keeping them */
} steal_ctx_t;

/* Unmap the idle whole pages of free block b (complete, VMM). */
static bool steal_from(vg_block_t *b, void *arg) {
    steal_ctx_t *c = arg;
    vg_segment_t *seg = b->seg;
    if (!seg->vmm || !vg__block_complete(b) || b->state != VG_BLOCK_FREE)
        return true;
    uint64_t page = c->h->page;
    uint64_t lo = vg__align_up(b->addr - seg->base, page);
    uint64_t hi = VG_MIN(vg__align_down(b->addr + b->size - seg->base, page),
                         seg->mapped_end * page); /* (a reservation's unmapped tail: skipped) */
    for (uint64_t off = lo; off < hi && c->got < c->need; off += page) {
        size_t i = off / page;
        if (!seg->pages[i] || (seg == c->target && i >= c->p0 && i <= c->p1))
            continue;
        if (vg__cuMemUnmap(seg->base + off, page) != CUDA_SUCCESS)
            continue; /* leave it mapped; the page is simply not taken */
        c->h->stats.num_device_free++;
        vg__event(c->h, VG_EV_UNMAP, seg->base + off, page, NULL, 0);
        CUmemGenericAllocationHandle hd = seg->pages[i];
        seg->pages[i] = 0;
        seg->nmapped--;
        page_moved(c->h, seg, false);
        b->mapped = 0;
        b->pat_head = b->pat_tail = 0; /* other physical memory will be mapped here */
        if (c->release) {
            page_release(c->h, hd);
        } else {
            c->out[c->got] = hd;
            c->h->stats.pages_moved++;
            if (!vg__heap_plan_followed(c->h))
                c->h->moved_unplanned++; /* (heap.h, vg__heap_settling) */
        }
        c->got++;
    }
    return c->got < c->need;
}

/* plan=on (docs/decisions.md A13): idle pages move where new ones would be made.
 *  - Into the arena, the other ranges' idle pages, always: the layout learnt goes one way,
 *    page by page, as the plan takes over.
 *  - Into the other ranges while the plan is followed, any idle page: the arena's are lent
 *    to a request whose planned place was taken, and come back as it frees.
 *  - Beyond that, only once new pages would reserve more than the peak of allocated bytes
 *    (or what is allocated now with this request): while the step is learnt (without these
 *    moves the first steps' layout sets the peak: GPT-2 1.128 in the model), and, into the
 *    arena, from its own idle places (a perturbed order's misses spread over it).
 * Returns the handles now in hs. */
static size_t plan_moves(vg_heap_t *h, vg_segment_t *seg, vg_stream_t *s, uint64_t size,
                         size_t p0, size_t p1, size_t need, size_t got,
                         CUmemGenericAllocationHandle *hs) {
    if (h->no_idle_gen == h->completion_gen + 1)
        return got; /* (a scan since the last completion found none) */
    uint64_t page = h->page;
    const vg_stat_t *a = &h->stats.allocated_bytes[VG_POOL_ALL];
    uint64_t live = VG_MAX((uint64_t)a->peak, (uint64_t)a->current + size);
    uint64_t room = VG_MAX(live, 2 * page);
    if (vg__heap_settling(h, size)) /* (new pages within 1 % of it: the moves stop) */
        room += room / 100;
    uint64_t after = (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current + (need - got) * page;
    size_t over = after > room ? (size_t)((after - room + page - 1) / page) : 0;
    /* (the arena's own pages move only after a miss: a cycle followed without one uses
     * them all at their planned places, and moving them would repeat every cycle) */
    size_t own_over = h->next_id < h->arena_missed_until ? over : 0;
    size_t always = vg__heap_plan_followed(h) ? need - got : 0; /* (dormant: beyond room) */
    bool into_arena = seg->cls == VG_CLASS_ARENA;
    steal_ctx_t c = {h, seg, p0, p1, got + VG_MIN(need - got, VG_MAX(always, over)), got, hs,
                     false};
    for (int pass = 0; pass < 2 && c.got < c.need; pass++) {
        /* A page may move only once the work that used it has completed (cuMemUnmap does
         * not wait for it). Frees since the last completion learnt are not known complete
         * yet: if the complete idle pages are too few, wait for the request's stream, on
         * which a training loop frees its tensors — for 50 ms at most: its work may wait
         * for this thread (a host function), which holds the heap's lock; new pages are
         * made then. */
        if (pass == 1) {
            if (!s || !vg__stream_refresh_within(s, 50000000))
                break;
            h->completion_gen++;
            h->stats.page_move_waits++;
        }
        for (int cls = 0; cls < VG_CLASSES && c.got < c.need; cls++) {
            if (into_arena && cls == VG_CLASS_ARENA) { /* its own: beyond the room only */
                size_t all = c.need;
                c.need = VG_MIN(all, got + own_over);
                if (c.got < c.need)
                    vg__tlsf_each_desc_from(&h->index, cls, h->page, steal_from, &c);
                c.need = all;
                continue;
            }
            vg__tlsf_each_desc_from(&h->index, cls, h->page, steal_from, &c);
        }
    }
    return c.got;
}

vg_status_t vg__segment_map_range(vg_heap_t *h, vg_segment_t *seg, uint64_t addr,
                                  uint64_t size, vg_stream_t *s) {
    if (!seg->vmm)
        return VG_OK;
    uint64_t page = h->page;
    size_t p0 = (addr - seg->base) / page, p1 = (addr + size - 1 - seg->base) / page;
    size_t need = 0;
    for (size_t i = p0; i <= p1; i++)
        need += !seg->pages[i];
    if (need == 0)
        return VG_OK;
    CUmemGenericAllocationHandle local[64];
    CUmemGenericAllocationHandle *hs = need <= 64 ? local : malloc(need * sizeof *hs);
    if (!hs)
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    size_t got = 0;
    while (got < need && h->nspare > 0) /* 1. spares */
        hs[got++] = h->spare[--h->nspare];
    if (VG_UNLIKELY(h->plan_moves) && got < need) /* (plan=on: idle pages, moved) */
        got = plan_moves(h, seg, s, size, p0, p1, need, got, hs);
    size_t new_lo = got; /* hs[new_lo, new_hi): created here, counted in seg's pool */
    vg_status_t st = VG_OK;
    while (got < need) { /* 2. new physical memory, within the limit and the device */
        if (over_limit(h, page)) {
            st = VG_ERR_OUT_OF_MEMORY;
            break;
        }
        CUresult r = vg__cuMemCreate(&hs[got], page, &h->prop, 0);
        if (r != CUDA_SUCCESS) {
            st = r == CUDA_ERROR_OUT_OF_MEMORY
                     ? VG_ERR_OUT_OF_MEMORY
                     : vg__error(vg__cu_status(r), "cuMemCreate failed: %s", vg__cu_error_name(r));
            break;
        }
        vg__stat_pool(h->stats.reserved_bytes, seg->small ? VG_POOL_SMALL : VG_POOL_LARGE,
                      (int64_t)page);
        got++;
    }
    size_t new_hi = got;
    /* 3. under memory pressure, idle pages: free pages whose last use has completed are
     * unmapped and mapped here, so free memory is never stranded by fragmentation. Only
     * worth a scan if some stream completed work since the last scan that found none. */
    if (st == VG_ERR_OUT_OF_MEMORY)
        h->memory_short = true; /* (guard mode shrinks its quarantine: heap.c) */
    if (st == VG_ERR_OUT_OF_MEMORY && h->no_idle_gen != h->completion_gen + 1) {
        steal_ctx_t c = {h, seg, p0, p1, need, got, hs, false};
        vg__tlsf_each_desc_from(&h->index, -1, h->page, steal_from, &c);
        if (c.got < need) /* every idle page is taken: none until the next completion */
            h->no_idle_gen = h->completion_gen + 1;
        got = c.got;
        if (got == need)
            st = VG_OK;
    }
    if (st != VG_OK) {
        for (size_t m = new_lo; m < new_hi; m++) /* (created for seg, now spares) */
            page_moved(h, seg, false);
        handles_return(h, hs, got);
        if (hs != local)
            free(hs);
        return st;
    }
    /* Map each missing page, then open access over each run of newly mapped pages. */
    size_t local_idx[64];
    size_t *idx = need <= 64 ? local_idx : malloc(need * sizeof *idx);
    if (!idx) {
        handles_return(h, hs, got);
        if (hs != local)
            free(hs);
        return vg__error(VG_ERR_OUT_OF_MEMORY, "out of host memory for the heap");
    }
    size_t k = 0; /* pages mapped by this call: idx[0..k), with handles hs[0..k) */
    for (size_t i = p0; i <= p1 && st == VG_OK; i++) {
        if (seg->pages[i])
            continue;
        CUresult r = vg__cuMemMap(seg->base + i * page, page, 0, hs[k], 0);
        if (r != CUDA_SUCCESS) {
            st = vg__error(r == CUDA_ERROR_OUT_OF_MEMORY ? VG_ERR_OUT_OF_MEMORY : vg__cu_status(r),
                           "cuMemMap failed: %s", vg__cu_error_name(r));
            break;
        }
        seg->pages[i] = hs[k];
        if (i >= seg->mapped_end)
            seg->mapped_end = i + 1;
        if (k < new_lo || k >= new_hi) /* a spare or an idle page: counted as unmapped */
            page_moved(h, seg, true);
        idx[k++] = i;
        seg->nmapped++;
        h->stats.num_device_alloc++;
        vg__event(h, VG_EV_MAP, seg->base + i * page, page, NULL, 0);
    }
    for (size_t i = p0; i <= p1 && st == VG_OK;) {
        if (!seg->pages[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j + 1 <= p1 && seg->pages[j + 1])
            j++;
        CUresult r = set_access(h, seg->base + i * page, (j - i + 1) * page);
        if (r != CUDA_SUCCESS)
            st = vg__error(vg__cu_status(r), "cuMemSetAccess failed: %s", vg__cu_error_name(r));
        i = j + 1;
    }
    if (st != VG_OK) {
        /* Undo this call's mappings so the page table matches the device. A page the
         * driver will not unmap stays mapped (and counted): it is just a free page. */
        for (size_t m = 0; m < k; m++) {
            size_t i = idx[m];
            if (vg__cuMemUnmap(seg->base + i * page, page) == CUDA_SUCCESS) {
                seg->pages[i] = 0;
                seg->nmapped--;
                page_moved(h, seg, false);
                h->stats.num_device_free++;
                vg__event(h, VG_EV_UNMAP, seg->base + i * page, page, NULL, 0);
                if (!spare_push(h, hs[m]))
                    page_release(h, hs[m]);
            }
        }
        for (size_t m = VG_MAX(k, new_lo); m < new_hi; m++) /* (never mapped: spares) */
            page_moved(h, seg, false);
        handles_return(h, hs + k, got - k);
    }
    if (idx != local_idx)
        free(idx);
    if (hs != local)
        free(hs);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Idle memory and trimming
 * ------------------------------------------------------------------------------------- */

typedef struct idle_ctx {
    vg_heap_t *h;
    uint64_t bytes;
} idle_ctx_t;

static bool count_idle(vg_block_t *b, void *arg) {
    idle_ctx_t *c = arg;
    vg_segment_t *seg = b->seg;
    if (!vg__block_complete(b))
        return true;
    if (!seg->vmm) {
        if (b->addr == seg->base && b->size == seg->size)
            c->bytes += seg->size;
        return true;
    }
    uint64_t page = c->h->page;
    uint64_t lo = vg__align_up(b->addr - seg->base, page);
    uint64_t hi = vg__align_down(b->addr + b->size - seg->base, page);
    for (uint64_t off = lo; off < hi; off += page)
        if (seg->pages[off / page])
            c->bytes += page;
    return true;
}

uint64_t vg__segment_idle_bytes(vg_heap_t *h) {
    idle_ctx_t c = {h, 0};
    vg__tlsf_each_desc(&h->index, count_idle, &c);
    return c.bytes + h->nspare * h->page;
}

vg_status_t vg__segment_trim(vg_heap_t *h) {
    if (h->vmm) {
        steal_ctx_t c = {h, NULL, 0, 0, SIZE_MAX, 0, NULL, true};
        vg__tlsf_each_desc_from(&h->index, -1, h->page, steal_from, &c);
        while (h->nspare > 0)
            page_release(h, h->spare[--h->nspare]);
    }
    /* cuMemAlloc'd segments that are entirely free and complete. */
    for (vg_segment_t **pp = &h->segments; *pp;) {
        vg_segment_t *seg = *pp;
        vg_block_t *b = seg->first;
        if (seg->vmm || b->state != VG_BLOCK_FREE || b->size != seg->size ||
            !vg__block_complete(b)) {
            pp = &seg->next;
            continue;
        }
        vg__tell_segment_removed(h, seg);
        CUresult r = vg__cuMemFree(seg->base);
        if (r != CUDA_SUCCESS)
            return vg__error(vg__cu_status(r), "cuMemFree of a cached segment failed: %s",
                             vg__cu_error_name(r));
        int pool = seg->size == (2ull << 20) ? VG_POOL_SMALL : VG_POOL_LARGE;
        vg__stat_pool(h->stats.reserved_bytes, pool, -(int64_t)seg->size);
        vg__stat_pool(h->stats.segment, pool, -1);
        h->stats.num_device_free++;
        vg__event(h, VG_EV_UNMAP, seg->base, seg->size, NULL, 0);
        vg__tlsf_remove(&h->index, b);
        vg__block_put(h, b);
        *pp = seg->next;
        vg__addrindex_free(seg);
        free(seg);
    }
    return VG_OK;
}

void vg__segment_release_all(vg_heap_t *h) {
    for (vg_segment_t *seg = h->segments, *next; seg; seg = next) {
        next = seg->next;
        vg__tell_segment_removed(h, seg);
        if (seg->vmm) {
            for (size_t i = 0; i < seg->npages; i++) {
                if (seg->pages[i]) {
                    vg__cuMemUnmap(seg->base + i * h->page, h->page);
                    vg__cuMemRelease(seg->pages[i]);
                }
            }
            vg__cuMemAddressFree(seg->base, seg->size);
            free(seg->pages);
        } else {
            vg__cuMemFree(seg->base);
        }
        vg__addrindex_free(seg);
        free(seg);
    }
    while (h->nspare > 0)
        vg__cuMemRelease(h->spare[--h->nspare]);
    h->segments = NULL;
}

void vg__segment_each_unmapped(const vg_segment_t *seg, uint64_t page,
                               bool (*fn)(uint64_t offset, uint64_t bytes, void *arg), void *arg) {
    for (size_t i = 0; seg->vmm && i < seg->npages;) {
        if (seg->pages[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < seg->npages && !seg->pages[j])
            j++;
        if (!fn(i * page, (j - i) * page, arg))
            return;
        i = j;
    }
}
