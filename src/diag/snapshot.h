/* snapshot.h — snapshot JSON (see snapshot.c and docs/snapshot-format.md). */
#ifndef VG_SNAPSHOT_H
#define VG_SNAPSHOT_H

#include "../../include/vramguard.h"
#include "report.h"

/* The snapshot as JSON text (caller frees); takes each heap's lock in turn. */
char *vg__snapshot_build(const char *reason);
/* Build it and write it to the file pattern names (%p, %r expanded). */
vg_status_t vg__snapshot_write(const char *pattern, const char *reason);
/* Write the snapshot asked for (report.h's vg__snapshot_on), the first of each reason
 * only, if any (no heap lock held). */
void vg__snapshot_maybe(void);
/* At exit, with `snapshot=` set. */
void vg__snapshot_at_exit(void);

#endif /* VG_SNAPSHOT_H */
