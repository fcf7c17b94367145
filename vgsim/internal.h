/* internal.h — vgsim's shared state. See docs/vgsim.md for what is emulated.
 *
 * Model
 *  - Each device owns an arena: a PROT_NONE, MAP_NORESERVE range of host address space
 *    (8x the device's memory). Device virtual addresses are addresses in the arena, so a
 *    host function acting as a kernel dereferences them directly.
 *  - "Physical" device memory is a sparse memfd per device. cuMemAlloc and cuMemCreate
 *    take offsets from it (a bump pointer; released ranges are hole-punched, so RAM is
 *    only used for bytes actually written) and count against the device's size.
 *  - Mapping = mmap(MAP_SHARED|MAP_FIXED) of the memfd over arena addresses; unmapping
 *    puts PROT_NONE anonymous memory back. Touching anything not mapped with access
 *    faults; on a stream worker running a kernel that fault becomes the context's sticky
 *    CUDA_ERROR_ILLEGAL_ADDRESS.
 *  - Streams are FIFO queues served by one worker thread each; cross-stream ordering is
 *    expressed as dependencies (stream, sequence number) that a worker waits for.
 *
 * Locking: g_sim.lock protects devices' extent lists, the region table, handles and the
 * pinned table. Each stream has its own lock. Never hold g_sim.lock while waiting for a
 * stream.
 */
#ifndef VGSIM_INTERNAL_H
#define VGSIM_INTERNAL_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../src/driver/driver_funcs.h"
#include "vgsim.h"

#define VGSIM_API __attribute__((visibility("default")))
#define VGSIM_GRANULE (2ull << 20) /* VMM granularity */
#define VGSIM_PAGE 4096ull
#define VGSIM_MAX_DEVICES 8
#define VGSIM_VERSION "vgsim 0.1 (CUDA 13 driver API subset)"

/* Prototypes of every exported driver function, from the one list. */
#define VG_X(api, sym, need, params, args) VGSIM_API CUresult sym params;
VG_DRIVER_FUNCS(VG_X)
#undef VG_X
/* ... and of their per-thread-default-stream twins (ptds.c, copy.c). */
#define VG_X(api, sym, twin) VGSIM_API __typeof__(sym) twin;
VG_DRIVER_TWINS(VG_X)
#undef VG_X
/* ... and of the earlier ABI versions still exported (copy_batch.c). */
#define VG_X(api, sym, params, args) VGSIM_API CUresult sym params;
VG_DRIVER_OLDER(VG_X)
#undef VG_X
/* A _ptsz twin's stream: NULL means the calling thread's default stream. */
#define SIM_PT(stream) ((stream) ? (stream) : CU_STREAM_PER_THREAD)
/* The twin of the function cuGetProcAddress names `api`, or NULL (ptds.c). */
void *sim_twin_proc(const char *api);

/* ---------------------------------------------------------------------------------------
 * Devices, regions, handles
 * ------------------------------------------------------------------------------------- */

typedef struct sim_extent {
    uint64_t start, end; /* [start, end) */
} sim_extent_t;

typedef struct sim_ctx sim_ctx_t;

typedef struct sim_device {
    int ordinal;
    uint64_t total;          /* device memory in bytes */
    _Atomic uint64_t used;   /* physical bytes in use */
    char *arena;             /* base of the address-space arena */
    uint64_t arena_size;
    int memfd;               /* backing store of "physical" memory */
    uint64_t phys_next;      /* bump pointer into the memfd */
    sim_extent_t *free;      /* free address ranges of the arena, sorted */
    size_t nfree, capfree;
    sim_ctx_t *primary;      /* created on first retain, never destroyed */
    int primary_refs;
    struct sim_pool *default_pool; /* made on first use (mempool.c) */
    struct sim_pool *current_pool; /* cuDeviceSetMemPool's, or NULL: the default */
} sim_device_t;

enum { REGION_ALLOC = 1, REGION_RESERVE = 2 };

typedef struct sim_handle {
    sim_device_t *dev;
    uint64_t size, phys_off;
    int maps;                /* live mappings of this handle */
    bool released;           /* cuMemRelease called: free when maps reaches 0 */
} sim_handle_t;

typedef struct sim_mapping {
    uint64_t va, size, offset;
    sim_handle_t *handle;
    int prot;                /* PROT_NONE until cuMemSetAccess */
    unsigned devices;        /* devices granted access (bit d: device d) */
} sim_mapping_t;

