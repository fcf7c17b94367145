/* vramguard.h — the public C API of vramguard, a GPU memory allocator and watchdog.
 *
 * This is the only public header. Every public symbol starts with vg_. All functions are
 * thread safe and return a vg_status_t (VG_OK on success) unless stated otherwise; on an
 * error, vg_last_error() holds a full explanation for the calling thread.
 *
 *   #include <vramguard.h>
 *
 *   vg_init("mode=guard,limit=15G");      // optional: any call initialises from the env
 *   void *p;
 *   if (vg_malloc(&p, 4000, stream) != VG_OK)
 *       fprintf(stderr, "%s\n", vg_last_error());   // e.g. the OOM explanation
 *   ...
 *   vg_free(p, stream);
 */
#ifndef VRAMGUARD_H
#define VRAMGUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VG_API __attribute__((visibility("default")))
#else
#define VG_API
#endif

#define VG_VERSION_MAJOR 0
#define VG_VERSION_MINOR 1
#define VG_VERSION_PATCH 0
#define VG_VERSION_STRING "0.1.0"

/* =========================================================================================
 * Status codes
 * =======================================================================================*/

/* X(name, value, message). Driver errors are VG_ERR_CUDA_BASE + the driver's CUresult;
 * vg_strerror() gives their CUDA_ERROR_... name. */
#define VG_STATUS_LIST(X)                                                                   \
    X(VG_OK, 0, "success")                                                                  \
    X(VG_ERR_INVALID_ARGUMENT, 1, "invalid argument")                                       \
    X(VG_ERR_OUT_OF_MEMORY, 2, "out of device memory")                                      \
    X(VG_ERR_NO_DRIVER, 3, "no CUDA driver could be loaded")                                \
    X(VG_ERR_INVALID_OPTION, 4, "invalid option")                                           \
    X(VG_ERR_NOT_SUPPORTED, 5, "not supported by this driver or device")                    \
    X(VG_ERR_DOUBLE_FREE, 10, "double free")                                                \
    X(VG_ERR_INVALID_FREE, 11, "free of a pointer that vramguard never allocated")          \
    X(VG_ERR_INTERIOR_FREE, 12, "free of a pointer inside an allocation")                   \
    X(VG_ERR_WRONG_DEVICE, 13, "free on a different device than the allocation's")          \
    X(VG_ERR_MEMORY_ERRORS, 20, "memory errors were found")                                 \
    X(VG_ERR_IO, 30, "input/output error")                                                  \
    X(VG_ERR_PARSE, 31, "malformed input")                                                  \
    X(VG_ERR_INTERNAL, 99, "internal error")

typedef enum vg_status {
#define VG_X(name, value, msg) name = value,
    VG_STATUS_LIST(VG_X)
#undef VG_X
    VG_ERR_CUDA_BASE = 1000
} vg_status_t;

/* A short, static description of a status: "out of device memory", or for driver
 * errors "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
 * Never NULL. */
VG_API const char *vg_strerror(vg_status_t status);

/* The full explanation of the last error on the calling thread (for an OOM: the request,
 * the device's memory, the largest free block, the top holders). "" when there is none.
 * The string stays valid until the thread's next vramguard call. */
VG_API const char *vg_last_error(void);

/* =========================================================================================
 * Initialisation and options
 * =======================================================================================*/

/* Initialise vramguard with an options string in the VRAMGUARD_OPTIONS syntax
 * ("key=value,key=value"), merged over the environment's VRAMGUARD_OPTIONS; NULL means
 * the environment only. Calling any other function first initialises from the
 * environment. A second call after initialisation returns VG_ERR_INVALID_ARGUMENT
 * unless the options are identical. Unknown keys and bad values return
 * VG_ERR_INVALID_OPTION with vg_last_error() naming the key; a missing driver,
 * VG_ERR_NO_DRIVER. A first call that fails also writes vg_last_error() to the log
 * (standard error unless log= says otherwise), so the reason is never lost. */
VG_API vg_status_t vg_init(const char *options);

/* Check an options string in the same syntax without applying it and without
 * initialising vramguard: every key and value, the suppressions file it names (read and
 * parsed), and that each file it names for output (log, report, report_json, snapshot,
 * trace) can be created. VG_OK (also for NULL), or VG_ERR_INVALID_OPTION with
 * vg_last_error() naming the key and the value. `vramguard run` checks each source of
 * options this way before it starts a program. */
VG_API vg_status_t vg_options_check(const char *options);

