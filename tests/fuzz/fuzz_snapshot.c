/* fuzz_snapshot.c — snapshot files (vramguard report): anything either loads (and its
 * summary, its SVG and HTML timelines and its Chrome trace can be written) or is refused
 * with a message naming the file. The input's length picks how the timeline groups memory
 * (--group=auto, site or size), so every seed is read all three ways as the fuzzer grows it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/report_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const rp_group_t groups[3] = {RP_GROUP_AUTO, RP_GROUP_SITE, RP_GROUP_SIZE};
    rp_group = groups[size % 3];
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
    /* (Each writes the file or says why not; either way it returns, and frees what it took.) */
    rp_write_svg("/dev/null", &f, 1);
    rp_write_html("/dev/null", &f, 1);
    rp_write_chrome("/dev/null", &f, 1);
    rp_free(&f);
    return 0;
}
