// kernels_tma.cu — a kernel that stores through the tensor memory accelerator (compute
// capability 9.0+), as cuBLAS and cuDNN store a matmul's output on Hopper: each block
// fills a tile in shared memory and one thread copies it to global memory with a bulk
// tensor copy (`cp.async.bulk.tensor`), which the Compute Sanitizer API does not report
// as a global store. Compiled to kernels_tma.ptx by regen-ptx.sh (a module of its own: it
// needs sm_90, the other kernels run on sm_75). Its host twin for vgsim is in tma.h.
#include <cuda.h>

// The tile each block stores: 32 floats wide (128 bytes), 8 rows.
#define EX_TMA_BOX_X 32
#define EX_TMA_BOX_Y 8

// Fill the tensor `map` describes (2D floats, rows of EX_TMA_BOX_X-multiples) with v: block
// (x, y) stores the tile at column x * 32, row y * 8.
extern "C" __global__ void ex_tma_store(const __grid_constant__ CUtensorMap map, float v) {
    __shared__ alignas(128) float tile[EX_TMA_BOX_Y][EX_TMA_BOX_X];
    for (int i = threadIdx.x; i < EX_TMA_BOX_X * EX_TMA_BOX_Y; i += blockDim.x)
        tile[i / EX_TMA_BOX_X][i % EX_TMA_BOX_X] = v;
    // The shared-memory writes must be visible to the copy engine's (async) proxy.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        int x = blockIdx.x * EX_TMA_BOX_X, y = blockIdx.y * EX_TMA_BOX_Y;
        unsigned smem = (unsigned)__cvta_generic_to_shared(&tile[0][0]);
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&map), "r"(x), "r"(y), "r"(smem) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); // (tile reusable)
    }
}
