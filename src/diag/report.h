/* report.h — error reports (D8): one per error, text and JSON.
 *
 * A report names the allocation (address, requested size, allocation number, device,
 * stream), where the damage is relative to it, where it was allocated and freed, the
 * kernels and copies launched since its last clean check, and what found it. Text goes to
 * the report sink as soon as the error is found; JSON objects are kept and written to
 * `report_json` at exit (and returned by vg_errors_json()).
 */
#ifndef VG_REPORT_H
#define VG_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/cuda_abi.h"
#include "base/common.h"

/* X(id, json kind, headline) */
#define VG_REPORT_KINDS(X)                                                                  \
    X(OOB_AFTER, "out_of_bounds_after", "out-of-bounds write after the end of an allocation") \
    X(OOB_BEFORE, "out_of_bounds_before",                                                   \
      "out-of-bounds write before the start of an allocation")                             \
    X(USE_AFTER_FREE, "use_after_free", "write to freed memory")                            \
    X(DOUBLE_FREE, "double_free", "double free")                                            \
    X(INVALID_FREE, "invalid_free", "free of a pointer vramguard never allocated")          \
    X(INTERIOR_FREE, "interior_free", "free of a pointer inside an allocation")             \
    X(WRONG_DEVICE, "wrong_device_free", "free on the wrong device")                        \
    X(LEAK, "leak", "memory still allocated at exit")                                       \
    X(GROWTH, "growth", "memory from one allocation site grows every step")                 \
    X(HOST_RACE, "host_race", "host access to a buffer while an async copy uses it")        \
    X(UNORDERED_FREE, "unordered_free",                                                     \
      "memory freed while a kernel or copy on another stream may still use it")            \
    X(CUDA_ERROR, "cuda_error", "CUDA error")                                               \
    X(OUT_OF_MEMORY, "out_of_memory", "out of device memory")                               \
    X(OOB_COPY, "out_of_bounds_copy", "copy or memset out of the bounds of an allocation")   \
    X(FREED_ARG, "launch_with_freed_pointer", "kernel launched with a pointer to freed memory") \
    X(UNINIT_READ, "uninitialized_read", "kernel reads memory never written since its allocation")

typedef enum {
#define VG_X(id, json, headline) VG_REPORT_##id,
    VG_REPORT_KINDS(VG_X)
#undef VG_X
        VG_REPORT_NKINDS
} vg_report_kind_t;

typedef struct vg_report {
    vg_report_kind_t kind;
    int device;
    CUstream stream;          /* the allocation's stream (or the copy's, the error's) */
    bool has_block;           /* the fields below describe an allocation */
    uint64_t user;            /* the allocation's address */
    uint64_t size;            /* bytes requested */
    uint64_t id;              /* allocation number */
    bool in_graph;            /* made while a CUDA graph was captured (graphpool.c) */
    bool managed;             /* managed memory (cuMemAllocManaged): the host reaches it */
    bool pinned;              /* LEAK, GROWTH, OUT_OF_MEMORY: of pinned host memory */
    bool has_damage;
    int64_t off_first, off_last; /* damaged bytes, relative to `user` */
    uint64_t bad_bytes;
    uint32_t damage_word;     /* the 4 bytes found at the first damaged byte */
    uint32_t alloc_site, free_site, call_site; /* call_site: the offending call */
    uint64_t clean_seq;       /* launches after this one are listed (0: none) */
    uint64_t bytes, count;    /* LEAK / GROWTH: how much, in how many allocations */
    int64_t growth_per_step;  /* GROWTH */
    uint32_t steps;           /* GROWTH */
    uint64_t kernel_seq;      /* UNORDERED_FREE: the other stream's launch, */
    int kernel_arg;           /* its argument pointing into the allocation, */
    CUstream free_stream;     /* and the stream of the free */
    const char *found;        /* what found it: "when the allocation was freed", ... */
    const char *call_what;    /* the call_site's line ("the kernel was launched at"), or
                                 NULL: "the call was at" */
    const char *headline;     /* instead of the kind's ("copy reads freed memory"), or NULL */
    const char *kernel;       /* a kernel's name, matched by suppressions too, or NULL */
    char json[2048];          /* more JSON members (",\"access\":{...}"), or "" */
    char lead[400];           /* a line right under the headline, or "" */
    char detail[4096];        /* extra lines, already formatted (indented, no prefix) */
} vg_report_t;

