/* trace_csv.h — reading allocation traces in the RMM log format.
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   0,0,allocate,0x7f2d82000000,102760448,0
 *   0,15,free,0x7f2d82000000,102760448,0
 *
 * The reader turns pointers into dense slot numbers (a pointer's lifetime from allocate to
 * free is one slot) and streams into dense indices, and checks the trace as it goes: a
 * malformed line, a negative or absurd size, a free of a pointer that is not live, or a
 * pointer allocated twice stops it with a message naming the line.
 */
#ifndef VG_TRACE_CSV_H
#define VG_TRACE_CSV_H

#include <stddef.h>
#include <stdint.h>

typedef struct vg_trace_op {
    uint8_t alloc;     /* 1 allocate, 0 free */
    uint32_t slot;     /* the allocation this op makes or frees */
    uint32_t stream;   /* index into streams[] */
    uint64_t size;     /* bytes (allocate); the trace's figure (free) */
} vg_trace_op_t;

typedef struct vg_trace {
    vg_trace_op_t *ops;
    size_t nops;
    size_t nslots;     /* distinct allocations */
    uint64_t *streams; /* the trace's stream ids; streams[0] is always 0 (default) */
    uint32_t nstreams;
    size_t live_at_end;/* allocations the trace never frees */
} vg_trace_t;

/* Load a trace. Returns 0, or -1 with a one-line reason (naming the line) in err. */
int vg_trace_load(const char *path, vg_trace_t *out, char *err, size_t errlen);
/* The same from memory (the fuzzer's entry point). */
int vg_trace_parse(const char *data, size_t len, vg_trace_t *out, char *err, size_t errlen);
void vg_trace_free(vg_trace_t *t);

#endif /* VG_TRACE_CSV_H */
