/* preload.h — the interposer (libvramguard_preload.so, `vramguard run`): shared pieces.
 *
 * The library is loaded with LD_PRELOAD into an unmodified program. It exports the CUDA
 * driver functions listed in hooks.h under their ABI names (cuMemAlloc_v2, ...), so the
 * program's calls land in the hooks; it overrides dlsym() and answers cuGetProcAddress,
 * so that a program (or the CUDA runtime, linked statically or not) that looks driver
 * functions up by name also gets the hooks. The hooks call the real driver through
 * vramguard's driver layer (src/driver), which loads libcuda.so.1 (or vgsim) itself.
 *
 * If vramguard cannot start (a bad option, no driver), every hook passes its call
 * through to the next definition of the same symbol, untouched: the program runs as if
 * vramguard were not there, after one message saying why.
 */
#ifndef VG_PRELOAD_H
#define VG_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check/access.h"
#include "../driver/driver.h"

/* Start vramguard if it has not started; false if it could not (then pass through). */
bool vgp_ready(void);

/* The next definition of `symbol` after this library (the real driver's), cached by the
 * caller in *slot. NULL if there is none. */
void *vgp_next(const char *symbol, void **slot);

/* A driver call returned r: if it is one of the errors that kill a context (an illegal
 * address ...), report it once with the last kernels per stream (S9). Returns r. */
CUresult vgp_check(CUresult r, const char *call);

/* The sticky error seen (0 if none): once a context has died, the driver returns it from
 * every call, so the hooks that answer without the driver (allocations from the cache)
 * return it too. */
CUresult vgp_sticky(void);

/* Emit reports that had to wait (host races caught in the signal handler). */
void vgp_flush_deferred(void);

/* signals.c: write the reports on SIGINT/SIGTERM when the program does not handle them. */
void vgp_signals_install(void);

/* In a hook: call the next definition of this very function and return its result
 * (pass-through); CALL_NEXT keeps the result in r instead, for a hook that goes on. */
#define NEXT(symbol, ...)                                                                   \
    do {                                                                                    \
        CUresult r_;                                                                        \
        CALL_NEXT(r_, symbol, __VA_ARGS__);                                                 \
        return r_;                                                                          \
    } while (0)
#define CALL_NEXT(r, symbol, ...)                                                           \
    do {                                                                                    \
        static void *next_;                                                                 \
        typedef __typeof__(&symbol) fn_t_;                                                  \
        fn_t_ f_ = (fn_t_)vgp_next(#symbol, &next_);                                        \
        (r) = f_ ? f_(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED;                            \
    } while (0)

/* Convert a vramguard status into the CUresult the driver would have returned. */
CUresult vgp_cu_result(int vg_status);

/* Convert an allocation's vramguard status into the driver's CUresult, saying why an
 * allocation failed (resolve.c: the memory and pool hooks both use it). */
CUresult vgp_alloc_result(int vg_status);

/* --- hooks_pool.c: memory pools --- */

/* A vramguard allocation is about to be freed: the pool it was made for (if any) no
 * longer counts it. Costs nothing while no allocation for a pool is out. */
void vgp_pool_forget(CUdeviceptr p);
/* CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE of p: true, and *pool set, if p is a vramguard
 * allocation made for a pool. */
bool vgp_pool_attribute(CUdeviceptr p, CUmemoryPool *pool);

/* --- hooks_copy.c: pieces the copy hooks share --- */

#define VGP_INLINE static inline __attribute__((always_inline))
/* The program-facing stream of a _ptsz twin: NULL means the thread's default stream. */
#define VGP_PT(s) ((s) ? (s) : CU_STREAM_PER_THREAD)
/* A copy or memset the driver accepted (r): recorded beside the kernels. dst and src:
 * the device sides, 0 for a host side. Called by the hook itself (inlined helpers are
 * fine), before its return and never as a tail call: the site's frames skip this
 * function and the hook. */
void vgp_copied(CUresult r, const char *call, CUstream s, CUdeviceptr dst, CUdeviceptr src,
                size_t n);
/* The program's call site of the hook that calls this (as vgp_copied takes it; 0 when
 * sites are off): for hooks that record several copies from one call. */
uint32_t vgp_call_site(void);
/* Is p device memory (rather than host memory, as unified addressing allows)? */
bool vgp_device_memory(CUdeviceptr p);

/* Before a copy or memset: is its device range `a` fine (access.h: outside vramguard's
 * memory, or inside one live allocation)? False when it is not: then it has been reported
 * with the program's call site (so call it from the hook itself, inlined helpers aside,
 * as vgp_copied) and the hook returns CUDA_ERROR_INVALID_VALUE, calling nothing. */
bool vgp_range_ok(const vg_access_t *a);
/* The same for a linear range of `call` on stream s. */
#define VGP_RANGE_OK(call, role, write, p, n, s)                                            \
    vgp_range_ok(&(vg_access_t){(call), (role), 0, 0, (write), (uint64_t)(p), (uint64_t)(n), (s)})

/* --- race.c: the host/async-copy race guard (S3, S4) --- */

/* (The pinned host ranges the program allocated or registered, whose copies are
 * asynchronous and so guarded, are diag/pinned.h's.) */
/* Before an async copy between host range [h, h + n) and the device on `stream` (made by
 * `api`, named in reports): if the range is pinned, protect the pages it covers entirely
 * (to_device: read-only; else no access) until the copy completes. Returns a token for
 * vgp_race_after (0: nothing done: not pinned, device memory, or no whole page). */
uintptr_t vgp_race_before(const void *h, size_t n, bool to_device, CUstream stream,
                          const char *api);
/* After the copy was enqueued (r: its result): arrange the unprotection in stream order. */
void vgp_race_after(uintptr_t token, CUresult r, CUstream stream);
bool vgp_race_enabled(void);
/* An asynchronous copy the race guard follows: its call, bytes, stream, where enqueued. */
typedef struct vgp_copy {
    const char *api;
    size_t bytes;
    CUstream stream;
    uint32_t site;
} vgp_copy_t;
/* Host range [p, p + n) is about to be freed or unregistered: its pages stop being guarded
 * (the address may come back). True, and *copy (the first), if a copy followed on it was
 * still in flight. */
bool vgp_race_unpinned(const void *p, size_t n, vgp_copy_t *copy);
/* At exit: every protection lifted, the previous SIGSEGV handler back. */
void vgp_race_release(void);

#endif /* VG_PRELOAD_H */
