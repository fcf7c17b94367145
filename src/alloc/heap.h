/* heap.h — the allocator's data structures (see docs/decisions.md A1, A2).
 *
 * One heap per device context. All metadata lives on the host (D3).
 *
 *  segment   a range of device virtual addresses: one large VMM reservation whose 2 MiB
 *            pages are mapped on demand, or (fallback) one cuMemAlloc'd chunk, always
 *            mapped. Blocks tile each segment without gaps.
 *  block     a piece of a segment: allocated (to a user), free (in the free index),
 *            deferred (freed, waiting for other streams that used it) or quarantined
 *            (guard mode). Neighbours are linked in address order within a segment.
 *  index     one two-level segregated-fit index (TLSF) over every free block of the heap:
 *            O(1) search and update, at most 1/32 over-fit by class.
 *  stream    what the heap knows of a CUDA stream: its epoch counter, the epoch known
 *            complete, and at most one outstanding event.
 *
 * Invariants (checked by vg__heap_validate in tests):
 *  - blocks of a segment are contiguous, in address order, cover it exactly, and are
 *    512-byte aligned multiples of 512;
 *  - no two adjacent free blocks could have been merged (same stream tag, or complete);
 *  - every free block is in the index exactly once, in the bin of its size class;
 *  - every allocated block is in the live map under its user address;
 *  - a free block marked `mapped`, and every allocated block, has all its pages mapped;
 *  - the stats' current values equal the sums over the blocks and pages.
 */
#ifndef VG_HEAP_H
#define VG_HEAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver/driver.h"
#include "stats.h"
#include "events.h"
#include "plan.h"

#define VG_ALIGN 512ull                   /* block alignment and size granularity */
#define VG_SMALL_BLOCK (1ull << 20)       /* "small pool" in PyTorch's stats: <= 1 MiB */
#define VG_TLSF_SL_BITS 5                 /* 32 second-level classes per power of two */
#define VG_TLSF_SL (1u << VG_TLSF_SL_BITS)
#define VG_TLSF_FL 48                     /* first-level classes: sizes up to 2^57 bytes */
#define VG_MAX_USES 4                     /* recorded streams kept inline per block */
#define VG_MAX_ACCESS 32                  /* devices granted access to a heap's pages */

typedef struct vg_stream vg_stream_t;
typedef struct vg_segment vg_segment_t;
typedef struct vg_block vg_block_t;
typedef struct vg_heap vg_heap_t;
typedef struct vg_gpool vg_gpool_t;

enum {
    VG_BLOCK_FREE = 0,
    VG_BLOCK_ALLOCATED = 1,
    VG_BLOCK_DEFERRED = 2,    /* freed; waiting for recorded streams */
    VG_BLOCK_QUARANTINED = 3, /* guard mode: freed, poisoned, not reusable yet */
    VG_BLOCK_POOLED = 4,      /* freed, kept by its CUDA graph pool (graphpool.c, A7) */
    VG_BLOCK_PUT = 0xff,      /* not a block: its struct is back in the pool (segment.c) */
};

struct vg_block {
    uint64_t addr, size;        /* device range [addr, addr + size) */
    vg_block_t *prev, *next;    /* address-order neighbours in the segment, or NULL */
    vg_block_t *fprev, *fnext;  /* free-index bin, deferred or quarantine list links */
    vg_segment_t *seg;
    vg_stream_t *stream;        /* FREE: stream it was freed on (NULL: any stream may use
                                   it); ALLOCATED: stream it was allocated on */
    uint64_t epoch;             /* FREE: `stream`'s epoch at the free */
    uint8_t state;
    uint8_t mapped;             /* FREE: every page it touches is mapped */
    uint8_t nuses;              /* ALLOCATED: recorded streams in uses[] */
    uint8_t flags;              /* VG_BF_* */
    uint8_t slot;               /* VG_SLOT_*: kept through allocation and free */
    uint32_t site;              /* allocation site (sites.h) */
    uint64_t user;              /* ALLOCATED: the pointer handed out (addr in fast mode) */
    uint64_t requested;         /* ALLOCATED: bytes asked for */
    uint64_t id;                /* allocation number, 1, 2, ... (0: never allocated) */
    union {
        uint64_t alloc_launch;  /* guard, ALLOCATED: the launch number when it was made */
        uint64_t free_ns;       /* guard, freed: when (eager guard work only) */
    };
    uint32_t plan_item;         /* plan=on, ALLOCATED: 1 + the tensor of the plan it was
                                   placed as (arena.c), or 0 (0 in every free block) */
    uint32_t free_site;         /* guard: where it was freed */
    uint32_t fill_at;           /* guard: where its deferred fill was queued (guard.c) */
    uint64_t clean_seq;         /* guard: launch number at its last clean check */
    uint64_t alloc_tick;        /* guard, ALLOCATED: vg__order_tick() when it was made */
    vg_stream_t *uses[VG_MAX_USES];  /* ALLOCATED: streams recorded with vg_record_stream */
    uint64_t use_epochs[VG_MAX_USES];/* DEFERRED: epoch each use stream must complete */
    uint64_t pat_head, pat_tail;/* FREE (guard): its first and last bytes known to hold
                                   the guard pattern (a redzone there needs no fill) */
    vg_gpool_t *gpool;          /* the CUDA graph pool owning it (ALLOCATED or POOLED), or
                                   NULL: general memory */
};

