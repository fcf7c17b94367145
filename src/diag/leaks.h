/* leaks.h — memory still live at exit, and memory that grows every step. */
#ifndef VG_LEAKS_H
#define VG_LEAKS_H

#include <stdbool.h>

struct vg_heap;
/* Whether leaks are reported (the option `leaks`; auto: in guard mode). */
bool vg__leaks_wanted(void);
/* Report every live allocation, grouped by allocation site, largest first: of every heap
 * at exit (only NULL), or of one heap whose context is being destroyed. `found` says
 * when ("at exit"). Takes the heap locks; reports once they are released. */
void vg__leak_report(struct vg_heap *only, const char *found);
/* The host caching allocator (PyTorch's, CuPy's) the caller's C stack runs in, or NULL:
 * asked when memory is pinned (sites may be Python lines, which do not show it). Reads
 * the loaded objects' symbols (dladdr), never runs the symbolizer. */
const char *vg__host_cache_here(void);
/* Report the pinned host memory still pinned at exit, grouped by site, largest first;
 * with leaks=auto, what a host cache pinned (its site's stack, or the C stack at the
 * pinning call, goes through it) is counted in one line as its cache. */
void vg__pinned_leak_report(void);
/* vg_step(): one iteration ended; report sites whose live bytes grew at each of the last
 * `growth_steps` steps (S5: tensors appended to a list in a training loop), device memory
 * and pinned host memory apart (S11). */
void vg__growth_step(void);

#endif /* VG_LEAKS_H */
