/* runtime_user.c — the five lines a CUDA runtime user writes first: cudaMalloc,
 * cudaMemset, cudaMemcpy, cudaFree. Correct on a GPU; on vgsim it cannot run (vgsim is
 * the driver API only), and must say so and exit non-zero rather than end in a clean
 * summary (tests/cli runtime_program_on_vgsim). Built when the toolkit's runtime is
 * installed: statically linked, as nvcc does by default, and against libcudart.so. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define CK(call)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                     \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

int main(void) {
    unsigned char host[4000];
    void *d;
    printf("runtime_user: starting\n");
    CK(cudaMalloc(&d, sizeof host));
    CK(cudaMemset(d, 7, sizeof host));
    CK(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    printf("runtime_user: %s\n", host[0] == 7 && host[3999] == 7 ? "ok" : "wrong bytes");
    return 0;
}
