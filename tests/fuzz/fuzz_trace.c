/* fuzz_trace.c — trace CSVs (vramguard replay): malformed input stops with a message
 * naming the line; a trace that parses is consistent (every free has its allocation). */
#include <stdint.h>
#include <stdlib.h>

#include "cli/trace_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vg_trace_t t;
    char err[1024];
    if (vg_trace_parse((const char *)data, size, &t, err, sizeof err) != 0) {
        if (!err[0])
            abort();
        return 0;
    }
    for (size_t i = 0; i < t.nops; i++)
        if (t.ops[i].slot >= t.nslots)
            abort();
    vg_trace_free(&t);
    return 0;
}