enum {
    VG_BF_USES_OVERFLOW = 1, /* more than VG_MAX_USES streams: wait for all streams */
    /* 2, 4, 8, 16, 64: guard.c's own */
    VG_BF_READY = 32,        /* ALLOCATED (guard): carved where its redzones already hold
                                the canary (pat_head/pat_tail of the free block) */
    VG_BF_UNGUARDED = 128,   /* ALLOCATED (guard): made for a CUDA graph's capture, so no
                                guard work (a kernel queued on a capturing stream would
                                become part of the program's graph): never checked */
};

/* CUDA graph pools (docs/decisions.md A7, graphpool.c). While a graph is captured, the
 * requests it makes are routed to its pool; the memory stays the pool's, freed or not,
 * until the pool is released (the graph may replay and write it at any time). */
typedef int (*vg_gpool_filter_fn)(void *stream, void *arg); /* route this stream's request? */

/* Guard mode: a redzone of a block a capture allocated, checked after the graph's
 * replays while no allocation of the pool (in any capture) ever had those bytes as its
 * own: the graph's kernels then never write them legitimately (graphpool.c). */
typedef struct vg_gpool_rz {
    uint64_t lo, hi;            /* its bytes */
    uint64_t user, requested, id; /* the allocation's */
    uint64_t seq;               /* the launch number when it was allocated */
    CUstream stream;            /* the stream it was allocated on */
    uint32_t site;
    uint8_t side;               /* VG_RANGE_LEFT or VG_RANGE_RIGHT (guard_abi.h) */
    uint8_t state;              /* VG_RZ_* */
} vg_gpool_rz_t;
enum { VG_RZ_NEW = 0, VG_RZ_FILLED = 1, VG_RZ_DEAD = 2 };

struct vg_gpool {
    uint64_t id[2];             /* PyTorch's MempoolId_t, or {0, id} from the C API */
    int uses;                   /* captures begun into it and not released */
    bool release_pending;       /* released while a capture ran: done when none runs */
    struct vg_tlsf *index;      /* its free (POOLED) blocks */
    uint64_t bytes;             /* bytes of its blocks, allocated or pooled */
    uint64_t *used;             /* guard: the bytes its allocations ever had as their own,
                                   as sorted disjoint [lo, hi) pairs */
    size_t nused, capused;      /* (pairs) */
    vg_gpool_rz_t *rz;          /* guard: redzones to check */
    size_t nrz, caprz;
    uint64_t *nvtx;             /* its regions registered for compute-sanitizer (nvtx.c):
                                   sorted disjoint [lo, hi) pairs */
    size_t nnvtx, capnvtx;      /* (pairs) */
    vg_gpool_t *next;
};

typedef struct vg_gpool_route {
    vg_gpool_t *pool;
    vg_gpool_filter_fn filter;  /* NULL: requests on a capturing stream */
    void *arg;
    void (*drop)(void *arg);    /* frees arg when the route ends, or NULL */
} vg_gpool_route_t;
#define VG_GPOOL_ROUTES 8

/* Slots (docs/decisions.md A5): a large request that needed new memory keeps its address
 * range; the range's ends are boundaries free blocks do not merge across. */
enum {
    VG_SLOT_START = 1, /* its address is a boundary: it never merges with the block below */
    VG_SLOT_IN = 2,    /* it lies in a slot: smaller requests take other memory first */
};

struct vg_stream {
    CUstream handle;            /* what the driver is given (NULL: legacy default stream) */
    uintptr_t key;              /* lookup key: the handle, or the thread for per-thread */
    uint64_t epoch;             /* frees on this stream are stamped with the current epoch */
    uint64_t done;              /* epochs <= done are known complete on the device */
    uint64_t last_free_epoch;   /* epoch of the latest free tagged with this stream */
    CUevent event;              /* event used to learn completion (created lazily) */
    uint64_t event_epoch;       /* the epoch `event` completes */
    bool event_pending;         /* `event` is recorded and not yet seen complete */
    bool forgotten;             /* vg_forget_stream: no longer in the table */
    void *guard_pending;        /* guard: frees' checks waiting for a launch (guard.c) */
    bool busy;                  /* guard, during a check that waits for no stream: work
                                   queued on it has not completed (guard_check.c) */
    vg_stream_t *next;          /* the heap's list of streams */
};

