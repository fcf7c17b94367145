/* memcheck.h — memcheck mode: every global load, store and atomic of every kernel checked
 * on the device against vramguard's allocations (docs/memcheck.md, docs/decisions.md G13).
 *
 * Guard mode plus a device callback patched into every module the program loads, through
 * NVIDIA's Compute Sanitizer API (sanitizer_abi.h), which checks each access against a
 * shadow of vramguard's segments (kernels/memcheck_abi.h). memcheck.c loads the API and
 * keeps the shadow; memcheck_report.c reads what the device logged and reports it.
 * Every function is a no-op outside memcheck mode.
 */
#ifndef VG_MEMCHECK_H
#define VG_MEMCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/heap.h"

bool vg__memcheck_on(void);

/* At initialisation (the driver loaded, before the program loads a module): find the
 * API, subscribe to module loads and launches. An error says what is missing. */
vg_status_t vg__memcheck_init(void);

/* vramguard loads a module of its own (guard mode's kernels): it is not patched. */
void vg__memcheck_own_module(bool loading);

/* A heap of guard mode was set up (context current): its context's shadow and log, with
 * the guard module's shadow kernel `shadow_fn`; the heap's segments get a shadow. */
vg_status_t vg__memcheck_heap_init(vg_heap_t *h, CUfunction shadow_fn);
/* Segments come and go (heap lock held). */
void vg__memcheck_segment_added(vg_heap_t *h, vg_segment_t *seg);
void vg__memcheck_segment_removed(vg_heap_t *h, vg_segment_t *seg);
/* Block b became an allocation on `stream` / was freed by the program on `stream`: its
 * shadow is rewritten in stream order (heap lock held, context current). `own`: on
 * memcheck's own stream, waited for (a synchronous cuMemAlloc, a CUDA graph's block). */
void vg__memcheck_alloc(vg_heap_t *h, const vg_block_t *b, CUstream stream, bool own);
void vg__memcheck_free(vg_heap_t *h, const vg_block_t *b, CUstream stream);
/* Did the device check the kernel launch this thread made last (the API's launch callback
 * gave it user data: memcheck on, its module patched, the kernel and the launch wanted by
 * memcheck_kernels and memcheck_every)? Asked, and cleared, by the interposer once the
 * driver's launch returns: guard mode's check of the launch's pointer arguments is left
 * out then, as the device saw which of them the kernel used (G13). */
bool vg__memcheck_take_checked(void);
/* A released graph pool's block b is general memory again (the context synchronised: no
 * replay runs): its words say freed if it is free, else what it holds, exactly, as
 * though no capture had ever shared its bytes. */
void vg__memcheck_unpooled(vg_heap_t *h, vg_block_t *b);
/* initcheck: a copy or memset the interposer forwards writes [addr, addr + bytes) on
 * `stream`: those bytes count as written, for kernels queued after it, as far as the live
 * allocation holding addr goes (no heap lock held). Also a tensor map's region, from a
 * launch that carries the map (check/tensormaps.h). */
void vg__memcheck_written(uint64_t addr, uint64_t bytes, CUstream stream);
/* The heap retires (context still alive, heap lock held). */
void vg__memcheck_heap_release(vg_heap_t *h);

/* memcheck_report.c: report what the device logged since the last poll (heap lock held). */
void vg__memcheck_poll(vg_heap_t *h);
/* Did memcheck report a write to allocation `id` before its start (side 0), past its end
 * (1) or after its free (2)? Guard mode's check of the same damage then stays quiet. */
bool vg__memcheck_saw(uint64_t id, int side);
/* At exit: counts, said once (verbose: always). */
void vg__memcheck_exit_summary(void);

/* For memcheck_report.c: what was launched, by launch number modulo VG_MC_LAUNCH_SPAN. */
typedef struct vg_mc_launch {
    uint64_t seq;            /* vramguard's launch number (0: none) */
    const char *name;        /* the kernel's name (interned: lives forever) */
    CUfunction function;
    CUmodule module;
    CUstream stream;
    uint32_t site;           /* where it was launched (sites.h), or 0 */
    uint32_t grid[3], block[3];
} vg_mc_launch_t;
bool vg__memcheck_launch(uint32_t lo, vg_mc_launch_t *out);
/* The pc's function and offset: "name+0x1f0" on a GPU, with " in file:line" where the
 * module has line information (then also in src, else src is ""); the twin's line on
 * vgsim. */
void vg__memcheck_pc_text(const vg_mc_launch_t *l, uint64_t pc, char *out, size_t n,
                          char *src, size_t src_n);
/* memcheck_lines.c: the source lines of the modules loaded (those with line information:
 * -lineinfo, -G, Triton), by module handle. A module loaded replaces what its handle had
 * (no image: they are dropped); one unloaded keeps them until 64 more have unloaded. */
void vg__memcheck_lines_loaded(CUmodule m, const void *image, size_t size);
void vg__memcheck_lines_unloaded(CUmodule m);
/* "file:line" of offset bytes into `function` of module m, into out; false if unknown. */
bool vg__memcheck_line(CUmodule m, const char *function, uint64_t offset, char *out, size_t n);
/* The names of module m's functions that have lines, copied (free each, and the array);
 * NULL with *n = 0 if none. */
char **vg__memcheck_line_functions(CUmodule m, size_t *n);
/* A context's log, for its heaps (NULL outside memcheck mode). */
struct vg_mc_log;
struct vg_mc_log *vg__memcheck_log(vg_heap_t *h);
/* Modules patched, and left unpatched (memcheck_kernels names none of their kernels);
 * launches checked and not. */
void vg__memcheck_counts(uint64_t *modules, uint64_t *unpatched, uint64_t *checked,
                         uint64_t *skipped);
/* The device function patched before every access (kernels/memcheck.cu): with or without
 * initcheck's bitmap, or the empty one of a cost measurement. */
const char *vg__memcheck_callback(void);

#endif /* VG_MEMCHECK_H */
