// test_torch_graph_hook.cpp — vg_torch_begin_allocate_to_pool called exactly as PyTorch's
// CUDAPluggableAllocator calls the function given to set_begin_allocate_to_pool: through
// a std::function<void(int, MempoolId_t, std::function<bool(cudaStream_t)>)> made from
// the raw pointer, the filter passed by value. vramguard has no graph pools yet: the
// call must be safe under that ABI (ASan runs this test too) and warn once, in the log.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>

#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), exit(1))

using MempoolId = std::pair<unsigned long long, unsigned long long>; // c10's MempoolId_t
using Filter = std::function<bool(void *)>;                          // (cudaStream_t)
using BeginFn = void(int, MempoolId, Filter);

int main() {
    char log[] = "/tmp/vg-graph-hook-XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0)
        FAIL("mkstemp");
    close(fd);
    std::string options = std::string("driver=") + VG_TEST_VGSIM_LIB + ",log=" + log;
    setenv("VRAMGUARD_OPTIONS", options.c_str(), 1);
    void *lib = dlopen(VG_TEST_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        FAIL("dlopen: %s", dlerror());
    void *sym = dlsym(lib, "vg_torch_begin_allocate_to_pool");
    if (!sym)
        FAIL("vg_torch_begin_allocate_to_pool is not exported");
    std::function<BeginFn> begin = reinterpret_cast<BeginFn *>(sym); // (as PyTorch does)
    int filter_calls = 0;
    std::string big(4096, 'x'); // a capture large enough that the function object owns heap memory
    for (unsigned long long id = 1; id <= 3; id++)
        begin(0, MempoolId{id, 7}, [&filter_calls, big](void *) { return ++filter_calls > 0; });
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    unlink(log);
    std::string s = text.str();
    size_t at = s.find("a CUDA graph is being captured on device 0");
    if (at == std::string::npos)
        FAIL("no warning in the log: '%s'", s.c_str());
    if (s.find("a CUDA graph is being captured", at + 1) != std::string::npos)
        FAIL("warned more than once: '%s'", s.c_str());
    puts("PASS torch_graph_hook");
    return 0;
}