typedef struct sim_pool sim_pool_t; /* mempool.c */

typedef struct sim_region {
    uint64_t base, size;     /* address range taken from the arena */
    int kind;                /* REGION_ALLOC or REGION_RESERVE */
    sim_device_t *dev;
    uint64_t user_size;      /* ALLOC: bytes asked for */
    struct sim_ctx *owner;   /* ALLOC by cuMemAlloc: freed with this context (cuCtxDestroy) */
    uint64_t phys_off;       /* ALLOC: offset in the memfd */
    struct sim_pool *pool;   /* ALLOC by cuMemAllocAsync or cuMemAllocFromPoolAsync */
    bool managed;            /* ALLOC by cuMemAllocManaged (managed.c) */
    sim_mapping_t **pages;   /* RESERVE: mapping per granule, or NULL */
} sim_region_t;

enum { PINNED_HOSTALLOC = 1, PINNED_REGISTERED = 2 };

typedef struct sim_pinned {
    char *base;
    size_t size;
    char *alias;             /* HOSTALLOC: a second view the copy engine uses */
    int kind;
} sim_pinned_t;

/* ---------------------------------------------------------------------------------------
 * Contexts, streams, events, operations
 * ------------------------------------------------------------------------------------- */

typedef struct sim_stream sim_stream_t;

struct sim_ctx {
    sim_device_t *dev;
    _Atomic int sticky;      /* CUresult that kills the context, or 0 */
    pthread_mutex_t lock;    /* the streams array */
    sim_stream_t *legacy;    /* the legacy default stream */
    sim_stream_t **streams;  /* every live stream, legacy included */
    size_t nstreams, capstreams;
    _Atomic int nblocking;   /* blocking streams other than the legacy one */
    bool primary;
};

typedef struct sim_dep {
    sim_stream_t *stream;
    uint64_t seq;
} sim_dep_t;

enum {
    OP_NOP = 0,
    OP_COPY,
    OP_MEMSET,
    OP_KERNEL,
    OP_HOSTFN,
    OP_RECORD,
    OP_FREE,
    OP_MEMOP, /* a stream memory operation: wait for, or write, a 32/64-bit word */
    OP_EXIT
};

typedef struct sim_event sim_event_t;

/* A Compute Sanitizer device callback's host twin (sanitizer.c), called by vgsim_access. */
typedef int (*sim_patch_fn)(void *userdata, uint64_t pc, void *ptr, uint32_t size,
                            uint32_t flags, const void *new_value);

typedef struct sim_op {
    struct sim_op *next;
    int kind;
    uint64_t seq;
    sim_dep_t *deps;          /* inline_deps, or a heap array when there are more */
    size_t ndeps;
    sim_dep_t inline_deps[2];
    union {
        struct { void *dst; const void *src; size_t n; void *staging; } copy;
        struct { void *dst; uint32_t value; unsigned elem; size_t count; } set;
        struct { vgsim_kernel_fn fn; vgsim_launch_t launch; const char *name;
                 CUmodule module; CUfunction function; /* (for graph node callbacks) */
                 sim_patch_fn patch; void *patch_ud; /* sanitizer.c: the access callback */
                 unsigned char *storage; /* heap copy of the arguments if too big */
                 size_t nstorage;        /* bytes of arguments */
                 unsigned char inline_args[4096] __attribute__((aligned(16))); } kernel;
        struct { CUhostFn fn; void *data; } host;
        struct { sim_event_t *event; } record;
        struct { CUdeviceptr ptr; } free;
        struct { uint64_t addr, value; unsigned flags; CUstreamBatchMemOpType type; } memop;
    } u;
} sim_op_t;

