// raise.cpp — libvramguard_torch.so: the entry points PyTorch is given where C++ is
// needed. (The others are libvramguard.so's: dlsym on this library's handle finds them in
// the library it depends on.)
//
// PyTorch's CUDAPluggableAllocator does not check what its alloc function returns: a NULL
// becomes a tensor with no memory behind it, and the program goes on (seen with PyTorch
// 2.11 on an H100, docs/gpu-validation.md). PyTorch turns a C++ exception thrown from
// the allocator into a Python RuntimeError, as its own allocator's out-of-memory error is,
// so this entry point throws one carrying vramguard's explanation; the Python package
// raises it again as torch.cuda.OutOfMemoryError. It is C++ and in its own library so
// that libvramguard.so stays C for programs that never load PyTorch.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

struct CUstream_st;
using cudaStream_t = CUstream_st *;
using Filter = std::function<bool(cudaStream_t)>; // PyTorch's capture filter
using PoolId = std::pair<unsigned long long, unsigned long long>; // c10::cuda::MempoolId_t

extern "C" {
void *vg_torch_alloc(size_t size, int device, void *stream);
size_t vg_torch_last_oom(char *out, size_t n);
void vg_torch_pool_begin(int device, uint64_t pool_a, uint64_t pool_b,
                         int (*filter)(void *stream, void *arg), void *arg,
                         void (*drop)(void *arg));

__attribute__((visibility("default"))) void *vg_torch_alloc_or_raise(size_t size, int device,
                                                                      void *stream) {
    void *p = vg_torch_alloc(size, device, stream);
    if (!p) {
        char why[4096];
        vg_torch_last_oom(why, sizeof why);
        throw std::runtime_error(std::string("CUDA out of memory (vramguard): ") + why);
    }
    return p;
}
}

// CUDA graph capture begins (set_begin_allocate_to_pool): PyTorch's filter says which
// streams' requests belong to the graph (those of its capture). It is kept, as a copy,
// until the capture ends; an exception thrown by it counts as "not this graph's".
static int call_filter(void *stream, void *arg) {
    try {
        return (*static_cast<Filter *>(arg))(static_cast<cudaStream_t>(stream)) ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

static void drop_filter(void *arg) { delete static_cast<Filter *>(arg); }

extern "C" __attribute__((visibility("default"))) void
vg_torch_begin_allocate_to_pool_filtered(int device, PoolId pool, Filter filter) {
    Filter *kept = filter ? new (std::nothrow) Filter(std::move(filter)) : nullptr;
    vg_torch_pool_begin(device, pool.first, pool.second, kept ? call_filter : nullptr, kept,
                        kept ? drop_filter : nullptr);
}