/* The kind's name in JSON ("use_after_free"), as suppression files name it too. */
static inline const char *vg__report_kind_json(vg_report_kind_t k) {
    switch (k) {
#define VG_X(id, json, headline)                                                            \
    case VG_REPORT_##id: return json;
        VG_REPORT_KINDS(VG_X)
#undef VG_X
    default: return "unknown";
    }
}

/* Print the report now and keep its JSON. Thread safe; allocates. */
void vg__report(const vg_report_t *r);

/* For reports made once per place (a loop repeats its bug every turn): true the first
 * time `key` is asked, false after (for the first 512 keys; later ones: always true). */
bool vg__report_first_time(uint64_t key);

/* Errors reported so far (leaks and growth included), and by kind. */
uint64_t vg__report_count(void);
uint64_t vg__report_count_kind(vg_report_kind_t k);

/* The end-of-run summary line, the JSON file and the exit status (at exit). */
void vg__report_finish(void);

/* Every report so far as a JSON array (caller frees). */
char *vg__reports_json(void);

#define VG_LAUNCH_PTRS 16 /* words of a launch's arguments kept: possible pointers */

/* Where a kept word lies: the argument's position, and the byte in it (a pointer inside a
 * struct argument, as PyTorch's kernels take their tensors' data pointers). */
#define VG_ARG_WHERE(index, byte) ((uint16_t)(((index) << 8) | ((byte) / 8)))

/* Launch records: the interposer (or vg_kernel_launched) notes each kernel launch.
 * `ptrs` (may be NULL) are words of the launch's arguments that may be device pointers:
 * those that fall inside a vramguard allocation are named in reports ("argument 0 =
 * allocation #7 + 0"); `where` (NULL: word i is argument i) says where each lies. */
uint64_t vg__launch_note(const char *name, CUstream stream, uint32_t site);
/* The number and site of the last kernel launch this thread noted, once (0: none since
 * the last call): memcheck's launch callback, called inside the driver's launch, names
 * the launch the interposer noted just before. */
uint64_t vg__launch_take_noted(uint32_t *site);
/* An asynchronous copy or memset on `stream` (the interposer's hooks): recorded as a
 * launch named "CALL of N bytes" ("CALL (copy 2 of 3) of N bytes" for copy `index` of a
 * batch of `count` > 1), with its device pointers (dst: argument 0, src: argument 1; 0
 * for a host side), so reports list it beside kernels and G7 judges frees after it.
 * `call` must live as long as the process (a string literal): the name is made only when
 * a report shows the copy. */
uint64_t vg__copy_note(const char *call, unsigned index, unsigned count, CUstream stream,
                       uint32_t site, uint64_t dst, uint64_t src, uint64_t bytes);
/* `captured`: whether the stream is being captured into a CUDA graph (-1: ask). */
uint64_t vg__launch_note_args(const char *name, CUstream stream, uint32_t site,
                              const uint64_t *ptrs, const uint16_t *where, int nptrs,
                              int captured);
/* Describe device address p relative to the vramguard allocation holding it
 * ("allocation #7 (4000 bytes) + 16"); false if none does. Takes the heap locks. The
 * launch records keep the raw pointers and describe them only when printed. */
bool vg__describe_device_ptr(uint64_t p, char *out, size_t n);

/* For the interposer (api.c; each takes the heap locks): is p inside memory vramguard
 * holds; the live allocation holding p (its pointer and requested size); launch the
 * guard work waiting on `stream` (before a program's launch on it). */
bool vg__is_ours(uint64_t p);
bool vg__live_range(uint64_t p, uint64_t *base, uint64_t *size);
void vg__guard_flush_stream(void *stream);
/* A synchronisation the program makes (docs/decisions.md A9): begin before it waits,
 * for context ctx (all; NULL: the current one) or one stream; end once it returned, `ok`
 * if it succeeded: the streams' work up to the beginning is then complete (frees made
 * by other threads while it waited are not), and the check_sync check runs. */
