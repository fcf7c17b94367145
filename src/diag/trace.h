/* trace.h — recording allocations to a file in the RMM log format (option `trace`):
 *     Thread,Time,Action,Pointer,Size,Stream
 * the format `vramguard replay` reads (and ../shared/traces uses). */
#ifndef VG_TRACE_H
#define VG_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/cuda_abi.h"
#include "../../include/vramguard.h"

vg_status_t vg__trace_open(void);
void vg__trace_close(void);
extern bool vg__trace_on;
void vg__trace_write(bool alloc, uint64_t ptr, uint64_t size, CUstream stream);
static inline void vg__trace_event(bool alloc, uint64_t ptr, uint64_t size, CUstream stream) {
    if (__builtin_expect(vg__trace_on, 0))
        vg__trace_write(alloc, ptr, size, stream);
}

#endif /* VG_TRACE_H */
