/* demo.h — `vramguard demo`: the bug scenarios S1, S2, S5, S8, S9 planted and caught. */
#ifndef VG_CLI_DEMO_H
#define VG_CLI_DEMO_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include "../driver/cuda_abi.h"

typedef struct demo {
    CUmodule module;
    CUfunction iota, fill, scatter;
    CUstream main, side; /* two streams of the program */
} demo_t;

/* Load kernels/demo.ptx (and, on vgsim, register the host versions of its kernels). */
CUresult demo_kernels_load(demo_t *d);

/* One scenario: plants its bug, then checks vramguard's report. Returns true when the
 * report named the right allocation, size and offset (and kernel, where there is one);
 * otherwise writes why not. */
typedef struct demo_scenario {
    const char *id;      /* "S1" */
    const char *title;   /* what goes wrong, in a user's words */
    const char *planted; /* what the scenario does */
    const char *checked; /* what run() checked the report says, printed when it does */
    bool (*run)(demo_t *d, char *why, size_t n);
} demo_scenario_t;

extern const demo_scenario_t demo_scenarios[];
extern const int demo_nscenarios;

#endif /* VG_CLI_DEMO_H */