/* Write every option with its value and where the value came from (default,
 * VRAMGUARD_OPTIONS, vg_init) to the log. verbose=1 does this at initialisation. */
VG_API void vg_print_options(void);

/* The current value of an option as text (e.g. vg_option("mode") -> "guard"), or NULL
 * for an unknown key. The string stays valid until the thread's next vg_option call. */
VG_API const char *vg_option(const char *key);

/* Send everything vramguard writes (log lines and reports) to `fn` instead of standard
 * error / the files named by the `log` and `report` options. NULL restores the default.
 * `fn` may be called from any thread, must not call vramguard, and gets text that is
 * not NUL-terminated. */
VG_API void vg_set_output_callback(void (*fn)(const char *text, size_t len, void *arg),
                                   void *arg);

/* =========================================================================================
 * Allocation
 * =======================================================================================*/

/* Allocate `size` bytes of device memory on the current context's device, ordered on
 * `stream` (a CUstream; NULL is the legacy default stream). If no context is current,
 * the primary context of device 0 is made current, as the CUDA runtime does.
 *
 * The memory may be used by work on `stream` at once; other streams must first wait for
 * `stream` (or see vg_record_stream). The pointer is aligned to 512 bytes. size 0 gives
 * a valid, unique pointer. On failure *ptr is NULL and, for VG_ERR_OUT_OF_MEMORY,
 * vg_last_error() explains: the request, the device's memory, what is free, the largest
 * block that could be served, and the top holders by allocation site.
 *
 *   void *p;
 *   vg_status_t st = vg_malloc(&p, n * sizeof(float), stream);
 */
VG_API vg_status_t vg_malloc(void **ptr, size_t size, void *stream);

/* Allocate on a given device (its primary context); what PyTorch's allocator does. */
VG_API vg_status_t vg_malloc_device(void **ptr, size_t size, int device, void *stream);

/* Free memory from vg_malloc, ordered on `stream`: work queued on `stream` before this call
 * may still use it; the memory is reused on `stream` at once and on other streams only
 * after that work completes. NULL ptr is a no-op. A pointer vramguard did not hand out, one
 * already freed, one inside an allocation, or one of another device is reported and
 * returned as VG_ERR_INVALID_FREE / VG_ERR_DOUBLE_FREE / VG_ERR_INTERIOR_FREE /
 * VG_ERR_WRONG_DEVICE; the allocator's state is left intact. */
VG_API vg_status_t vg_free(void *ptr, void *stream);

/* As vg_free, also checking that the allocation belongs to `device`. */
VG_API vg_status_t vg_free_device(void *ptr, int device, void *stream);

/* Record that `stream` uses the allocation at ptr (PyTorch's record_stream): when it is
 * freed, it is not reused before the work queued on `stream` up to the free completes. */
VG_API vg_status_t vg_record_stream(void *ptr, void *stream);

/* Tell vramguard that all work queued on `stream` so far has completed (the program
 * synchronised it). Optional: it lets memory freed on `stream` move to other streams
 * without an event. In guard mode, which queues work of its own on the program's streams,
 * it counts only if the stream has completed that too. The interposer marks every
 * synchronisation it sees the same way. */
VG_API vg_status_t vg_stream_synchronized(void *stream);

/* Forget a stream before the program destroys it: waits for its work, then lets every
 * block freed on it serve any stream. */
VG_API vg_status_t vg_forget_stream(void *stream);

/* CUDA graphs (docs/decisions.md A7). A graph replays its kernels on the addresses they
 * had when it was captured, so the memory a capture allocates must stay the graph's until
 * the graph is destroyed, even after the capture frees it. Call vg_graph_pool_begin
 * before capturing and vg_graph_pool_end after cuStreamEndCapture: in between, requests
 * on `device` that `filter(stream, arg)` accepts (NULL: requests on a stream being
 * captured) come from graph pool `pool` (any number other than 0; captures may share a
 * pool, as PyTorch's graph_pool_handle does, if their graphs replay in capture order).
 * A pool's memory, freed, serves only the pool's later captures. vg_graph_pool_release,
 * once per vg_graph_pool_begin, after the graph is destroyed: the last one waits for the
 * device and returns the pool's free memory to the cache. vramguard's own driver calls
 * run in relaxed capture mode meanwhile (as PyTorch's allocator's do), so a capture in
 * the default global mode may allocate. */
typedef int (*vg_graph_filter_fn)(void *stream, void *arg);
VG_API vg_status_t vg_graph_pool_begin(int device, uint64_t pool, vg_graph_filter_fn filter,
                                       void *arg);