struct sim_stream {
    uint32_t magic;          /* SIM_STREAM_MAGIC while the stream exists */
    sim_ctx_t *ctx;
    unsigned flags;          /* CU_STREAM_NON_BLOCKING or 0 */
    int priority;
    bool legacy;
    pthread_t worker;
    /* Producers (host threads) serialise on `lock` to number their ops and push them on
     * `incoming`, a lock-free stack the worker takes whole and reverses: the worker never
     * takes `lock`, so a producer never waits for it. */
    pthread_mutex_t lock;
    _Alignas(64) _Atomic(sim_op_t *) incoming;
    _Alignas(64) _Atomic(sim_op_t *) returned; /* ops the worker is done with */
    _Alignas(64) _Atomic uint64_t enqueued;    /* sequence number of the last queued op */
    _Alignas(64) _Atomic uint64_t completed;   /* sequence number of the last completed op */
    /* Sleeping and waking: a producer signals `work` only if the worker said it sleeps,
     * and the worker broadcasts `done` only if someone said it waits. */
    pthread_mutex_t wake_lock;
    pthread_cond_t work;
    pthread_cond_t done;
    _Alignas(64) _Atomic int sleeping;
    _Atomic int waiters;
    _Atomic uint64_t wake_at;  /* the lowest sequence number a waiter waits for */
    _Atomic int unwoken;       /* ops queued since the worker fell asleep */
    int spin;                  /* the worker's: how long it spins before it sleeps */
    /* Stream capture (graph.c), under g_capture_lock: the capture this stream takes part
     * in, the ops it captured, and whether the capture's origin has waited for the last. */
    _Atomic(struct sim_capture *) capture;
    uint64_t cap_ops;
    bool cap_joined;
};

#define SIM_STREAM_MAGIC 0x5354524du

struct sim_event {
    sim_ctx_t *ctx;
    unsigned flags;
    pthread_mutex_t lock;
    sim_stream_t *stream;    /* last record, or NULL if never recorded */
    uint64_t seq;
    uint64_t time_ns;        /* when the record completed */
    bool timed;              /* time_ns belongs to the last record */
    uint64_t cap_id;         /* last recorded in this capture sequence (0: not captured) */
    sim_stream_t *cap_stream;/* ... on this stream, after its cap_pos'th captured op */
    uint64_t cap_pos;
};

/* ---------------------------------------------------------------------------------------
 * Global state
 * ------------------------------------------------------------------------------------- */

typedef struct sim_state {
    pthread_mutex_t lock;
    bool initialised;
    int ndevices;
    bool vmm;
    bool log;                /* VGSIM_LOG=1: say why kernels fault */
    bool skip_guard;         /* VGSIM_SKIP_GUARD_KERNELS=1: guard kernels do nothing */
    bool p2p;                /* devices reach each other's memory (VGSIM_P2P, default 1) */
    bool concurrent_managed; /* VGSIM_CONCURRENT_MANAGED (default 1): the device attribute */
    sim_device_t devices[VGSIM_MAX_DEVICES];
    sim_region_t **regions;  /* sorted by base */
    size_t nregions, capregions;
    sim_pinned_t *pinned;    /* sorted by base */
    size_t npinned, cappinned;
    int procmem_fd;          /* /proc/self/mem for copies into protected registered memory */
    struct sim_pool *pools;  /* every memory pool, destroyed ones with memory still out */
} sim_state_t;

extern sim_state_t g_sim;

/* core.c */
CUresult sim_check_init(void);
sim_ctx_t *sim_current_ctx(void);
CUresult sim_ctx_check(sim_ctx_t **out); /* current context, alive: or the error */
void sim_install_fault_handler(void);
void sim_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run fn(arg) on the calling (worker) thread with faults turned into the return value
 * CUDA_ERROR_ILLEGAL_ADDRESS; *fault_addr gets the address. */
CUresult sim_run_guarded(void (*fn)(void *), void *arg, void **fault_addr);
bool sim_on_worker(void);

/* memory.c */
sim_region_t *sim_region_find(uint64_t addr); /* region containing addr (lock held) */
bool sim_device_range_ok(uint64_t addr, size_t n); /* mapped with access, one device */
bool sim_is_device_addr(uint64_t addr);
sim_pinned_t *sim_pinned_find(const void *p); /* lock held */
bool sim_is_pinned(const void *p, size_t n);
/* Copy to/from host memory the way the copy engine does: through the alias of
 * cuMemHostAlloc memory, /proc/self/mem for registered memory (so page protections
 * set by a race detector do not stop it), plain memcpy otherwise. */
void sim_host_copy(void *dst, const void *src, size_t n);
CUresult sim_memory_init_device(sim_device_t *d);
CUresult sim_free_device_ptr(CUdeviceptr p);
/* cuMemAlloc's work; `owned`: the memory belongs to c and dies with it (cuMemAlloc's, not
 * cuMemAllocAsync's, which comes from the device's pool). */
