/* vramguard.h — the public C API of vramguard, a GPU memory allocator and watchdog.
 *
 * This is the only public header. Every public symbol starts with vg_. All functions are
 * thread safe and return a vg_status_t (VG_OK on success) unless stated otherwise; on an
 * error, vg_last_error() holds a full explanation for the calling thread.
 *
 *   #include <vramguard.h>
 *
 *   vg_init("mode=guard,limit=15G");      // optional: any call initialises from the env
 *   void *p;
 *   if (vg_malloc(&p, 4000, stream) != VG_OK)
 *       fprintf(stderr, "%s\n", vg_last_error());   // e.g. the OOM explanation
 *   ...
 *   vg_free(p, stream);
 */
#ifndef VRAMGUARD_H
#define VRAMGUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VG_API __attribute__((visibility("default")))
#else
#define VG_API
#endif

#define VG_VERSION_MAJOR 0
#define VG_VERSION_MINOR 1
#define VG_VERSION_PATCH 0
#define VG_VERSION_STRING "0.1.0"

/* =========================================================================================
 * Status codes
 * =======================================================================================*/

/* X(name, value, message). Driver errors are VG_ERR_CUDA_BASE + the driver's CUresult;
 * vg_strerror() gives their CUDA_ERROR_... name. */
#define VG_STATUS_LIST(X)                                                                   \
    X(VG_OK, 0, "success")                                                                  \
    X(VG_ERR_INVALID_ARGUMENT, 1, "invalid argument")                                       \
    X(VG_ERR_OUT_OF_MEMORY, 2, "out of device memory")                                      \
    X(VG_ERR_NO_DRIVER, 3, "no CUDA driver could be loaded")                                \
    X(VG_ERR_INVALID_OPTION, 4, "invalid option")                                           \
    X(VG_ERR_NOT_SUPPORTED, 5, "not supported by this driver or device")                    \
    X(VG_ERR_DOUBLE_FREE, 10, "double free")                                                \
    X(VG_ERR_INVALID_FREE, 11, "free of a pointer that vramguard never allocated")          \
    X(VG_ERR_INTERIOR_FREE, 12, "free of a pointer inside an allocation")                   \
    X(VG_ERR_WRONG_DEVICE, 13, "free on a different device than the allocation's")          \
    X(VG_ERR_MEMORY_ERRORS, 20, "memory errors were found")                                 \
    X(VG_ERR_IO, 30, "input/output error")                                                  \
    X(VG_ERR_PARSE, 31, "malformed input")                                                  \
    X(VG_ERR_INTERNAL, 99, "internal error")

typedef enum vg_status {
#define VG_X(name, value, msg) name = value,
    VG_STATUS_LIST(VG_X)
#undef VG_X
    VG_ERR_CUDA_BASE = 1000
} vg_status_t;

/* A short, static description of a status: "out of device memory", or for driver
 * errors "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
 * Never NULL. */
VG_API const char *vg_strerror(vg_status_t status);

/* The full explanation of the last error on the calling thread (for an OOM: the request,
 * the device's memory, the largest free block, the top holders). "" when there is none.
 * The string stays valid until the thread's next vramguard call. */
VG_API const char *vg_last_error(void);

/* =========================================================================================
 * Initialisation and options
 * =======================================================================================*/

/* Initialise vramguard with an options string in the VRAMGUARD_OPTIONS syntax
 * ("key=value,key=value"), merged over the environment's VRAMGUARD_OPTIONS; NULL means
 * the environment only. Calling any other function first initialises from the
 * environment. A second call after initialisation returns VG_ERR_INVALID_ARGUMENT
 * unless the options are identical. Unknown keys and bad values return
 * VG_ERR_INVALID_OPTION with vg_last_error() naming the key. */
VG_API vg_status_t vg_init(const char *options);

/* Write every option with its value and where the value came from (default,
 * VRAMGUARD_OPTIONS, vg_init) to the log. verbose=1 does this at initialisation. */
VG_API void vg_print_options(void);

/* The current value of an option as text (e.g. vg_option("mode") -> "guard"), or NULL
 * for an unknown key. The string stays valid until the thread's next vg_option call. */
VG_API const char *vg_option(const char *key);

/* Send everything vramguard writes (log lines and reports) to `fn` instead of standard
 * error / the files named by the `log` and `report` options. NULL restores the default.
 * `fn` may be called from any thread, must not call vramguard, and gets text that is
 * not NUL-terminated. */
VG_API void vg_set_output_callback(void (*fn)(const char *text, size_t len, void *arg),
                                   void *arg);

#ifdef __cplusplus
}
#endif
#endif /* VRAMGUARD_H */