#define VG_SYNC_HEAPS 64 /* (every heap: heaps.c keeps at most 64) */
typedef struct vg_sync {
    bool all;
    bool check; /* run the check_sync check at the end (the program's own) */
    CUcontext ctx;
    CUstream stream;
    int n;
    struct vg_heap *heap[VG_SYNC_HEAPS];
    struct vg_sync_marks *marks[VG_SYNC_HEAPS];
} vg_sync_t;
void vg__sync_begin(vg_sync_t *t, bool all, CUcontext ctx, CUstream stream);
void vg__sync_end(vg_sync_t *t, bool ok);
/* The program's cuMemAlloc: memory every stream may use at once (VG_STREAM_SYNC); with
 * `managed`, its cuMemAllocManaged in guard mode, from the current context's managed heap
 * (VG_ERR_NOT_SUPPORTED: the driver's managed memory must serve it). */
vg_status_t vg__malloc_synchronous(void **ptr, size_t size, bool managed);
/* The program's cuMemFree of vramguard memory: the allocation's context is synchronised,
 * as the driver's cuMemFree does (not during a capture), then the memory is freed, any
 * stream's at once; `waited` is what the synchronisation returned. */
vg_status_t vg__free_synchronous(void *ptr, CUresult *waited);
/* The program destroys ctx: guard mode's final check of its heap runs now, then nothing
 * more is launched there. */
void vg__context_destroying(CUcontext ctx);
/* The program resets device dev's primary context (cudaDeviceReset): the same, for the
 * heap of that context (docs/decisions.md A10). */
void vg__primary_resetting(CUdevice dev);
/* G7: of the launches after `since` on streams other than s (not captured into a graph),
 * the newest given a pointer into [lo, hi] that nothing orders before s's later work
 * (order.h), skipping streams `exempt` accepts (the allocation's record_stream uses).
 * True and its launch number and argument index if there is one. Takes the launch and
 * order locks only. */
bool vg__launch_find_unordered(CUstream s, uint64_t lo, uint64_t hi, uint64_t since,
                               bool (*exempt)(CUstream t, void *arg), void *arg,
                               uint64_t *seq, int *argi);
/* G7: a free found unordered after another stream's launch, copied under the heap lock. */
typedef struct vg_unordered {
    int device;
    CUstream stream, free_stream; /* the allocation's stream, the free's */
    uint64_t user, size, id;
    uint32_t alloc_site, free_site;
    uint64_t kernel_seq;          /* the other stream's launch */
    int kernel_arg;               /* its argument word pointing into the allocation */
} vg_unordered_t;
/* Report it (UNORDERED_FREE), once per allocation site, free site and kernel launch site.
 * Heap locks must not be held. */
void vg__report_unordered_free(const vg_unordered_t *u);
/* Append the launches after `since` (most recent last, at most `max`) to b. */
void vg__launches_describe(vg_buf_t *b, uint64_t since, int max, const char *indent);
/* `describe`: name the allocations its pointer arguments fall in (takes the heap locks). */
void vg__launches_json(vg_buf_t *b, uint64_t since, int max, bool describe);
/* The last launches on each stream with their pointer arguments described (S9, for CUDA
 * error reports; takes the heap locks). */
void vg__launches_by_stream(vg_buf_t *b, int per_stream, const char *indent);

/* A driver call returned error r (S9): report it once per kind of sticky error, with the
 * last kernels launched on each stream and what guard mode's log already holds. Heap
 * locks must not be held. */
void vg__report_cuda_error(CUresult r, const char *call);

/* Ask for a snapshot ("oom" or "error") with `snapshot=` set; safe with heap locks held:
 * snapshot.c's vg__snapshot_maybe() writes it. _take: the reasons asked since, cleared. */
void vg__snapshot_on(const char *reason);
int vg__snapshot_wanted_take(void);

#endif /* VG_REPORT_H */