typedef struct vg_addrindex vg_addrindex_t;
struct vg_segment {
    uint64_t base, size;
    bool vmm;                   /* pages mapped on demand (else one cuMemAlloc) */
    bool small;                 /* the range of small requests (small_max, A6) */
    uint8_t cls;                /* the free index's class of its blocks (VG_CLASS_*) */
    bool index_failed;          /* `index` could not be allocated: lookups say "unknown" */
    vg_addrindex_t *index;      /* user addresses of its live-map blocks (addrindex.c), or
                                   NULL until the first */
    CUmemGenericAllocationHandle *pages; /* VMM: handle mapped at each page, or 0 */
    size_t npages, nmapped;
    size_t mapped_end;          /* VMM: no page at this index or above was ever mapped */
    vg_block_t *first;          /* the lowest block */
    vg_segment_t *next;
    void *nvtx_heap;            /* its heap for compute-sanitizer (nvtx.c), or NULL */
};

/* What a free left behind, to recognise a later double free (a ring per heap). */
typedef struct vg_free_rec {
    uint64_t user, requested, id;
    uint32_t alloc_site, free_site;
} vg_free_rec_t;
#define VG_FREE_HISTORY 65536

/* The free index keeps three classes apart: blocks of the small-request range (a segment
 * with `small` set, docs/decisions.md A6), of a plan's arena (plan=on, arena.c: no search
 * ever takes them, only the plan places there) and all others. */
enum { VG_CLASS_GENERAL = 0, VG_CLASS_SMALL = 1, VG_CLASS_ARENA = 2, VG_CLASSES = 3 };

typedef struct vg_tlsf_class {
    uint64_t fl_bitmap;
    uint32_t sl_bitmap[VG_TLSF_FL];
    vg_block_t *bins[VG_TLSF_FL][VG_TLSF_SL];
} vg_tlsf_class_t;

typedef struct vg_tlsf {
    vg_tlsf_class_t cls[VG_CLASSES];
    uint64_t nblocks, bytes;    /* both classes */
    uint64_t slot_min;          /* 0 until a slot exists; then requests below this size
                                   prefer memory outside slots (heap's slot_min) */
} vg_tlsf_t;

/* Open-addressing map: user address -> allocated block. A slot holds both, so a lookup
 * touches one cache line. */
typedef struct vg_ptrmap_slot {
    uint64_t key;               /* 0: empty */
    vg_block_t *val;
} vg_ptrmap_slot_t;

typedef struct vg_ptrmap {
    vg_ptrmap_slot_t *slots;
    size_t cap, n;              /* cap is a power of two; n <= cap / 2 */
} vg_ptrmap_t;

