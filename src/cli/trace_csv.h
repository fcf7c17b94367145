/* trace_csv.h — reading allocation traces in the RMM log format, as RMM's
 * logging_resource_adaptor writes it (and vramguard's trace= option, and `python -m
 * vramguard convert`):
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   2342727,15:47:02.841961,allocate,0x10012400000,1048576,0
 *   2342727,15:47:02.841977,free,0x10012400000,1048576,0
 *   2342731,15:47:03.000123,allocate failure,(nil),1099511627776,0x55d5c8a0b2c0
 *
 * Thread: the OS thread id; Time: the clock time of day (HH:MM:SS.ffffff; a whole number
 * is taken too); Pointer: hex, "(nil)" on a failure; Stream: 0 for the default stream,
 * else hex (decimal is taken too). An `allocate failure` row is counted, not replayed (the
 * program's allocation failed there, and nothing frees it).
 *
 * The reader turns pointers into dense slot numbers (a pointer's lifetime from allocate to
 * free is one slot), streams and threads into dense indices, and checks the trace as it
 * goes: a malformed line, a negative or absurd size, a free of a pointer that is not live,
 * or a pointer allocated twice stops it with a message naming the line.
 */
#ifndef VG_TRACE_CSV_H
#define VG_TRACE_CSV_H

#include <stddef.h>
#include <stdint.h>

#define VG_TRACE_THREADS 1024

typedef struct vg_trace_op {
    uint8_t alloc;     /* 1 allocate, 0 free */
    uint32_t slot;     /* the allocation this op makes or frees */
    uint32_t stream;   /* index into streams[] */
    uint16_t thread;   /* index into threads[] */
    uint64_t size;     /* bytes (allocate); the trace's figure (free) */
} vg_trace_op_t;

typedef struct vg_trace {
    vg_trace_op_t *ops;
    size_t nops;
    size_t nslots;     /* distinct allocations */
    uint64_t *streams; /* the trace's stream ids; streams[0] is always 0 (default) */
    uint32_t nstreams;
    size_t live_at_end;/* allocations the trace never frees */
    size_t failures;   /* `allocate failure` rows: counted, not replayed */
    uint64_t threads[VG_TRACE_THREADS]; /* the trace's thread ids, in order of appearance */
    uint32_t nthreads;
} vg_trace_t;

/* Load a trace. Returns 0, or -1 with a one-line reason (naming the line) in err. */
int vg_trace_load(const char *path, vg_trace_t *out, char *err, size_t errlen);
/* The same from memory (the fuzzer's entry point). */
int vg_trace_parse(const char *data, size_t len, vg_trace_t *out, char *err, size_t errlen);
void vg_trace_free(vg_trace_t *t);

#endif /* VG_TRACE_CSV_H */
