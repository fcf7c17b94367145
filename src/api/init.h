/* init.h — initialisation state shared by the core. */
#ifndef VG_INIT_H
#define VG_INIT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "../../include/vramguard.h"
#include "alloc/heap.h"

extern _Atomic bool vg__ready;
vg_status_t vg__init_slow(void);

/* The check every public entry point starts with: one relaxed load when initialised. */
static inline vg_status_t vg__ensure_init(void) {
    if (__builtin_expect(atomic_load_explicit(&vg__ready, memory_order_acquire), 1))
        return VG_OK;
    return vg__init_slow();
}

/* Check an option string without applying it, as `vramguard run` does for each source
 * before it starts a program: every key and value, the suppressions file it names
 * (parsed), and each PATH it names (base/options.h). On error vg_last_error() names the
 * key and the value. */
vg_status_t vg__options_validate(const char *str);

/* Initialise with options from the command line (tagged as such by verbose=1). */
vg_status_t vg__init_from_cli(const char *options);

/* The modules' start and end (allocator, guard, reports): defined in api.c. Start runs
 * inside initialisation, after the driver is loaded; end runs once, at exit. */
vg_status_t vg__modules_init(void);
void vg__modules_shutdown(void);

/* End-of-process work (leak report, snapshot, files closed); idempotent. */
void vg__shutdown(void);
/* A fatal signal arrived (async-signal-safe): whichever thread runs vg__shutdown then
 * kills the process with it, and a thread that exits meanwhile waits for that. */
void vg__note_fatal_signal(int sig);

/* CUDA graphs' pools (graphs.c) for the C API and PyTorch's hooks (device < 0: the
 * current context's); drop(arg) is called when the route ends, or at once if it could not
 * begin. */
vg_status_t vg__graph_pool_begin(int device, const uint64_t id[2], vg_gpool_filter_fn filter,
                                 void *arg, void (*drop)(void *));
vg_status_t vg__graph_pool_end(int device, const uint64_t id[2], bool release);

#endif /* VG_INIT_H */
