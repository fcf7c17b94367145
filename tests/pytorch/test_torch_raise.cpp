// test_torch_raise.cpp — libvramguard_torch.so's entry point, called as PyTorch's
// pluggable allocator calls it (dlopen + dlsym), on vgsim: an allocation vramguard cannot
// serve throws std::runtime_error with the explanation instead of returning NULL, and a
// good one returns memory that frees normally.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>

typedef void *(*alloc_fn)(size_t, int, void *);
typedef void (*free_fn)(void *, size_t, int, void *);

#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), exit(1))

int main() {
    setenv("VRAMGUARD_OPTIONS", "driver=" VG_TEST_VGSIM_LIB ",limit=64M", 1);
    void *lib = dlopen(VG_TEST_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        FAIL("dlopen: %s", dlerror());
    alloc_fn alloc = (alloc_fn)dlsym(lib, "vg_torch_alloc_or_raise");
    free_fn release = (free_fn)dlsym(lib, "vg_torch_free"); // (from libvramguard.so)
    if (!alloc || !release)
        FAIL("entry points missing");
    void *p = alloc(1 << 20, 0, NULL);
    if (!p)
        FAIL("a 1 MiB allocation returned NULL");
    try {
        alloc(size_t(1) << 30, 0, NULL); // over the 64M limit
        FAIL("a 1 GiB allocation over a 64M limit did not throw");
    } catch (const std::runtime_error &e) {
        std::string what = e.what();
        if (what.find("out of memory") == std::string::npos ||
            what.find("limit") == std::string::npos)
            FAIL("the exception does not explain: %s", e.what());
        printf("threw: %.120s...\n", e.what());
    }
    release(p, 1 << 20, 0, NULL);
    puts("PASS torch_raise");
    return 0;
}
