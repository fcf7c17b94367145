/* print_mode.c — prints the mode vramguard runs in (for the set-uid test: a set-uid
 * program must ignore VRAMGUARD_OPTIONS from the environment of whoever runs it). */
#include <stdio.h>

#include "vramguard.h"

int main(void) {
    vg_status_t st = vg_init(NULL);
    const char *mode = vg_option("mode");
    printf("init %s, mode %s\n", st == VG_OK ? "ok" : vg_last_error(), mode ? mode : "?");
    return 0;
}
