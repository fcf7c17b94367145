/* fuzz_plan.c — fuzz_allocator's operations with plan=on, settled (see there). */
#define VG_FUZZ_PLAN 1
#include "fuzz_allocator.c"