struct vg_heap {
    pthread_mutex_t lock;
    int device;
    CUcontext ctx;
    uint64_t device_total;      /* bytes, from the driver */
    uint64_t limit;             /* cap on reserved bytes (option `limit`), 0 = none */
    uint64_t large_freed[16];   /* sizes of the last blocks of slot_min or more freed (A5) */
    uint32_t nlarge_freed;
    uint64_t slot_min;          /* requests this large that grow the heap get a slot (0:
                                   never; option `slot_min`, VMM heaps only) */
    uint64_t small_max;         /* requests up to this size use their own range (0: none;
                                   option `small_max`, VMM heaps only) */
    vg_segment_t *small_seg;    /* that range, reserved at the first such request */
    uint64_t limit_floor;       /* reserved bytes in use when a lower limit was set */
    bool vmm;                   /* segments come from VMM */
    bool managed;               /* guard mode's heap of the context's managed memory:
                                   cuMemAllocManaged segments, no limit (docs/decisions.md
                                   G9) */
    uint64_t page;              /* VMM granularity (2 MiB) */
    CUmemAllocationProp prop;   /* for cuMemCreate */
    CUmemAccessDesc access[VG_MAX_ACCESS]; /* for cuMemSetAccess: this device, then every
                                   device that can reach its memory (docs/decisions.md A11) */
    int naccess;
    vg_tlsf_t index;            /* every free block */
    vg_segment_t *segments;
    vg_stream_t *streams;
    int streams_seen;           /* streams ever added to `streams` */
    vg_ptrmap_t live;           /* user address -> allocated or quarantined block */
    bool index_on;              /* the segments' address indexes are kept (addrindex.c):
                                   from the first lookup on */
    vg_block_t *deferred;       /* list through fnext */
    vg_block_t *block_pool;     /* recycled block structs */
    CUmemGenericAllocationHandle *spare; /* unmapped physical pages kept for reuse */
    size_t nspare, capspare;
    uint64_t next_id;
    vg_stats_t stats;
    uint64_t completion_gen;    /* bumped whenever a stream's completed epoch advances */
    uint64_t merged_gen;        /* completion_gen at the last merge pass before growing */
    uint64_t no_idle_gen;       /* a scan at this generation found no idle page */
    bool memory_short;          /* a page could not be created (limit or device full) */
    vg_free_rec_t *history;     /* the last VG_FREE_HISTORY frees (allocated lazily) */
    void *guard;                /* guard mode's state (guard.c), or NULL */
    void *memcheck;             /* memcheck mode's state of its context (memcheck.c), or NULL */
    uint64_t nhistory;          /* frees recorded so far */
    vg_events_t events;         /* the last allocator events, for snapshots */
    struct vg_plan *plan;       /* option plan=learn or on: the step learnt (plan.h), or NULL */
    vg_segment_t *arena;        /* plan=on: where the plan followed places (arena.c), or NULL */
    uint64_t arena_gen;         /* the plan it was made for (vg__plan_following); with no
                                   arena, the plan none could be reserved for */
    uint64_t arena_missed_until; /* requests before this one follow a miss by less than a
                                    cycle: the arena may then take its own idle pages */
    uint64_t moved_unplanned;   /* plan=on: pages moved while no plan was followed */
    vg_block_t **arena_hint;    /* per tensor of the plan: the block it was last carved as
                                   (checked before use: a hint, never trusted) */
    uint32_t arena_hints, arena_item; /* its length; the item being placed (arena.c) */
    bool plan_moves;            /* plan=on: pages move to where they are needed (segment.c) */
    vg_gpool_t *gpools;         /* CUDA graph pools (graphpool.c) */
    vg_gpool_route_t routes[VG_GPOOL_ROUTES]; /* captures under way: where requests go */
    int nroutes;
    bool retired;               /* its context was destroyed: it holds nothing, serves
                                   nothing, and its place in the registry may be reused */
};

/* ---------------------------------------------------------------------------------------
 * addrindex.c: which live-map block holds an address (heap lock held)
 * ------------------------------------------------------------------------------------- */

/* Mark / unmark a live-map block's user address in its segment's index. add returns false
 * when the index could not be allocated (the segment's lookups then say "unknown"). */
bool vg__addrindex_add(vg_segment_t *seg, uint64_t user);
void vg__addrindex_del(vg_segment_t *seg, uint64_t user);
/* The marked user addresses nearest p: the largest <= p in *below, the smallest > p in
 * *above (0: none). -1 if the segment's index is unknown. */
int vg__addrindex_near(const vg_segment_t *seg, uint64_t p, uint64_t *below, uint64_t *above);
/* Release a segment's index (the segment is going). */
void vg__addrindex_free(vg_segment_t *seg);

/* What holds device address p in heap h (lock held), in O(levels): */
typedef enum {
    VG_AT_NOT_OURS = 0, /* outside h's segments */
    VG_AT_BLOCK,        /* *block: an allocated or quarantined block, redzones included */
    VG_AT_GAP,          /* h's memory that no live-map block holds (free, deferred) */
    VG_AT_UNKNOWN,      /* h's memory, but the segment's index is missing (no memory) */
} vg_at_t;
vg_at_t vg__heap_block_at(vg_heap_t *h, uint64_t p, vg_block_t **block);
/* The live-map block of h with the largest user address <= p, or NULL (lock held). */
vg_block_t *vg__heap_block_below(vg_heap_t *h, uint64_t p);
/* The segment whose range holds address p, or NULL (heap lock held). */
vg_segment_t *vg__heap_segment_at(const vg_heap_t *h, uint64_t p);
/* Could [p, p + n) touch any heap's segments? A lock-free filter over the lowest and
 * highest address any segment ever had (false: certainly not vramguard's). */
bool vg__addrindex_maybe_ours(uint64_t p, uint64_t n);
/* A segment came to be: widen that span. */
void vg__addrindex_span(uint64_t base, uint64_t size);

/* ---------------------------------------------------------------------------------------
 * heap.c
 * ------------------------------------------------------------------------------------- */

/* Find or create the heap of the calling thread's current context (the primary context
 * of device 0 is made current if there is none). */
vg_status_t vg__heap_current(vg_heap_t **out);
/* The heap of a device's primary context (PyTorch passes the device). */
vg_status_t vg__heap_for_device(int device, vg_heap_t **out);
/* Find or create the heap of the current context's managed memory (guard mode; the
 * device must let the host and kernels touch managed memory at once, else
 * VG_ERR_NOT_SUPPORTED). */
