/* vgsim.h — vgsim's own additions to the driver API, for test and example programs.
 *
 * vgsim is a CPU implementation of the CUDA driver API (see docs/vgsim.md). A "kernel" on
 * vgsim is a host function registered under the kernel's name; cuModuleLoadData() accepts
 * PTX text, and every `.entry NAME(...)` in it whose NAME is registered becomes a function
 * that cuLaunchKernel() runs in stream order on the stream's worker thread. A kernel that
 * touches device memory that is not mapped (or mapped without access) kills the context
 * with a sticky CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU.
 *
 * Programs should look these functions up with dlsym(RTLD_DEFAULT, "vgsim_...") so that
 * the same binary also runs on a real driver (where the lookup returns NULL).
 *
 * Settings (environment, read at cuInit):
 *   VGSIM_MEMORY=80G   device memory per device (K/M/G/T suffixes)
 *   VGSIM_DEVICES=1    number of devices
 *   VGSIM_VMM=1        0 makes the device report no virtual memory management support
 *   VGSIM_SKIP_GUARD_KERNELS=0  1 makes guard mode's kernels do nothing (benchmarks only:
 *                      it separates guard mode's host cost from the simulated device's
 *                      work, which runs on the same CPUs; every check then passes)
 */
#ifndef VGSIM_H
#define VGSIM_H

#ifdef __cplusplus
extern "C" {
#endif

#define VGSIM_MAX_PARAMS 32

typedef struct vgsim_launch {
    unsigned int grid[3];   /* gridDimX/Y/Z */
    unsigned int block[3];  /* blockDimX/Y/Z */
    unsigned int shared_mem;
    int nparams;            /* parameters declared by the .entry */
    void *params[VGSIM_MAX_PARAMS]; /* params[i] points to a copy of argument i */
} vgsim_launch_t;

/* A host implementation of a kernel: runs once per launch, and loops over the logical
 * grid itself if it needs to. */
typedef void (*vgsim_kernel_fn)(const vgsim_launch_t *launch);

/* Register (or replace) the host implementation of kernel `name`. Returns 0, or -1 when
 * the name is too long or the registry is full. Thread safe. */
int vgsim_register_kernel(const char *name, vgsim_kernel_fn fn);

/* vgsim's version; its presence tells a program (or vramguard) that it runs on vgsim. */
const char *vgsim_version(void);

/* The devices granted access (cuMemSetAccess) to the VMM mapping at address p: bit d for
 * device d. 0 if p is not mapped through the VMM calls. For tests. */
unsigned vgsim_access_devices(unsigned long long p);

/* The Compute Sanitizer API's stand-in (vgsim/sanitizer.c; vramguard's memcheck mode
 * patches modules through it). A kernel's host twin reports each global-memory access it
 * makes, before making it, as a GPU's patched kernel calls the device callback:
 * flags 1 read, 2 write, 4 atomic (Sanitizer_DeviceMemoryFlags). Nothing happens unless
 * the kernel's module was patched. vgsim_thread names the thread block and thread (x) the
 * twin is playing, for the reports; both are 0 at the start of each launch. */
void vgsim_access(const volatile void *p, unsigned size, unsigned flags);
void vgsim_thread(unsigned block, unsigned thread);

/* A tensor map vgsim encoded (cuTensorMapEncode*), decoded for a kernel's host twin that
 * plays the tensor memory accelerator: 0, or -1 if `map` is not one. A twin's bulk copies
 * report no access (vgsim_access), as on a GPU the Compute Sanitizer API sees none. */
typedef struct vgsim_tensor_map {
    void *address;
    int rank, data_type;
    unsigned elem_bytes;              /* 0: a packed 4- or 6-bit type */
    unsigned long long dims[5];       /* elements */
    unsigned long long strides[4];    /* bytes, of dimensions 1 to rank - 1 */
    unsigned box[5];                  /* tiled: the box; im2col: channels, pixels */
} vgsim_tensor_map_t;
int vgsim_tensor_map(const void *map, vgsim_tensor_map_t *out);
typedef int (*vgsim_tensor_map_fn)(const void *map, vgsim_tensor_map_t *out);
typedef void (*vgsim_access_fn)(const volatile void *p, unsigned size, unsigned flags);
typedef void (*vgsim_thread_fn)(unsigned block, unsigned thread);
typedef const char *(*vgsim_version_fn)(void);
typedef int (*vgsim_register_kernel_fn)(const char *name, vgsim_kernel_fn fn);

#ifdef __cplusplus
}
#endif
#endif /* VGSIM_H */
