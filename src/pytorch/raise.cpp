// raise.cpp — libvramguard_torch.so: the allocation entry point PyTorch is given. (Its
// free is libvramguard.so's vg_torch_free: dlsym on this library's handle finds it in
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
#include <stdexcept>
#include <string>

extern "C" {
void *vg_torch_alloc(size_t size, int device, void *stream);
size_t vg_torch_last_oom(char *out, size_t n);

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
