/* fuzz_guard.c — fuzz_allocator's operations in guard mode (see there). */
#define VG_FUZZ_GUARD 1
#include "fuzz_allocator.c"
