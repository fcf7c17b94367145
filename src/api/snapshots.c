/* snapshots.c — the C API's snapshots (vramguard.h): vg_snapshot_json,
 * vg_write_snapshot and vg_set_event_history, over diag/snapshot.c and the heaps' event
 * rings (alloc/events.c). */
#include <pthread.h>
#include <stdlib.h>

#include "alloc/heap.h"
#include "base/common.h"
#include "base/options.h"
#include "diag/snapshot.h"
#include "init.h"
#include "../../include/vramguard.h"

VG_API char *vg_snapshot_json(void) {
    if (vg__ensure_init() != VG_OK)
        return NULL;
    return vg__snapshot_build("request");
}

VG_API vg_status_t vg_set_event_history(size_t max_events) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    if (max_events > 100000000)
        return vg__error(VG_ERR_INVALID_ARGUMENT,
                         "vg_set_event_history(%zu): at most 100000000 events (the "
                         "snapshot_events option's range)",
                         max_events);
    vg__events_keep((int64_t)max_events);
    for (int i = 0; i < vg__heap_count(); i++) {
        vg_heap_t *h = vg__heap_at(i);
        if (!h)
            continue;
        pthread_mutex_lock(&h->lock);
        vg__events_restart(h);
        pthread_mutex_unlock(&h->lock);
    }
    return VG_OK;
}

VG_API vg_status_t vg_write_snapshot(const char *path) {
    vg_status_t st = vg__ensure_init();
    if (st != VG_OK)
        return st;
    if (!path || !*path)
        path = vg__opt.snapshot;
    if (!*path)
        return vg__error(VG_ERR_INVALID_ARGUMENT,
                         "vg_write_snapshot: no path given and no snapshot= option set");
    return vg__snapshot_write(path, "request");
}
