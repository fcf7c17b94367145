/* textmap.h — which addresses are code: the executable segments of the loaded objects.
 *
 * The frame-pointer unwinder (sites.c) uses it to tell a real return address from the
 * garbage it reads where a caller was built without frame pointers (the usual -O2 build):
 * a walk stops at the first "return address" outside code, so the captured stack — and the
 * allocation site it names — is stable instead of differing on every call.
 */
#ifndef VG_TEXTMAP_H
#define VG_TEXTMAP_H

#include <stdbool.h>
#include <stdint.h>

/* True if addr lies in an executable segment of a loaded object. On a miss the table is
 * re-read (rate-limited) when objects were loaded since, unless `may_refresh` is false
 * (in a signal handler: the loader's lock is not async-signal-safe). Lock-free reads. */
bool vg__is_code(uintptr_t addr, bool may_refresh);

#endif