vg_status_t vg__heap_managed_current(vg_heap_t **out);
/* The heap that owns the live allocation at user pointer p, if any, with its block (heap
 * locked on return when found). */
vg_heap_t *vg__heap_owner_locked(uint64_t p, vg_block_t **block);
int vg__heap_count(void);
/* The heap whose address space holds p (live, free or cached memory alike), or NULL. */
vg_heap_t *vg__heap_containing(uint64_t p);
/* The same, with the base of the segment (a VMM range or a driver allocation) holding p. */
vg_heap_t *vg__heap_containing_seg(uint64_t p, uint64_t *seg_base);
/* A copy from src to dst, device memory both, between two devices where a side is
 * vramguard's pages without the other device in their access list (docs/decisions.md
 * A11), which the plain copy calls cannot make: true, with the sides' contexts for
 * cuMemcpyPeer. False at once with fewer than two heaps. */
bool vg__copy_needs_peer(uint64_t dst, uint64_t src, CUcontext *dctx, CUcontext *sctx);
/* verbose=1: each device's peaks and counts, at exit. */
void vg__heaps_describe_exit(void);
vg_heap_t *vg__heap_at(int i);
/* The program destroys h's context (heap lock held, the context still alive; its live
 * allocations already reported as leaks if leaks are reported): they die with it, as
 * cuMemAlloc's do, and vramguard's memory — created with cuMemCreate, which cuCtxDestroy
 * does not free — goes back to the driver; the heap is retired, and a context created
 * later gets a heap of its own. */
void vg__heap_retire(vg_heap_t *h);
static inline bool vg__heap_retired(vg_heap_t *h) {
    return __atomic_load_n(&h->retired, __ATOMIC_ACQUIRE);
}

/* plan=on, no plan followed, and the pages moved so far while none was are more than
 * VG_SETTLE_MOVES times the most memory reserved: the program has no step to learn (a
 * cache grown by concatenation, mixed batch sizes), and moving idle pages to each request's
 * best fit would go on for as long as it runs (gen_large: 31,000 moves in the last quarter
 * of its trace). From then on a request that would map pages goes where pages are mapped
 * the most (arena.c, vg__arena_mapped_first), and new pages may be mapped within 1 % of the
 * peak allocated (segment.c, plan_moves): the moves stop. docs/decisions.md A13, thirteenth
 * session; a training loop's learning moves 1-2 times its memory, then follows its plan.
 * Not with reserved memory, `size` bytes more, within 1/32 of a limit: settling leaves free
 * space spread over partly used pages, which a near limit needs (gen_large under a limit
 * 0.1 % above its peak: 9-11 out-of-memory failures settling, 0-3 packing). */
#define VG_SETTLE_MOVES 4
/* plan=on: is a plan followed? Not while it waits, dormant, with its arena (plan.h): page
 * moves and settling then go as with none. */
static inline bool vg__heap_plan_followed(const vg_heap_t *h) {
    return h->arena && !vg__plan_dormant(h->plan);
}

static inline bool vg__heap_settling(const vg_heap_t *h, uint64_t size) {
    uint64_t reserved = (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].current;
    return !vg__heap_plan_followed(h) &&
           h->moved_unplanned * h->page >
               VG_SETTLE_MOVES * (uint64_t)h->stats.reserved_bytes[VG_POOL_ALL].peak &&
           !(h->limit && reserved + size + h->limit / 32 > h->limit);
}

/* Allocate a block of `size` bytes (of which the user asked for `requested`) ordered on
 * `stream` (heap lock held). On success *out is the block, with user == addr (guard mode
 * moves it by user_offset). On VG_ERR_OUT_OF_MEMORY the explanation is in vg_last_error(). */
vg_status_t vg__heap_alloc(vg_heap_t *h, uint64_t size, uint64_t requested,
                           uint64_t user_offset, CUstream stream, vg_block_t **out);
/* Make the heap's context current for driver calls (returns whether it pushed;
 * context.c). */
bool vg__heap_ctx_enter(vg_heap_t *h);
void vg__heap_ctx_leave(bool pushed);
/* The most recent free of (user, id) in the heap's history, or NULL (heap lock held). */
const vg_free_rec_t *vg__heap_history_find(vg_heap_t *h, uint64_t user, uint64_t id);
/* The newest freed allocation of the history whose bytes hold p, or NULL (a scan of the
 * history: for what is already an error). */
