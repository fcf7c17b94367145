/* tensormaps.h — the tensor maps a program built, so that initcheck sees the writes of the
 * tensor memory accelerator (docs/memcheck.md, docs/decisions.md G13).
 *
 * On Hopper GPUs cuBLAS and cuDNN store a matmul's output with bulk copies from shared
 * memory through a tensor map (`cp.async.bulk.tensor`), which the Compute Sanitizer API
 * reports as no global store: initcheck would call every later read of those bytes a read
 * of memory never written. The maps themselves are built on the host, through the driver
 * (cuTensorMapEncodeTiled and its kin, which both libraries ask cuGetProcAddress for):
 * the interposer records each one's 128 bytes with the region of global memory it
 * describes, and a launch whose parameters carry a recorded map counts that region as
 * written, in stream order, before the kernel runs. The descriptor is opaque: it is matched
 * by its bytes, never decoded.
 *
 * Only in memcheck mode with initcheck=1: the interposer records maps only when
 * vg__tensormaps_wanted(), and scans a launch only when vg__tensormaps_any(); otherwise
 * each costs a flag test.
 */
#ifndef VG_TENSORMAPS_H
#define VG_TENSORMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver/cuda_abi.h"

/* Are maps recorded (memcheck mode, initcheck=1)? */
bool vg__tensormaps_wanted(void);
/* Has any been recorded? (a launch's scan is skipped while none has) */
bool vg__tensormaps_any(void);

/* The bytes [address, address + span) a map of this shape covers (strides: of dimensions
 * 1 to rank - 1, in bytes); 0 if the shape makes no sense. */
uint64_t vg__tensormap_span(CUtensorMapDataType type, unsigned rank, const cuuint64_t *dims,
                            const cuuint64_t *strides);
/* The driver wrote map (128 bytes) for [address, address + span). */
void vg__tensormap_encoded(const void *map, uint64_t address, uint64_t span);
/* cuTensorMapReplaceAddress turned `before` (its 128 bytes before the call) into `map`,
 * now for `address`: the same span there. Unknown before: nothing is recorded. */
void vg__tensormap_replaced(const void *before, const void *map, uint64_t address);

/* A launch on `stream`: `size` bytes of its parameters at `bytes`, which start `offset`
 * bytes into the parameter buffer. Each recorded map among them (at 64-byte aligned
 * offsets, as the driver lays them out) has its region counted as written, before the
 * kernel, in stream order. */
void vg__tensormaps_scan(const void *bytes, size_t size, size_t offset, CUstream stream);

/* Maps recorded, and launches that carried one. */
void vg__tensormap_counts(uint64_t *maps, uint64_t *launches);

#endif /* VG_TENSORMAPS_H */
