/* guard.h — guard mode (redzones, poison, quarantine, checks): the allocator's hooks. */
#ifndef VG_GUARD_H
#define VG_GUARD_H

#include <stdbool.h>

#include "heap.h"

/* Called by vg__heap_free for a block the user freed (stamped with its free stream).
 * In guard mode the block is poisoned and kept in quarantine: returns true and the
 * heap must not touch it. In fast mode returns false. */
bool vg__guard_quarantine(vg_heap_t *h, vg_block_t *b);
/* Release every quarantined block of h (after checking it): memory pressure. */
void vg__guard_flush_quarantine(vg_heap_t *h);

#endif /* VG_GUARD_H */