const vg_free_rec_t *vg__heap_history_containing(vg_heap_t *h, uint64_t p);
/* Record a free in the history (heap lock held). */
void vg__heap_history_add(vg_heap_t *h, const vg_block_t *b, uint32_t free_site);
/* Return an allocated block to the heap, ordered on `stream` (heap lock held); `synced`:
 * the context was synchronised after the program's last use (its cuMemFree), so the
 * block is any stream's at once. */
void vg__heap_free(vg_heap_t *h, vg_block_t *b, CUstream stream, bool synced);
/* A block leaving guard's quarantine: deferred if other streams still use it, else
 * free (heap lock held). Its first `head` and last `tail` bytes were checked to hold the
 * guard pattern: the free block remembers them (pat_head, pat_tail). */
void vg__heap_unquarantine(vg_heap_t *h, vg_block_t *b, uint64_t head, uint64_t tail);
/* Record that `stream` uses block b (heap lock held). */
vg_status_t vg__heap_record_stream(vg_heap_t *h, vg_block_t *b, CUstream stream);
/* Release cached memory: unmap idle pages, free empty segments (heap lock held). */
vg_status_t vg__heap_trim(vg_heap_t *h, bool wait_for_streams);
/* The stream's work up to now is complete (a synchronisation was observed). */
void vg__heap_stream_synced(vg_heap_t *h, CUstream stream);
void vg__heap_all_synced(vg_heap_t *h);
/* The key a stream is looked up by: its handle, 0 for the legacy stream, the thread for
 * the per-thread default stream (one per host thread). */
static inline uintptr_t vg__stream_key(CUstream s) {
    if (s == CU_STREAM_LEGACY)
        return 0;
    if (s == CU_STREAM_PER_THREAD)
        return (uintptr_t)pthread_self() | 3;
    return (uintptr_t)s;
}
/* Learn whether s's frees have completed (context.c). Without `wait`: query its
 * outstanding event, and record one if frees remain unconfirmed (then query it: an idle
 * stream's completes at once). With `wait`: wait for them. Returns whether some epoch
 * completed (the caller then bumps the heap's completion_gen). */
bool vg__stream_refresh(vg_stream_t *s, bool wait);
/* The same, waiting at most max_ns (its events queried) for every free so far to be known
 * complete: the stream may be held by work that waits for the calling thread. */
bool vg__stream_refresh_within(vg_stream_t *s, uint64_t max_ns);
/* The stream of a synchronous allocation (the program's cuMemAlloc): the memory serves
 * every stream as soon as the call returns, so it comes from blocks that are complete,
 * never from one still waiting on the legacy stream. Allocated, the block belongs to the
 * legacy stream as any other allocation given NULL. It counts in streams_seen: a
 * waiting block that absorbed a complete one would hide that memory from it. */
#define VG_STREAM_SYNC ((CUstream)(uintptr_t)0x4)
/* A synchronisation the program makes, seen before it waits (heap lock held for each
 * call, not across the wait): begin ends the epoch of `stream` in h, or of every stream
 * (all), and returns marks (malloc'd; NULL when nothing is marked or memory is short:
 * the synchronisation then completes nothing); end, once the wait returned `ok`, makes
 * complete what was freed before it began, and no more: what another thread freed on
 * those streams meanwhile may still be in use. Frees the marks. */
typedef struct vg_sync_marks vg_sync_marks_t;
vg_sync_marks_t *vg__heap_sync_begin(vg_heap_t *h, bool all, CUstream stream);
void vg__heap_sync_end(vg_heap_t *h, vg_sync_marks_t *m, bool ok);
void vg__heap_forget_stream(vg_heap_t *h, CUstream stream);
/* Check every invariant; returns VG_OK or VG_ERR_INTERNAL with the first violation in
 * vg_last_error(). O(blocks + pages). */
vg_status_t vg__heap_validate(vg_heap_t *h);
/* The largest request that could be served now without failing. */
uint64_t vg__heap_largest_servable(vg_heap_t *h);
uint64_t vg__heap_largest_free_block(vg_heap_t *h);
vg_stream_t *vg__heap_stream(vg_heap_t *h, CUstream handle);
/* The same, without creating it: NULL if the heap never met the stream. */
vg_stream_t *vg__heap_stream_find(vg_heap_t *h, CUstream handle);
/* The handle under which the calling thread queues work after stream s's work so far:
 * s's own, or for another thread's per-thread default stream, which only its thread can
 * name, the legacy stream (every per-thread stream synchronises with it). */
CUstream vg__stream_handle_here(const vg_stream_t *s);

/* Is the stream being captured into a CUDA graph (context.c)? Always false until
 * vg__captures_seen_set: a capture began (the interposer's hook) or a graph pool did. */