VG_API vg_status_t vg_graph_pool_end(int device, uint64_t pool);
VG_API vg_status_t vg_graph_pool_release(int device, uint64_t pool);

/* Return cached, unused device memory to the driver (every device). Waits for the
 * streams whose freed blocks it releases. */
VG_API vg_status_t vg_empty_cache(void);

/* Cap the device memory vramguard reserves on `device` (0 removes the cap). Memory
 * already reserved above a new cap is released where it is free. The `limit` option
 * sets the same cap for every device, as bytes or a fraction (limit=0.2). */
VG_API vg_status_t vg_set_memory_limit(int device, size_t bytes);

/* Check every invariant of every heap (blocks tile their segments, the free index and the
 * statistics agree, ...). VG_OK, or VG_ERR_INTERNAL with the violation in
 * vg_last_error(). Costs O(blocks); meant for tests and debugging. */
VG_API vg_status_t vg_validate(void);

/* =========================================================================================
 * Statistics
 * =======================================================================================*/

/* One counter, as in PyTorch's memory_stats(): current value, peak, total increase and
 * total decrease since the start (or the last reset). */
typedef struct vg_stat {
    int64_t current, peak, allocated, freed;
} vg_stat_t;

/* Pools, as PyTorch splits its statistics: all memory, blocks <= 1 MiB, larger blocks. */
enum { VG_POOL_ALL = 0, VG_POOL_SMALL = 1, VG_POOL_LARGE = 2, VG_POOLS = 3 };

/* X(field, PyTorch key, summary row, bytes?) — the per-pool counters. */
#define VG_STATS_POOLED(X)                                                                  \
    X(allocated_bytes, "allocated_bytes", "Allocated memory", 1)                            \
    X(active_bytes, "active_bytes", "Active memory", 1)                                     \
    X(requested_bytes, "requested_bytes", "Requested memory", 1)                            \
    X(reserved_bytes, "reserved_bytes", "GPU reserved memory", 1)                           \
    X(inactive_split_bytes, "inactive_split_bytes", "Non-releasable memory", 1)             \
    X(allocation, "allocation", "Allocations", 0)                                           \
    X(active, "active", "Active allocs", 0)                                                 \
    X(segment, "segment", "GPU reserved segments", 0)                                       \
    X(inactive_split, "inactive_split", "Non-releasable allocs", 0)

/* X(field, PyTorch key, summary row) — counters without pools. */
#define VG_STATS_SINGLE(X)                                                                  \
    X(oversize_allocations, "oversize_allocations", "Oversize allocations")                 \
    X(oversize_segments, "oversize_segments", "Oversize GPU segments")

/* X(field, PyTorch key) — event counters. */
#define VG_STATS_EVENTS(X)                                                                  \
    X(num_alloc_retries, "num_alloc_retries")                                               \
    X(num_ooms, "num_ooms")                                                                 \
    X(num_sync_all_streams, "num_sync_all_streams")                                         \
    X(num_device_alloc, "num_device_alloc")                                                 \
    X(num_device_free, "num_device_free")

#define VG_STATS_VERSION 1

typedef struct vg_stats {
    uint32_t version;       /* VG_STATS_VERSION */
    uint32_t size;          /* sizeof(vg_stats_t), set by the caller */
#define VG_X(f, key, row, bytes) vg_stat_t f[VG_POOLS];
    VG_STATS_POOLED(VG_X)
#undef VG_X
#define VG_X(f, key, row) vg_stat_t f;
    VG_STATS_SINGLE(VG_X)
#undef VG_X
#define VG_X(f, key) uint64_t f;
    VG_STATS_EVENTS(VG_X)
#undef VG_X
    uint64_t largest_free_block;   /* largest free block held in the cache, bytes */
    uint64_t largest_servable;     /* largest request that would succeed now, bytes */
    uint64_t device_total;         /* the device's memory, bytes */
    uint64_t limit;                /* the cap on reserved memory, 0 = none */
    /* Option plan=learn (docs/decisions.md A13): the program's training step, once found
     * in the requests it makes, and what a plan placing two steps would reserve. */
    uint64_t step_requests;        /* requests in a step (0: none found, or plan=off) */
    uint64_t step_found_at;        /* the number of allocations when it was found */
    uint64_t long_lived_bytes;     /* bytes live across steps that no plan places */
    uint64_t plan_bytes;           /* a plan's bytes for the tensors of two steps */
    uint64_t plan_peak_bytes;      /* those tensors' live bytes at their peak */
    uint64_t step_since;           /* allocations since the step was found ... */
    uint64_t step_repeated;        /* ... and of those, the size one step earlier had */
    uint64_t steps_found;          /* steps found so far (earlier ones stopped repeating) */
    /* Option plan=on: requests placed where the step's plan put them, and planned ones
     * whose place was taken (a tensor freed late, or work of another stream). */
    uint64_t plan_placed;
    uint64_t plan_missed;
    /* Physical pages unmapped from one place to be mapped at another (under memory
     * pressure, or with plan=on as the plan needs them). */
    uint64_t pages_moved;
    uint64_t page_move_waits;      /* times a stream was waited for so that pages could move */
    /* plan=on, the plan followed last: its tensors (two steps), and of them those it puts
     * beside the long-lived tensors, on pages those keep mapped, rather than in its own
     * range (plan_bytes). */
    uint64_t plan_tensors;
    uint64_t plan_beside_long_lived;
    /* plan=on: plans taken up again when their step came back after an interruption (an
     * evaluation between training steps, a checkpoint), instead of being learnt anew. */
    uint64_t plan_resumed;
} vg_stats_t;

