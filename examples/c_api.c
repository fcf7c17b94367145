/* c_api.c — vramguard's C API in a whole program (the README's "Using it from C"): a
 * stream-ordered allocation, a kernel told to vramguard, a check, and PyTorch's summary
 * table. Without an argument the program is correct; with "overrun" its kernel writes
 * 16 floats past the allocation, and guard mode's check names the allocation, its line and
 * the kernel. Run it on vgsim: LD_LIBRARY_PATH=build/vgsim build/examples/c_api [overrun]
 * (tests/cli c_api_example), or on a GPU as it is.
 */
#include <string.h>

#include <vramguard.h>

#include "common.h"

int main(int argc, char **argv) {
    int overrun = argc > 1 && strcmp(argv[1], "overrun") == 0;
    ex_t e = ex_init(); /* a context, and the examples' kernels (ex_fill) */
    CUstream stream;
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    if (vg_init("mode=guard") != VG_OK) { /* or VRAMGUARD_OPTIONS, or nothing */
        fprintf(stderr, "vg_init: %s\n", vg_last_error());
        return 1;
    }
    const unsigned long long n = 1000;
    void *p;
    if (vg_malloc(&p, n * sizeof(float), stream) != VG_OK) { /* like cudaMallocAsync */
        fprintf(stderr, "vg_malloc: %s\n", vg_last_error());
        return 1;
    }
    CK(ex_fill(&e, (CUdeviceptr)(uintptr_t)p, 1.0f, overrun ? n + 16 : n, stream));
    const void *args[] = {p}; /* reports name the kernels an allocation was given to */
    vg_kernel_launched_args("ex_fill", stream, args, 1);
    vg_free(p, stream);
    vg_check(); /* every allocation checked now (guard mode), its findings reported */
    unsigned long long errors = (unsigned long long)vg_error_count();
    char *table = vg_memory_summary(0); /* PyTorch's memory_summary() layout */
    char *title = strchr(table, '\n') + 1; /* (its first lines: the title) */
    printf("%.*s", (int)(strchr(strchr(title, '\n') + 1, '\n') - table + 1), table);
    vg_free_string(table);
    printf("c_api: %llu error%s found\n", errors, errors == 1 ? "" : "s");
    CK(cuStreamDestroy(stream));
    return errors ? 1 : 0;
}
