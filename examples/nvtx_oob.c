/* nvtx_oob.c — accesses outside an allocation that lands in mapped memory, for
 * compute-sanitizer over vramguard (docs/compute-sanitizer.md, scripts/gpu-nvtx-check.sh).
 *
 * A 4000-byte tensor (1000 floats) is read or written by a kernel told it has 1004: the
 * last 16 bytes are past its end. Under vramguard they lie inside one of its segments,
 * mapped memory, so the driver and a plain memcheck see nothing wrong there; with NVTX
 * (compute-sanitizer --nvtx yes) memcheck knows the allocation's end. Modes:
 *   read        a kernel sums 1004 floats of it (reads 16 bytes past the end)
 *   write       a kernel fills 1004 floats (writes 16 bytes past the end, as s1_overrun)
 *   read-freed  a kernel sums a tensor the program freed (vramguard keeps it mapped)
 *   clean       the same kernels within bounds: no error
 * On vgsim the kernels run on the host (their twins below) and change nothing else.
 */
#include "common.h"

/* nvcc -ptx -arch=compute_75 of:
 *   extern "C" __global__ void nvtx_oob_sum(const float *x, unsigned long long n, float *out) {
 *       unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
 *       if (i < n) atomicAdd(out, x[i]);
 *   } */
static const char k_sum_ptx[] =
    ".version 9.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry nvtx_oob_sum(\n"
    "  .param .u64 nvtx_oob_sum_param_0,\n"
    "  .param .u64 nvtx_oob_sum_param_1,\n"
    "  .param .u64 nvtx_oob_sum_param_2\n"
    ")\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .f32 %f<3>;\n"
    "  .reg .b32 %r<4>;\n"
    "  .reg .b64 %rd<11>;\n"
    "  ld.param.u64 %rd2, [nvtx_oob_sum_param_0];\n"
    "  ld.param.u64 %rd4, [nvtx_oob_sum_param_1];\n"
    "  ld.param.u64 %rd3, [nvtx_oob_sum_param_2];\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mul.wide.u32 %rd5, %r1, %r2;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  cvt.u64.u32 %rd6, %r3;\n"
    "  add.s64 %rd1, %rd5, %rd6;\n"
    "  setp.ge.u64 %p1, %rd1, %rd4;\n"
    "  @%p1 bra $L__BB0_2;\n"
    "  cvta.to.global.u64 %rd7, %rd2;\n"
    "  shl.b64 %rd8, %rd1, 2;\n"
    "  add.s64 %rd9, %rd7, %rd8;\n"
    "  ld.global.f32 %f1, [%rd9];\n"
    "  cvta.to.global.u64 %rd10, %rd3;\n"
    "  atom.global.add.f32 %f2, [%rd10], %f1;\n"
    "$L__BB0_2:\n"
    "  ret;\n"
    "}\n";

static void sum_host(const ex_launch_t *l) {
    const float *x = *(const float **)l->params[0];
    unsigned long long n = *(unsigned long long *)l->params[1];
    float *out = *(float **)l->params[2];
    for (unsigned long long i = 0; i < n; i++)
        *out += x[i];
}

static CUresult sum(CUfunction f, CUdeviceptr x, unsigned long long n, CUdeviceptr out) {
    void *params[] = {&x, &n, &out};
    return cuLaunchKernel(f, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, params,
                          NULL);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "read";
    bool clean = strcmp(mode, "clean") == 0;
    if (!clean && strcmp(mode, "read") && strcmp(mode, "write") && strcmp(mode, "read-freed")) {
        fprintf(stderr, "usage: nvtx_oob read|write|read-freed|clean\n");
        return 2;
    }
    ex_t e = ex_init();
    int (*reg)(const char *, void (*)(const ex_launch_t *)) =
        (int (*)(const char *, void (*)(const ex_launch_t *)))dlsym(RTLD_DEFAULT,
                                                                   "vgsim_register_kernel");
    if (reg)
        reg("nvtx_oob_sum", sum_host);
    CUmodule mod;
    CUfunction fsum;
    CK(cuModuleLoadData(&mod, k_sum_ptx));
    CK(cuModuleGetFunction(&fsum, mod, "nvtx_oob_sum"));
    const unsigned long long n = 1000, past = clean ? 0 : 4; /* 4000 bytes, 16 past */
    CUdeviceptr t, other, out;
    CK(cuMemAlloc(&t, n * sizeof(float)));
    CK(cuMemAlloc(&other, n * sizeof(float))); /* (a neighbour: vramguard packs them) */
    CK(cuMemAlloc(&out, sizeof(float)));
    CK(cuMemsetD32(t, 0, n));
    CK(cuMemsetD32(other, 0, n));
    CK(cuMemsetD32(out, 0, 1));
    if (strcmp(mode, "write") == 0 || clean)
        CK(ex_fill(&e, t, 1.0f, n + past, NULL));
    if (strcmp(mode, "read") == 0 || clean)
        CK(sum(fsum, t, n + past, out));
    if (strcmp(mode, "read-freed") == 0) {
        CK(cuMemFree(t));
        CK(sum(fsum, t, n, out)); /* the bug: t was freed */
    }
    CK(cuCtxSynchronize());
    float s = 0;
    CK(cuMemcpyDtoH(&s, out, sizeof s));
    if (strcmp(mode, "read-freed") != 0)
        CK(cuMemFree(t));
    CK(cuMemFree(other));
    CK(cuMemFree(out));
    CK(cuModuleUnload(mod));
    printf("nvtx_oob %s: done (sum %g)\n", mode, s);
    return 0;
}
