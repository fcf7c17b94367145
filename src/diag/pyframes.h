/* pyframes.h — allocation sites as Python source lines, when the program is Python.
 *
 * With the python_frames option on, a site captured on a thread that runs Python code
 * (a PyTorch training script allocating a tensor) is the Python stack — "forward
 * (model.py:42)", innermost first — instead of the C frames of PyTorch's dispatcher,
 * which name no line of the user's. Threads without Python frames (autograd's worker
 * threads, C code) keep their C backtrace.
 *
 * A Python frame is stored in a site as a tagged number (VG_PYFRAME_TAG | id) among
 * return addresses, so interning, counting and reports need no second kind of site; the
 * symbolizer turns it back into text. The interpreter's C API is looked up at run time
 * (dlsym), as the driver is: vramguard neither links nor needs Python.
 */
#ifndef VG_PYFRAMES_H
#define VG_PYFRAMES_H

#include <stdbool.h>
#include <stdint.h>

/* No user-space code address has these bits set on the 64-bit targets we build for. */
#define VG_PYFRAME_TAG ((uintptr_t)0xFFFF000000000000ull)

static inline bool vg__is_pyframe(uintptr_t f) { return (f & VG_PYFRAME_TAG) == VG_PYFRAME_TAG; }

/* Set when python_frames is on and this process runs a Python interpreter. */
extern bool vg__pyframes_on;

/* Look up the interpreter (after the options are read). Logs, with verbose, why not. */
void vg__pyframes_init(void);

/* The calling thread's Python stack, innermost first, up to max frames: 0 when the
 * thread runs no Python code, has no Python thread state, or the interpreter is shutting
 * down. Takes the GIL for the walk (the thread's own state, as PyTorch's memory history
 * does), so call it with no vramguard lock held. */
int vg__pyframes_capture(uintptr_t *out, int max);

/* Whether this process runs Python while python_frames is off: its sites are then
 * C frames that name no line of the program (said where sites are shown). */
bool vg__pyframes_missed(void);

/* "function (file:line)" for a tagged frame, or NULL if f is not one vramguard made. */
const char *vg__pyframe_text(uintptr_t f);

#endif
