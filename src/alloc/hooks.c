/* hooks.c — the allocator's doors (hooks.h): empty until the layers above fill them. */
#include "hooks.h"

vg_alloc_hooks_t vg__alloc_hooks;
_Atomic bool vg__alloc_tool;
