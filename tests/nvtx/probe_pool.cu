// probe_pool.cu — what compute-sanitizer makes of an NVTX pool, by the kind of memory
// under it (docs/decisions.md G12). Built and run by scripts/gpu-nvtx-check.sh where nvcc
// and a GPU are (not by CMake: it needs the toolkit and the runtime). A 4000-byte region
// at offset 512 of a 2 MiB pool; a kernel reads 1004 floats of it (16 bytes past its end)
// or 1000 (in bounds). The pool's memory:
//   alloc   cuMemAlloc
//   managed cuMemAllocManaged
//   vmm     a 64 MiB reservation, one 2 MiB page mapped; the pool is the whole
//           reservation, registered before the page is mapped (as vramguard's VMM heaps
//           would be)
//   page    the same, the pool being the mapped page alone, registered after mapping
// Usage: probe_pool alloc|managed|vmm|page oob|in [NAME_LENGTH]; compute-sanitizer
// --tool memcheck --nvtx yes --leak-check full shows whether the pool was taken, whether
// the read was found, and the region's name in the leak report (NAME_LENGTH characters,
// default 40: compute-sanitizer 2025.3 refused 50).
#include <cuda.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void probe_sum(const float *x, int n, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(out, x[i]);
}

static CUdeviceptr map_page(CUdeviceptr va, size_t page) {
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    cuMemCreate(&h, page, &p, 0);
    cuMemMap(va, page, 0, h, 0);
    CUmemAccessDesc a = {};
    a.location = p.location;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    cuMemSetAccess(va, page, &a, 1);
    return va;
}

static nvtxMemHeapHandle_t pool(nvtxDomainHandle_t d, CUdeviceptr base, size_t size) {
    nvtxMemVirtualRangeDesc_t r = {size, (void *)base};
    nvtxMemHeapDesc_t h = {};
    h.extCompatID = NVTX_EXT_COMPATID_MEM;
    h.structSize = sizeof h;
    h.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    h.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    h.typeSpecificDescSize = sizeof r;
    h.typeSpecificDesc = &r;
    h.messageType = NVTX_MESSAGE_TYPE_ASCII;
    h.message.ascii = "probe pool";
    return nvtxMemHeapRegister(d, &h);
}

static void region(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap, void *p, size_t size,
                   const char *name) {
    nvtxMemVirtualRangeDesc_t r = {size, p};
    nvtxMemRegionsRegisterBatch_t b = {};
    b.extCompatID = NVTX_EXT_COMPATID_MEM;
    b.structSize = sizeof b;
    b.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    b.heap = heap;
    b.regionCount = 1;
    b.regionDescElementSize = sizeof r;
    b.regionDescElements = &r;
    nvtxMemRegionsRegister(d, &b);
    nvtxMemRegionNameDesc_t n = {};
    n.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    n.nameType = NVTX_MESSAGE_TYPE_ASCII;
    n.region.pointer = p;
    n.name.ascii = name;
    nvtxMemRegionsNameBatch_t nb = {};
    nb.extCompatID = NVTX_EXT_COMPATID_MEM;
    nb.structSize = sizeof nb;
    nb.regionCount = 1;
    nb.regionElementSize = sizeof n;
    nb.regionElements = &n;
    nvtxMemRegionsName(d, &nb);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: probe_pool alloc|managed|vmm|page oob|in [NAME_LENGTH]\n");
        return 2;
    }
    const char *kind = argv[1];
    bool oob = strcmp(argv[2], "oob") == 0;
    size_t name_len = argc > 3 ? (size_t)atoi(argv[3]) : 40;
    cudaFree(0); // (compute-sanitizer wants CUDA initialised before NVTX calls)
    const size_t page = 2u << 20, reserve = 64u << 20;
    nvtxDomainHandle_t d = nvtxDomainCreateA("probe");
    nvtxMemHeapHandle_t heap = nullptr;
    CUdeviceptr base = 0;
    if (strcmp(kind, "alloc") == 0) {
        cuMemAlloc(&base, page);
        heap = pool(d, base, page);
    } else if (strcmp(kind, "managed") == 0) {
        cuMemAllocManaged(&base, page, CU_MEM_ATTACH_GLOBAL);
        heap = pool(d, base, page);
    } else if (strcmp(kind, "vmm") == 0) {
        cuMemAddressReserve(&base, reserve, page, 0, 0);
        heap = pool(d, base, reserve);
        map_page(base, page);
    } else {
        cuMemAddressReserve(&base, reserve, page, 0, 0);
        heap = pool(d, map_page(base, page), page);
    }
    printf("probe %s: pool %s\n", kind, heap ? "taken" : "refused");
    char name[256];
    memset(name, 'n', sizeof name);
    snprintf(name, sizeof name, "probe region, 4000 bytes, ");
    name[strlen(name)] = 'n';
    name[name_len < sizeof name ? name_len : sizeof name - 1] = 0;
    float *x = (float *)(base + 512), *out;
    region(d, heap, x, 4000, name);
    cudaMalloc(&out, sizeof *out);
    cudaMemset(out, 0, sizeof *out);
    probe_sum<<<4, 256>>>(x, oob ? 1004 : 1000, out);
    printf("probe %s %s: done (%d)\n", kind, argv[2], (int)cudaDeviceSynchronize());
    return 0; // (the region is left live: --leak-check full shows its name)
}
