/* fuzz_options.c — the option string (VRAMGUARD_OPTIONS, vg_init, CLI flags): any bytes
 * either parse or give an error naming the problem; nothing crashes or overflows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "api/init.h"
#include "vramguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (vg__options_validate(s) != VG_OK && vg_last_error()[0] == '\0')
        abort(); /* an error must say what was wrong */
    free(s);
    return 0;
}