/* Fill *out with the statistics of `device` (-1: the current context's device). Set
 * out->size = sizeof *out first; fields the library does not know stay untouched.
 * active/requested/allocated match PyTorch's meanings; reserved_bytes is device memory
 * mapped by vramguard; inactive_split* are computed when read (peak: the largest seen by
 * a read). */
VG_API vg_status_t vg_get_stats(int device, vg_stats_t *out);

/* Reset the peaks (to the current values) / the accumulated counters of `device`. */
VG_API vg_status_t vg_reset_peak_stats(int device);
VG_API vg_status_t vg_reset_accumulated_stats(int device);

/* A text table with the rows and columns of PyTorch's torch.cuda.memory_summary() for
 * `device` (-1: current). The caller frees it with vg_free_string(). NULL on error. */
VG_API char *vg_memory_summary(int device);

/* The statistics as one JSON object with PyTorch's memory_stats() keys
 * ("allocated_bytes.all.current": 123, ...). Free with vg_free_string(). */
VG_API char *vg_memory_stats_json(int device);

/* Pinned host memory (page-locked host RAM the driver pinned for the program:
 * cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister; cudaHostAlloc, cudaMallocHost,
 * cudaHostRegister, PyTorch's pin_memory()), as `vramguard run` sees the program pin and
 * free it. X(field, PyTorch key, its other key) — the counters, with
 * torch.cuda.host_memory_stats()'s keys: every block the driver pins is both an
 * allocation and a segment, so "segment" and "reserved_bytes" (the keys of PyTorch 2.5
 * and earlier) give the same figures as "allocations" and "allocated_bytes". */
#define VG_HOST_STATS_COUNTERS(X)                                                           \
    X(allocations, "allocations", "segment")                                                \
    X(allocated_bytes, "allocated_bytes", "reserved_bytes")                                 \
    X(registered_bytes, "registered_bytes", "") /* (vramguard's: cuMemHostRegister's part) */

/* X(field, PyTorch key) — time spent in the driver's pinning and unpinning calls, in
 * microseconds, as PyTorch's DurationStat. */
#define VG_HOST_STATS_TIMES(X)                                                              \
    X(host_alloc_time, "host_alloc_time")                                                   \
    X(host_free_time, "host_free_time")

typedef struct vg_duration_stat {
    int64_t total, max, min, count; /* microseconds; avg = total / count */
} vg_duration_stat_t;

typedef struct vg_host_stats {
    uint32_t size;                  /* sizeof(vg_host_stats_t), set by the caller */
#define VG_X(f, key, alias) vg_stat_t f;
    VG_HOST_STATS_COUNTERS(VG_X)
#undef VG_X
    uint64_t num_host_alloc, num_host_free; /* the driver's pinning and unpinning calls */
#define VG_X(f, key) vg_duration_stat_t f;
    VG_HOST_STATS_TIMES(VG_X)
#undef VG_X
    uint64_t num_ooms;              /* pinning requests that failed for lack of memory */
    uint64_t limit;                 /* pinned_limit, 0 = none */
    uint64_t warn_at;               /* pinned_warn in bytes, 0 = never */
    uint64_t host_total;            /* the host's RAM (MemTotal), bytes */
} vg_host_stats_t;

/* Fill *out with the pinned host memory counters of this process (all zero where no
 * pinning call was seen: only `vramguard run` sees them). Set out->size first. */