CUresult sim_mem_alloc(sim_ctx_t *c, CUdeviceptr *dptr, size_t bytesize, bool owned);
/* A stream-ordered allocation on device d from `pool` (mempool.c checks the pool). */
CUresult sim_mem_alloc_pool(sim_device_t *d, struct sim_pool *pool, CUdeviceptr *dptr,
                            size_t bytesize);

/* mempool.c (g_sim.lock held for both) */
/* Pool accounting: an allocation of `bytes` from pool p made (+1) or given back (-1);
 * mem_alloc_pool refuses one past the pool's maxSize with CUDA_ERROR_OUT_OF_MEMORY. */
bool sim_pool_take(struct sim_pool *p, uint64_t bytes);
void sim_pool_give(struct sim_pool *p, uint64_t bytes);
/* Whether the pool's allocations are managed memory. */
bool sim_pool_managed(const struct sim_pool *p);
/* cuCtxDestroy: free the memory c owns. */
void sim_free_ctx_memory(sim_ctx_t *c);

/* stream.c */
sim_stream_t *sim_stream_resolve(sim_ctx_t *ctx, CUstream s); /* NULL/legacy/ptds/handle */
/* The current live context and the stream a handle names, or the error. */
CUresult sim_resolve(CUstream h, sim_ctx_t **pc, sim_stream_t **ps);
/* flags: CU_STREAM_*, plus SIM_STREAM_LEGACY for a context's legacy default stream. */
#define SIM_STREAM_LEGACY 0x80000000u
CUresult sim_stream_create(sim_ctx_t *ctx, unsigned flags, int priority, sim_stream_t **out);
sim_op_t *sim_op_new(int kind);
sim_op_t *sim_op_get(sim_stream_t *s, int kind); /* from the thread's cache of ops */
CUresult sim_enqueue(sim_stream_t *s, sim_op_t *op);            /* takes op */
CUresult sim_enqueue_wait(sim_stream_t *s, sim_op_t *op);       /* enqueue, then wait */
void sim_wait_seq(sim_stream_t *s, uint64_t seq);
void sim_kick(sim_stream_t *s); /* wake the worker if it sleeps on queued work */
CUresult sim_ctx_synchronize(sim_ctx_t *ctx);
bool sim_valid_stream(sim_ctx_t *ctx, sim_stream_t *s);

/* copy.c. What a range is to a copy: pageable host memory, pinned host memory (mapped for
 * the device), device memory, or neither (device addresses not mapped with access, or
 * spanning devices). */
enum { SIDE_HOST = 0, SIDE_PINNED, SIDE_DEVICE, SIDE_BAD };
int sim_classify(const void *p, size_t n);
/* Queue a copy of n bytes on `stream` with CUDA's rules for when the host waits (copy.c's
 * header). `how`: SIM_COPY_ASYNC for an asynchronous call (else a synchronous one);
 * SIM_COPY_PEER for a peer copy, which may copy between devices that cannot reach each
 * other's memory; SIM_COPY_SRC_NOW to read the source during the call (a batched copy's
 * CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL). sim_copy_check: only whether the copy may
 * be made (CUDA_ERROR_INVALID_VALUE if not), queueing nothing. */
enum { SIM_COPY_ASYNC = 1, SIM_COPY_PEER = 2, SIM_COPY_SRC_NOW = 4 };
CUresult sim_copy_check(const void *dst, const void *src, size_t n, unsigned how);
CUresult sim_copy_any(void *dst, const void *src, size_t n, CUstream stream, unsigned how);
/* copy_nd.c: a 2D or 3D copy, rows of `width` bytes: `rows` a slice, `depth` slices. A
 * side's row (y, z) starts at base + ((z + side.z) * height + y + side.y) * pitch + x.
 * Memory types host, device or unified (arrays are not simulated: NOT_SUPPORTED).
 * sim_shape_check: whether the driver accepts it (layouts, and every row memory its
 * type allows); sim_shape_queue: its rows on `stream` (`how` as for sim_copy_any). */
