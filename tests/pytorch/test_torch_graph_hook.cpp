// test_torch_graph_hook.cpp — PyTorch's CUDA graph hooks, called exactly as PyTorch's
// CUDAPluggableAllocator calls the functions given to set_begin_allocate_to_pool,
// set_end_allocate_to_pool_fn and set_release_pool: through std::function objects made
// from the raw pointers, the pool id as a std::pair, the capture's filter by value (a
// temporary, gone when begin returns: vramguard keeps a copy; ASan runs this test too).
// On vgsim, which captures work as a GPU does (docs/decisions.md A7):
//  - the capture succeeds although vramguard maps new pages during it (global mode);
//  - requests on the captured stream go to the pool, others do not;
//  - the pool's memory, freed by the capture, is not given to a later tensor;
//  - released, the pool's memory serves everyone again;
//  - the same with libvramguard.so's C begin, which routes any capturing stream's requests.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), exit(1))

struct CUstream_st;
using cudaStream_t = CUstream_st *;
using MempoolId = std::pair<unsigned long long, unsigned long long>; // c10's MempoolId_t
using Filter = std::function<bool(cudaStream_t)>;
using BeginFn = void(int, MempoolId, Filter);
using EndFn = void(int, MempoolId);
using AllocFn = void *(size_t, int, void *);
using FreeFn = void(void *, size_t, int, void *);

template <typename T> static T *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p)
        FAIL("%s is not exported", name);
    return reinterpret_cast<T *>(p);
}

int main() {
    setenv("VRAMGUARD_OPTIONS", "driver=" VG_TEST_VGSIM_LIB, 1);
    void *lib = dlopen(VG_TEST_LIB, RTLD_NOW | RTLD_LOCAL);
    void *cu = dlopen(VG_TEST_VGSIM_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib || !cu)
        FAIL("dlopen: %s", dlerror());
    std::function<BeginFn> begin = sym<BeginFn>(lib, "vg_torch_begin_allocate_to_pool_filtered");
    std::function<EndFn> end = sym<EndFn>(lib, "vg_torch_end_allocate_to_pool");
    std::function<EndFn> release = sym<EndFn>(lib, "vg_torch_release_pool");
    AllocFn *alloc = sym<AllocFn>(lib, "vg_torch_alloc_or_raise");
    FreeFn *free_ = sym<FreeFn>(lib, "vg_torch_free");
    auto stream_create = sym<int(cudaStream_t *, unsigned)>(cu, "cuStreamCreate");
    auto capture_begin = sym<int(cudaStream_t, int)>(cu, "cuStreamBeginCapture_v2");
    auto capture_end = sym<int(cudaStream_t, void **)>(cu, "cuStreamEndCapture");
    auto memset_async = sym<int(unsigned long long, unsigned, size_t, cudaStream_t)>(
        cu, "cuMemsetD32Async");
    auto graph_destroy = sym<int(void *)>(cu, "cuGraphDestroy");

    const size_t MiB = 1 << 20;
    void *warm = alloc(MiB, 0, nullptr); // (initialises vramguard and the driver)
    void *ctx = nullptr; // the device's primary context, current (as PyTorch's runtime does)
    if (sym<int(void **, int)>(cu, "cuDevicePrimaryCtxRetain")(&ctx, 0) ||
        sym<int(void *)>(cu, "cuCtxSetCurrent")(ctx))
        FAIL("no context");
    cudaStream_t cap, other;
    if (stream_create(&cap, 1) || stream_create(&other, 1))
        FAIL("cuStreamCreate");
    auto calls = std::make_shared<int>(0);
    std::string big(4096, 'x'); // the filter then owns heap memory (its copy must too)
    begin(0, MempoolId{0, 5}, [cap, calls, big](cudaStream_t s) {
        ++*calls;
        return s == cap && big.size() == 4096;
    });
    if (capture_begin(cap, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */))
        FAIL("cuStreamBeginCapture");
    void *in_graph = alloc(64 * MiB, 0, cap); // new pages, during a global-mode capture
    void *outside = alloc(MiB, 0, other);
    if (memset_async((unsigned long long)(uintptr_t)in_graph, 7, 64 * MiB / 4, cap))
        FAIL("cuMemsetD32Async during the capture");
    free_(in_graph, 64 * MiB, 0, cap); // (a temporary of the captured step)
    void *graph = nullptr;
    int r = capture_end(cap, &graph);
    if (r != 0 || !graph)
        FAIL("the capture failed under vramguard: cuStreamEndCapture returned %d", r);
    end(0, MempoolId{0, 5});
    graph_destroy(graph);
    if (*calls < 2)
        FAIL("the filter was called %d times", *calls);
    void *later = alloc(64 * MiB, 0, cap);
    if (later == in_graph)
        FAIL("the graph's memory was given to a tensor allocated after the capture");
    free_(outside, MiB, 0, other);
    void *again = alloc(MiB, 0, other);
    if (again != outside)
        FAIL("a request on another stream during the capture went to the graph's pool");
    release(0, MempoolId{0, 5}); // (PyTorch: the graph is reset)
    free_(later, 64 * MiB, 0, cap);
    void *reused = alloc(64 * MiB, 0, cap);
    void *reused2 = alloc(64 * MiB, 0, cap);
    if (reused != in_graph && reused2 != in_graph)
        FAIL("the released pool's memory was not reused");
    // Without libvramguard_torch.so, the package gives PyTorch libvramguard.so's C begin,
    // which cannot keep the std::function: it routes the requests made on any stream
    // being captured (called exactly the same way).
    std::function<BeginFn> begin_c = sym<BeginFn>(lib, "vg_torch_begin_allocate_to_pool");
    begin_c(0, MempoolId{0, 6}, [](cudaStream_t) { return true; });
    if (capture_begin(cap, 0))
        FAIL("cuStreamBeginCapture (2)");
    void *in_graph2 = alloc(MiB, 0, cap);
    void *outside2 = alloc(MiB, 0, other);
    free_(in_graph2, MiB, 0, cap);
    if (capture_end(cap, &graph) != 0)
        FAIL("the second capture failed under vramguard");
    end(0, MempoolId{0, 6});
    graph_destroy(graph);
    free_(outside2, MiB, 0, other);
    // (Asked on the freeing stream first: a request on `cap` could take that block once
    // the allocator has seen `other` complete, which depends on timing.)
    void *again2 = alloc(MiB, 0, other);
    if (again2 != outside2)
        FAIL("C begin: a request on a stream not captured went to the graph's pool");
    void *after2 = alloc(MiB, 0, cap);
    if (after2 == in_graph2)
        FAIL("C begin: the graph's memory was given to a later tensor");
    release(0, MempoolId{0, 6});
    free_(after2, 0, 0, nullptr);
    free_(again2, 0, 0, nullptr);
    int (*validate)(void) = sym<int()>(lib, "vg_validate");
    if (validate() != 0)
        FAIL("vg_validate failed");
    for (void *p : {again, reused, reused2, warm})
        free_(p, 0, 0, nullptr);
    puts("PASS torch_graph_hook");
    return 0;
}
