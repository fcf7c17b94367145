/* init.h — initialisation state shared by the core. */
#ifndef VG_INIT_H
#define VG_INIT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "vramguard.h"

extern _Atomic bool vg__ready;
vg_status_t vg__init_slow(void);

/* The check every public entry point starts with: one relaxed load when initialised. */
static inline vg_status_t vg__ensure_init(void) {
    if (__builtin_expect(atomic_load_explicit(&vg__ready, memory_order_acquire), 1))
        return VG_OK;
    return vg__init_slow();
}

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

#endif /* VG_INIT_H */