typedef struct sim_side {
    CUmemorytype type;
    const char *base; /* host pointer, or device pointer as an address */
    size_t x, y, z, pitch, height;
    sim_ctx_t *ctx;   /* peer copies: the context its device memory belongs to */
} sim_side_t;
typedef struct sim_shape {
    sim_side_t src, dst;
    size_t width, rows, depth; /* WidthInBytes, Height, Depth */
    bool peer;
} sim_shape_t;
CUresult sim_shape_check(const sim_shape_t *p);
CUresult sim_shape_queue(const sim_shape_t *p, CUstream stream, unsigned how);
/* stream.c: make op wait for stream s up to `seq`; or for the work queued so far on every
 * blocking stream of ctx (the legacy one included) but `except`. False: out of memory. */
bool sim_op_after(sim_op_t *op, sim_stream_t *s, uint64_t seq);
bool sim_op_after_blocking(sim_op_t *op, sim_ctx_t *ctx, const sim_stream_t *except);
/* memop.c and stream.c: a stream memory operation's kind (only the four that touch a word
 * reach a worker). */
static inline bool sim_memop_wide(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WAIT_VALUE_64 || t == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}
static inline bool sim_memop_is_wait(CUstreamBatchMemOpType t) {
    return t == CU_STREAM_MEM_OP_WAIT_VALUE_32 || t == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}
/* memory.c: the device whose memory is mapped at addr, or NULL (not its arena's: a VMM
 * range reserved anywhere may map any device's memory). */
sim_device_t *sim_memory_device(uint64_t addr);
/* Can device d reach the memory at addr directly? cuMemAlloc memory: yes (as far as a
 * copy is concerned); a VMM mapping: if its access list names d. */
bool sim_reaches(uint64_t addr, const sim_device_t *d);

/* graph.c: stream capture. sim_capture_op takes an op enqueued on a capturing stream
 * (returns false if the stream is not capturing); the other two apply CUDA's rules to a
 * synchronisation of one stream (NULL: the whole context) and to a "potentially unsafe"
 * call (cuMemAlloc, VMM, ...), invalidating the captures they break. */
#define SIM_UNSAFE_DURING_CAPTURE()                                                         \
    do {                                                                                    \
        CUresult unsafe_ = sim_capture_unsafe_check();                                      \
        if (unsafe_ != CUDA_SUCCESS)                                                        \
            return unsafe_;                                                                 \
    } while (0)
bool sim_capture_op(sim_stream_t *s, sim_op_t *op, CUresult *r);
CUresult sim_capture_sync_check(sim_ctx_t *ctx, sim_stream_t *s);
CUresult sim_capture_unsafe_check(void);
/* An event recorded in a capture: CUDA_ERROR_CAPTURED_EVENT, else CUDA_SUCCESS. */
CUresult sim_capture_event_check(sim_event_t *e);
/* cuStreamWaitEvent of a captured event: joins or forks captures (true: handled). */
bool sim_capture_wait(sim_stream_t *s, sim_event_t *e, CUresult *r);
void sim_op_destroy(sim_op_t *op); /* (stream.c) */
sim_op_t *sim_op_clone(const sim_op_t *op);

/* module.c */
void sim_register_builtin_kernels(void);


/* sanitizer.c: the Compute Sanitizer API's stand-in. A module was loaded (module.c); a
 * kernel of `module` is being launched: the patch its op runs with (fn NULL: none). */
void sim_sanitizer_module_loaded(CUmodule module, CUlibrary library, const char *image);
void sim_sanitizer_module_unloading(CUmodule module);
/* A kernel queued on a capturing stream: not a launch (no launch callbacks), but the
 * module's patch goes with it into the graph. */
sim_patch_fn sim_sanitizer_captured(CUmodule module);
/* cuGraphLaunch queues kernel node `op` (a copy) of graph exec x on `stream`, the
 * launch_id-th launch of x: the graph node launch callback, which may give it user data. */
void sim_sanitizer_graph_node(CUgraphExec x, uint32_t launch_id, sim_op_t *op, CUstream stream);
typedef struct sim_patch {
    sim_patch_fn fn;
    void *ud;
} sim_patch_t;
sim_patch_t sim_sanitizer_launch_begin(CUmodule module, CUfunction f, const char *name,
                                       CUstream stream, const vgsim_launch_t *l);
void sim_sanitizer_launch_end(CUmodule module, CUfunction f, const char *name, CUstream stream,
                              const vgsim_launch_t *l);
/* The worker runs a kernel op's host twin with its patch (NULL: none) in effect. */
void sim_sanitizer_run(const sim_op_t *op, void (*run)(void *), void *arg);

#endif /* VGSIM_INTERNAL_H */
