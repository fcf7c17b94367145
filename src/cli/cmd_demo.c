/* cmd_demo.c — `vramguard demo [--sim]`: the bug scenarios S1, S2, S5, S8 and S9 planted
 * one after another in guard mode, on the GPU when there is one, else on vgsim. Each
 * scenario shows vramguard's report and checks that it names the right allocation, size
 * and offset; the demo exits 0 only if every scenario was caught as expected. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/init.h"
#include "../driver/driver.h"
#include "cli.h"
#include "demo.h"
#include "vramguard.h"

/* Does the real driver load and see a device? (Probed in a private handle.) */
static bool real_gpu_present(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0;
    bool ok = init && count && init(0) == CUDA_SUCCESS && count(&n) == CUDA_SUCCESS && n > 0;
    dlclose(h);
    return ok;
}

static void rule(const char *id, const char *title) {
    printf("\n== %s: %s ", id, title);
    for (int i = (int)(strlen(id) + strlen(title)); i < 72; i++)
        putchar('=');
    putchar('\n');
}

int cmd_demo(int argc, char **argv) {
    cli_args_t a;
    int exit_code;
    if (!cli_parse(argc, argv, cli_verb("demo"), &a, &exit_code))
        return exit_code;
    if (cli_positional(&a, 0)) {
        cli_error("demo takes no arguments (see 'vramguard help')");
        return CLI_USAGE;
    }
    bool force_sim = false;
    cli_flag(&a, "sim", &force_sim);
    char driver[PATH_MAX + 16] = "libcuda.so.1", dir[PATH_MAX];
    bool sim = force_sim || !real_gpu_present();
    if (sim) {
        if (!cli_find_vgsim_dir(dir, sizeof dir)) {
            cli_error("cannot find vgsim (libcuda.so.1) next to the vramguard executable");
            return CLI_USAGE;
        }
        snprintf(driver, sizeof driver, "%s/libcuda.so.1", dir);
    }
    /* Guard mode; no leak report at exit (S9 leaves its tensors on a dead context); frees
     * judged by their order (G7: the demo notes its launches, and only S2 uses a second
     * stream). The user's flags come last and win. */
    char opts[sizeof driver + sizeof a.options + 80];
    snprintf(opts, sizeof opts, "driver=%s,mode=guard,leaks=off,free_order=on%s%s", driver,
             a.options[0] ? "," : "", a.options);
    if (vg__init_from_cli(opts) != VG_OK) {
        cli_error("%s", vg_last_error());
        return CLI_USAGE;
    }
    CUdevice dev;
    CUcontext ctx;
    char name[128];
    size_t total;
    demo_t d = {0};
    if (vg__cuDeviceGet(&dev, 0) || vg__cuDeviceGetName(name, sizeof name, dev) ||
        vg__cuDeviceTotalMem(&total, dev) || vg__cuDevicePrimaryCtxRetain(&ctx, dev) ||
        vg__cuCtxSetCurrent(ctx) || vg__cuStreamCreate(&d.main, CU_STREAM_NON_BLOCKING) ||
        vg__cuStreamCreate(&d.side, CU_STREAM_NON_BLOCKING)) {
        cli_error("the device did not answer");
        return CLI_FAILED;
    }
    CUresult r = demo_kernels_load(&d);
    if (r != CUDA_SUCCESS) {
        cli_error("cannot load the demo's kernels: %s", vg__cu_error_name(r));
        return CLI_FAILED;
    }
    printf("vramguard demo: %d bug scenarios in guard mode on %s (%.0f GiB%s)\n",
           demo_nscenarios, name, (double)total / (1u << 30),
           sim ? ", vgsim: the CUDA driver API run on the CPU" : "");
    printf("Each plants a bug, shows vramguard's report, and checks that the report names\n"
           "the right allocation, size and offset.\n");
    int caught = 0;
    char failed[256] = "";
    for (int i = 0; i < demo_nscenarios; i++) {
        const demo_scenario_t *s = &demo_scenarios[i];
        rule(s->id, s->title);
        printf("planted: %s\n\n", s->planted);
        fflush(stdout); /* the report follows on standard error */
        char why[512] = "";
        bool ok = s->run(&d, why, sizeof why);
        fflush(stderr);
        if (ok) {
            caught++;
            printf("-> %s caught: %s\n", s->id, s->checked);
        } else {
            printf("-> %s NOT caught as expected: %s\n", s->id, why);
            size_t l = strlen(failed);
            snprintf(failed + l, sizeof failed - l, "%s%s", l ? ", " : "", s->id);
        }
        fflush(stdout);
    }
    printf("\n%d of %d scenarios caught as expected%s%s%s\n", caught, demo_nscenarios,
           failed[0] ? " (missed: " : "", failed, failed[0] ? ")" : "");
    fflush(stdout);
    return caught == demo_nscenarios ? CLI_OK : CLI_FAILED;
}
