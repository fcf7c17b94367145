/* sites.h — allocation sites: captured stacks, interned once, counted per site.
 *
 * A site is a distinct captured stack (up to `stack_depth` return addresses). Sites are
 * interned in an insert-only, lock-free hash table, so capturing on every allocation
 * costs an unwind plus a hash lookup and never takes a lock. Site 0 is "unknown" (no
 * stack captured, or the table is full). Per-site live counters are atomics, updated
 * by whichever heap allocates or frees.
 *
 * Frames are raw return addresses (D9); symbolize.c turns them into text for reports.
 */
#ifndef VG_SITES_H
#define VG_SITES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

#define VG_MAX_FRAMES 64
#define VG_MAX_SITES (1u << 16)

/* Growth tracking (vg_step): live bytes at the last step and the run of steps in which
 * they grew. Updated by vg_step under the growth lock. */
typedef struct vg_growth {
    int64_t step_bytes;
    int64_t run_start_bytes;
    uint32_t run_steps;
    bool reported;
} vg_growth_t;

typedef struct vg_site {
    uint64_t hash;
    uint32_t nframes;
    uintptr_t frames[VG_MAX_FRAMES];
    _Atomic int64_t live_bytes;    /* bytes of live device allocations from this site */
    _Atomic int64_t live_count;
    _Atomic uint64_t total_count;  /* allocations ever made here */
    _Atomic uint64_t total_bytes;
    _Atomic int64_t peak_bytes;    /* highest live_bytes seen */
    _Atomic int64_t pinned_bytes;  /* pinned host memory from this site (pinned.h) */
    _Atomic int64_t pinned_count;
    _Atomic int64_t pinned_peak;   /* highest pinned_bytes seen */
    _Atomic uint64_t pinned_total; /* ranges ever pinned here */
    vg_growth_t growth, pinned_growth; /* of live_bytes, of pinned_bytes */
} vg_site_t;

/* Capture the caller's stack (skipping `skip` innermost frames) into frames[]; returns
 * the count. Uses frame pointers or the full unwinder per the unwind option. */
int vg__capture_stack(uintptr_t *frames, int max, int skip);

/* From a signal handler: the frames of an interrupted context (its pc and frame pointer),
 * with frame pointers, touching only this thread's stack (async-signal-safe; just the pc
 * if the thread's stack bounds are not known yet — vg__stack_bounds_prepare learns them).
 * Frame 0 is stored as pc + 1, so that the symboliser, which moves every frame back a
 * byte from a return address into its call, lands on the instruction at pc itself. */
int vg__unwind_from(uintptr_t pc, uintptr_t fp, uintptr_t *out, int max);
void vg__stack_bounds_prepare(void);

/* (vg__in_signal_handler, base/common.h: the unwinder then does nothing that is not
 * async-signal-safe, no re-reading of the loaded objects.) */

/* Intern a stack, returning its site id (0 when the table is full). */
uint32_t vg__site_intern(const uintptr_t *frames, int n);

/* Capture and intern in one go (what allocation paths call). */
uint32_t vg__site_here(int skip);

/* Number of sites interned so far (ids 1..count-1 are valid). */
uint32_t vg__site_count(void);

/* Set up the unwinder (warm up libgcc's, read the main thread's stack bounds). */
void vg__sites_init(void);

/* Sites live in chunks allocated on demand, published with release stores. */
#define VG_SITE_CHUNK 1024u
extern _Atomic(vg_site_t *) vg__site_chunks[VG_MAX_SITES / VG_SITE_CHUNK];

/* The site with this id (0 is the "unknown" site), or NULL if it does not exist. */
static inline vg_site_t *vg__site(uint32_t id) {
    if (id >= VG_MAX_SITES)
        return NULL;
    vg_site_t *chunk = atomic_load_explicit(&vg__site_chunks[id / VG_SITE_CHUNK],
                                            memory_order_acquire);
    return chunk ? &chunk[id % VG_SITE_CHUNK] : NULL;
}

static inline void vg__site_account(uint32_t id, int64_t bytes, int64_t count) {
    vg_site_t *s = vg__site(id);
    if (!s)
        return;
    int64_t now = atomic_fetch_add_explicit(&s->live_bytes, bytes, memory_order_relaxed) + bytes;
    atomic_fetch_add_explicit(&s->live_count, count, memory_order_relaxed);
    if (bytes > 0) {
        atomic_fetch_add_explicit(&s->total_count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->total_bytes, (uint64_t)bytes, memory_order_relaxed);
        int64_t peak = atomic_load_explicit(&s->peak_bytes, memory_order_relaxed);
        while (now > peak && !atomic_compare_exchange_weak_explicit(
                                 &s->peak_bytes, &peak, now, memory_order_relaxed,
                                 memory_order_relaxed)) {
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Symbolization (symbolize.c): only when a report is printed.
 * ------------------------------------------------------------------------------------- */

/* Describe one return address: "func (file.c:42)" or "func+0x1c (libx.so)" or
 * "0x7f... (libx.so+0x1234)". Results are cached; the first call for a module runs
 * addr2line on it once for all its pending addresses. Thread safe, allocates. */
const char *vg__symbolize(uintptr_t addr);
/* Describe addr without running the symbolizer: its cached text if a report already
 * symbolized it, a Python frame's text (both final: returns true), else "symbol+0xoff
 * (module)" or "module+0xoff" (false). For paths that must stay cheap (naming regions
 * for compute-sanitizer: nvtx.c). */
bool vg__symbolize_quick(uintptr_t addr, char *out, size_t n);
/* Has addr a final text (symbolized already, or a Python frame)? A hash lookup. */
bool vg__symbolize_known(uintptr_t addr);
/* Symbolize a batch up front (one addr2line run per module). */
void vg__symbolize_batch(const uintptr_t *addrs, int n);
/* A kernel's name as a user reads it: a mangled C++ name demangled (when the process has
 * the C++ runtime) without return type and parameters; any other name as it is. The
 * result lives as long as the process. */
const char *vg__kernel_name(const char *name);
/* A kernel's name for a report's first line: `name` itself, or, when it is longer than
 * VG_KERNEL_SHORT characters (a C++ template's), its start and end around "..." in buf
 * (the JSON report and the rest of the text keep it whole). */
#define VG_KERNEL_SHORT 120
const char *vg__kernel_name_short(const char *name, char *buf, size_t n);
/* Symbolize site s's frames and return how many a stack shows: those above the C
 * library's program start (__libc_start_call_main, __libc_start_main, _start), which
 * name nothing the program wrote. */
uint32_t vg__site_symbolize(const vg_site_t *s);
/* A key of what site `id`'s stack reads as (the text of the frames it shows): two sites
 * of one line (a loop the compiler unrolled, one call per copy) get the same key, so a
 * report made once per site is not made twice with the same text. Symbolizes the site. */
uint64_t vg__site_text_key(uint32_t id);
/* The file of the program or library holding return address addr (the program's by its
 * real path), or NULL. */
const char *vg__frame_module(uintptr_t addr);

#endif /* VG_SITES_H */