VG_API vg_status_t vg_get_host_stats(vg_host_stats_t *out);

/* The same as one JSON object with torch.cuda.host_memory_stats()'s keys
 * ("allocated_bytes.current": 123, "num_host_alloc": 4, "host_alloc_time.avg": 12, ...).
 * Free with vg_free_string(); NULL on error. */
VG_API char *vg_host_memory_stats_json(void);

/* Free a string returned by vramguard. */
VG_API void vg_free_string(char *s);

/* =========================================================================================
 * Guard mode (mode=guard): checks, errors, steps
 * =======================================================================================*/

/* Check every live allocation's redzones and every freed block in the quarantine now, on
 * every device, after waiting for all queued work. Errors found are reported (text, and
 * JSON with report_json) and VG_ERR_MEMORY_ERRORS is returned if there were new ones. In
 * fast mode there is nothing to check: VG_OK. */
VG_API vg_status_t vg_check(void);

/* Errors reported so far (leaks and growth reports included). */
VG_API uint64_t vg_error_count(void);

/* Every report so far as a JSON array. Free with vg_free_string(). */
VG_API char *vg_errors_json(void);

/* Mark the end of an iteration (a training step). A site whose live bytes grew at each
 * of the last `growth_steps` steps is reported: the site, the growth per step, the total. */
VG_API vg_status_t vg_step(void);

/* A snapshot of every device: segments, blocks, the last allocator events, allocation
 * sites, statistics and errors, as JSON (docs/snapshot-format.md). Free with
 * vg_free_string(). NULL if vramguard could not initialise. */
VG_API char *vg_snapshot_json(void);

/* Record the last `max_events` allocator events of each device from now on, for
 * snapshots' timelines (0: stop recording); what was recorded before is dropped. The
 * `snapshot_events` option sets it at start; this is PyTorch's
 * torch.cuda.memory._record_memory_history() for vramguard. */
VG_API vg_status_t vg_set_event_history(size_t max_events);

/* Write the snapshot to `path` (%p pid, %r rank; NULL: the `snapshot` option's path),
 * replacing the file atomically. */
VG_API vg_status_t vg_write_snapshot(const char *path);

/* Note a kernel launch, for reports' "kernels launched since the last clean check". The
 * interposer (vramguard run) notes every launch itself; call this only when launching
 * through vramguard's C API alone. `name` is copied. */
VG_API void vg_kernel_launched(const char *name, void *stream);

/* The same, with the launch's device-pointer arguments (up to 16; others are ignored):
 * those inside a vramguard allocation are named in reports, so that a kernel that faults
 * (S9) is shown with the allocations it was given. */
VG_API void vg_kernel_launched_args(const char *name, void *stream, const void *const *ptrs,
                                    int nptrs);

/* Tell vramguard that a CUDA call returned `result` (a CUresult): a sticky error such as
 * CUDA_ERROR_ILLEGAL_ADDRESS is reported once, with the last kernels launched on each
 * stream and their pointer arguments, and guard mode's findings so far. vg_check() does
 * this itself when the context has failed. */
VG_API void vg_cuda_error(int result, const char *call);

/* ---------------------------------------------------------------------------------------
 * PyTorch's pluggable allocator (python/vramguard wires these; see src/pytorch/entry.c).
 * The signatures are PyTorch's: alloc(size, device, stream), free(ptr, size, device,
 * stream), init(device_count), reset() for empty_cache, memory_fraction(fraction, device),
 * record_stream(ptr, stream). A failed allocation returns NULL; its explanation stays
 * readable with vg_torch_last_oom (returns its length; copies it into out).
 * ------------------------------------------------------------------------------------- */
VG_API void *vg_torch_alloc(size_t size, int device, void *stream);
VG_API void vg_torch_free(void *ptr, size_t size, int device, void *stream);
VG_API void vg_torch_init(int device_count);
VG_API void vg_torch_empty_cache(void);
VG_API void vg_torch_set_memory_fraction(double fraction, int device);
VG_API void vg_torch_record_stream(void *ptr, void *stream);
VG_API size_t vg_torch_last_oom(char *out, size_t n);
/* set_begin_allocate_to_pool (CUDA graph capture): vramguard has no graph pools yet and
 * warns once that a captured graph's memory is not kept apart. */
VG_API void vg_torch_begin_allocate_to_pool(int device, uint64_t pool_a, uint64_t pool_b,
                                            void *filter);

#ifdef __cplusplus
}
#endif
#endif /* VRAMGUARD_H */
