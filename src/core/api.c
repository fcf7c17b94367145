/* api.c — the modules of the core, started and stopped in one place.
 *
 * Initialisation (init.c) calls vg__modules_init() once the options are read and the
 * driver is loaded; the exit handler calls vg__modules_shutdown() once.
 */
#include "common.h"
#include "init.h"

vg_status_t vg__modules_init(void) { return VG_OK; }

void vg__modules_shutdown(void) {}