bool vg__stream_capturing(CUstream stream);
void vg__captures_seen_set(void);
/* The interposer saw a capture begin, or end (a capture under way: nothing may wait for a
 * whole context, vg__heap_capturing). */
void vg__capture_began(void);
void vg__capture_ended(void);
/* Is a capture under way on one of the heap's streams (or routing requests into a pool)?
 * Then nothing may wait for the whole context (heap lock held). */
bool vg__heap_capturing(vg_heap_t *h);

/* The allocated or quarantined block whose range (redzones included) holds p, or NULL
 * (heap lock held; the address index, vg__heap_block_at, started if it was not). */
vg_block_t *vg__heap_block_containing(vg_heap_t *h, uint64_t p);
/* How the rooms above walk a heap (heap lock held, or the heap not shared): every block
 * in address order, segment by segment; every segment; a segment's blocks; every stream
 * the heap knows. Each stops when fn returns false. */
void vg__heap_each_block(vg_heap_t *h, bool (*fn)(vg_block_t *b, void *arg), void *arg);
void vg__heap_each_segment(vg_heap_t *h, bool (*fn)(vg_segment_t *seg, void *arg), void *arg);
void vg__segment_each_block(vg_segment_t *seg, bool (*fn)(vg_block_t *b, void *arg), void *arg);
void vg__heap_each_stream(vg_heap_t *h, bool (*fn)(vg_stream_t *s, void *arg), void *arg);
/* Each run of a segment's pages with no memory mapped: its offset and length in bytes
 * (pages of `page` bytes; none for a segment that is not virtual memory). */
void vg__segment_each_unmapped(const vg_segment_t *seg, uint64_t page,
                               bool (*fn)(uint64_t offset, uint64_t bytes, void *arg), void *arg);

/* graphpool.c */
/* The pool a request on `stream` goes to, or NULL (heap lock held; nroutes > 0;
 * context.c). */
vg_gpool_t *vg__gpool_route(vg_heap_t *h, CUstream stream);
/* A capture begins/ends routing requests into pool id (heap lock held). */
vg_status_t vg__gpool_begin(vg_heap_t *h, const uint64_t id[2], vg_gpool_filter_fn filter,
                            void *arg, void (*drop)(void *));
void vg__gpool_end(vg_heap_t *h, const uint64_t id[2]);
/* The graphs using pool id are gone: its memory returns to the heap (heap lock held). */
void vg__gpool_release(vg_heap_t *h, const uint64_t id[2]);
/* Guard mode: a capture allocated block b from its pool: the redzones it may check, and
 * the bytes no redzone may claim any more (heap lock held). */
void vg__gpool_guard_note(const vg_block_t *b, uint64_t seq);
/* The redzone of a graph's allocation at [addr, ...) with allocation number id, or NULL. */
vg_gpool_rz_t *vg__gpool_rz_find(vg_heap_t *h, uint64_t id, uint64_t addr);
/* Bytes kept by pools: free ones (POOLED) and all of them. */
void vg__gpool_totals(const vg_heap_t *h, uint64_t *pooled, uint64_t *owned);
/* Captures are routing requests into some pool, in any heap: vramguard's driver calls
 * then run in relaxed capture mode (heap.c). */
extern _Atomic int vg__gpool_routes_open;

/* heap.c, for graphpool.c */
vg_status_t vg__heap_alloc_pool(vg_heap_t *h, vg_gpool_t *p, uint64_t size, uint64_t requested,
                                uint64_t uoff, vg_stream_t *s, vg_block_t **out);
/* A pooled block returns to general memory, complete (its pool is released); returns the
 * free block it became part of. */
vg_block_t *vg__heap_unpool(vg_heap_t *h, vg_block_t *b);

/* arena.c — plan=on (docs/decisions.md A13) */
/* Where the plan followed puts the next request (rounded `size`, on s): *addr, and the
 * first of the free blocks that hold it (heap.c carves them); NULL when it is not planned
 * or neither its place nor room the plan leaves is free for s (heap lock held). *missed:
 * its planned place was not free (counted as a miss already). */
vg_block_t *vg__arena_find(vg_heap_t *h, uint64_t size, vg_stream_t *s, uint64_t *addr,
                           bool *missed);
/* The block just carved where vg__arena_find placed the request (not a miss). */
void vg__arena_placed(vg_heap_t *h, vg_block_t *b);
/* A block placed by the plan as tensor `item` was freed and is now part of free block f:
 * where the tensor planned next at its place will look first. */
void vg__arena_freed(vg_heap_t *h, uint32_t item, vg_block_t *f);
/* The place vg__arena_find gave could not be carved after all: a miss. */
void vg__arena_missed(vg_heap_t *h);
/* Settling: where a request whose best fit b would map pages goes instead (the block, and
 * in *at the address), or NULL when nothing needs fewer pages than b's start. */
