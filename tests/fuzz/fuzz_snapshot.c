/* fuzz_snapshot.c — snapshot files (vramguard report): anything either loads (and its
 * summary can be written) or is refused with a message naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/report_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rp_file_t f;
    char err[700];
    if (!rp_load_text("fuzz.json", (const char *)data, size, &f, err, sizeof err)) {
        if (!err[0])
            abort();
        return 0;
    }
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        rp_write_text(null, &f, 1);
        fclose(null);
    }
    rp_free(&f);
    return 0;
}
