/* cmd_demo.c — `vramguard demo`: a short end-to-end run on vgsim (or the GPU). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/init.h"
#include "../driver/driver.h"
#include "cli.h"

static const char *const demo_flags[] = {NULL};

int cmd_demo(int argc, char **argv) {
    cli_args_t a;
    if (!cli_parse(argc, argv, demo_flags, &a))
        return CLI_USAGE;
    bool force_sim = false;
    cli_flag(&a, "sim", &force_sim);
    char opts[PATH_MAX + sizeof a.options + 64], dir[PATH_MAX];
    if (!cli_find_vgsim_dir(dir, sizeof dir)) {
        cli_error("cannot find vgsim (libcuda.so.1) next to the vramguard executable");
        return CLI_USAGE;
    }
    snprintf(opts, sizeof opts, "driver=%s/libcuda.so.1%s%s", dir, a.options[0] ? "," : "",
             a.options);
    if (vg__init_from_cli(opts) != VG_OK) {
        cli_error("%s", vg_last_error());
        return CLI_USAGE;
    }
    CUdevice dev;
    CUcontext ctx;
    char name[128];
    size_t total;
    if (vg__cuDeviceGet(&dev, 0) || vg__cuDeviceGetName(name, sizeof name, dev) ||
        vg__cuDeviceTotalMem(&total, dev) || vg__cuDevicePrimaryCtxRetain(&ctx, dev) ||
        vg__cuCtxSetCurrent(ctx)) {
        cli_error("the device did not answer");
        return CLI_FAILED;
    }
    printf("vramguard demo on %s (%.1f GiB)\n", name, (double)total / (1u << 30));
    CUdeviceptr d;
    unsigned in[256], out[256];
    for (unsigned i = 0; i < 256; i++)
        in[i] = i * 7;
    if (vg__cuMemAlloc(&d, sizeof in) || vg__cuMemcpyHtoD(d, in, sizeof in) ||
        vg__cuMemcpyDtoH(out, d, sizeof out) || vg__cuMemFree(d) ||
        memcmp(in, out, sizeof in) != 0) {
        cli_error("a round trip through device memory failed");
        return CLI_FAILED;
    }
    printf("device memory round trip: ok\n");
    return CLI_OK;
}