vg_block_t *vg__arena_mapped_first(vg_heap_t *h, uint64_t size, vg_stream_t *s, vg_block_t *b,
                                   uint64_t *at);

/* tlsf.c */
void vg__tlsf_insert(vg_tlsf_t *t, vg_block_t *b);
void vg__tlsf_remove(vg_tlsf_t *t, vg_block_t *b);
/* A block of size >= size usable by `stream` (see vg__block_usable), of the general
 * class or of the small-request range. */
vg_block_t *vg__tlsf_find(vg_tlsf_t *t, uint64_t size, vg_stream_t *stream);
vg_block_t *vg__tlsf_find_small(vg_tlsf_t *t, uint64_t size, vg_stream_t *stream);
/* Visit free blocks, each class from its largest bin down (the general class first); stop
 * when fn returns false. */
void vg__tlsf_each_desc(vg_tlsf_t *t, bool (*fn)(vg_block_t *b, void *arg), void *arg);
/* The same over one class (cls >= 0) or all, skipping the bins of blocks smaller than
 * min_size (the walk's cost is then that of the larger blocks); false if fn stopped it. */
bool vg__tlsf_each_desc_from(vg_tlsf_t *t, int cls, uint64_t min_size,
                             bool (*fn)(vg_block_t *b, void *arg), void *arg);
/* The blocks of class cls from the bin of min_size up (its first bin may hold smaller
 * ones), smallest bins first; false once fn said stop. */
bool vg__tlsf_each_asc_from(vg_tlsf_t *t, int cls, uint64_t min_size,
                            bool (*fn)(vg_block_t *b, void *arg), void *arg);

/* ptrmap.c */
bool vg__ptrmap_put(vg_ptrmap_t *m, uint64_t key, vg_block_t *val);
vg_block_t *vg__ptrmap_get(const vg_ptrmap_t *m, uint64_t key);
/* Start fetching the slot of key (a lookup or deletion will follow). */
void vg__ptrmap_prefetch(const vg_ptrmap_t *m, uint64_t key);
vg_block_t *vg__ptrmap_del(vg_ptrmap_t *m, uint64_t key);
void vg__ptrmap_free(vg_ptrmap_t *m);

/* A free block may serve `s` if it was freed on `s`, or its freeing stream's work up to
 * the free is complete. */
static inline bool vg__block_complete(const vg_block_t *b) {
    return !b->stream || b->epoch <= b->stream->done;
}
static inline bool vg__block_usable(const vg_block_t *b, const vg_stream_t *s) {
    return b->stream == s || vg__block_complete(b);
}

/* segment.c — physical memory */
vg_status_t vg__segment_grow(vg_heap_t *h, uint64_t size, vg_block_t **out);
/* The small-request range (A6), reserved on first use; NULL (and small_max set to 0)
 * when the heap has no VMM or no address space is left for it. */
vg_segment_t *vg__segment_small_range(vg_heap_t *h);
/* A plan's arena: a range of `bytes` (rounded to pages), none of it mapped; NULL when no
 * address space is left. And an arena given up: its blocks become general memory. */
vg_segment_t *vg__segment_arena(vg_heap_t *h, uint64_t bytes);
void vg__segment_arena_retire(vg_heap_t *h, vg_segment_t *seg);
/* Make every page of [addr, addr+size) mapped, for a request on s: from spare pages, new
 * ones, and idle pages (under memory pressure; with plan=on, see segment.c, which may wait
 * a while for s). */
vg_status_t vg__segment_map_range(vg_heap_t *h, vg_segment_t *seg, uint64_t addr,
                                  uint64_t size, vg_stream_t *s);
bool vg__segment_range_mapped(const vg_segment_t *seg, uint64_t addr, uint64_t size);
/* How many of the pages [addr, addr + size) touches are not mapped (0 without VMM). */
size_t vg__segment_unmapped_pages(const vg_segment_t *seg, uint64_t addr, uint64_t size);
uint64_t vg__segment_idle_bytes(vg_heap_t *h);
vg_status_t vg__segment_trim(vg_heap_t *h);
void vg__segment_release_all(vg_heap_t *h);
vg_status_t vg__heap_init_segments(vg_heap_t *h);
/* Take a block struct from the pool. */
vg_block_t *vg__block_new(vg_heap_t *h);
void vg__block_put(vg_heap_t *h, vg_block_t *b);
/* Merge a free block with free neighbours that may share its tag; returns the result. */
vg_block_t *vg__block_coalesce(vg_heap_t *h, vg_block_t *b);

#endif /* VG_HEAP_H */
