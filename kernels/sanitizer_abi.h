/* sanitizer_abi.h — the subset of NVIDIA's Compute Sanitizer API that memcheck mode uses
 * (D1: no toolkit header at build time; docs/decisions.md G13).
 *
 * The API is a C library, libsanitizer-public.so, that ships with compute-sanitizer in
 * the CUDA toolkit (compute-sanitizer/ beside bin/). A subscriber gets callbacks as
 * modules load and kernels launch; in a module-loaded callback it may add "patches" (a
 * fatbin of device functions, kernels/memcheck.fatbin) and have every global-memory
 * access of the module's kernels call one of them; in a launch callback it gives that
 * launch's device callback its user data.
 *
 * Numbers and layouts are those of the API's headers (sanitizer_callbacks.h,
 * sanitizer_patching.h, sanitizer_stream.h, compute-sanitizer 2025.3 of CUDA 13.0),
 * declared here under our own names; src/check/memcheck.c calls them, and vgsim exports
 * a stand-in for them (vgsim/sanitizer.c) built on the same declarations.
 */
#ifndef VG_SANITIZER_ABI_H
#define VG_SANITIZER_ABI_H

#include <stddef.h>
#include <stdint.h>

/* (The CUDA driver's types come from the includer: vramguard's driver/cuda_abi.h, or
 * vgsim's cuda.h.) */

typedef int vg_san_result_t; /* SanitizerResult: 0 is SANITIZER_SUCCESS */
#define VG_SAN_SUCCESS 0

/* Sanitizer_CallbackDomain */
#define VG_SAN_DOMAIN_RESOURCE 3
#define VG_SAN_DOMAIN_SYNCHRONIZE 4
#define VG_SAN_DOMAIN_LAUNCH 5
#define VG_SAN_DOMAIN_GRAPHS 10
/* Sanitizer_CallbackIdResource, Sanitizer_CallbackIdLaunch */
#define VG_SAN_CBID_MODULE_LOADED 9
#define VG_SAN_CBID_MODULE_UNLOAD_STARTING 10
#define VG_SAN_CBID_LAUNCH_BEGIN 1
#define VG_SAN_CBID_LAUNCH_END 3
/* Sanitizer_CallbackIdGraphs: a node of an executable graph is launched */
#define VG_SAN_CBID_GRAPHS_NODE_LAUNCH_BEGIN 4
#define VG_SAN_GRAPH_NODE_KERNEL 0 /* CUgraphNodeType: CU_GRAPH_NODE_TYPE_KERNEL */
/* Sanitizer_InstructionId */
#define VG_SAN_INSTRUCTION_GLOBAL_MEMORY_ACCESS 3

typedef struct vg_san_subscriber *vg_san_subscriber_t; /* Sanitizer_SubscriberHandle */
typedef struct vg_san_stream *vg_san_stream_t;         /* Sanitizer_StreamHandle */
typedef struct vg_san_launch *vg_san_launch_t;         /* Sanitizer_LaunchHandle */

typedef struct vg_san_module_data { /* Sanitizer_ResourceModuleData */
    CUcontext context;
    CUmodule module;
    size_t cubin_size;
    const char *cubin;
    CUlibrary library;
} vg_san_module_data_t;

typedef struct vg_san_launch_data { /* Sanitizer_LaunchData */
    CUcontext context;
    CUstream stream;
    vg_san_stream_t hstream;
    CUmodule module;
    CUfunction function;
    const char *function_name;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t cluster[3];
    uint64_t grid_id;
    vg_san_launch_t hlaunch;
    CUdevice device;
    CUcontext api_context;
    CUstream api_stream;
    vg_san_stream_t hapi_stream;
} vg_san_launch_data_t;

/* Sanitizer_GraphNodeLaunchData. The launch data of a kernel node is the first member of a
 * union of the node kinds' data; it is the largest of them (136 bytes; a copy's is 120),
 * so isGraphUpload follows it. */
typedef struct vg_san_graph_node_launch_data {
    CUgraphExec graph_exec;
    uint32_t launch_id;  /* this launch of the executable graph */
    void *node;          /* CUgraphNode */
    int node_type;       /* CUgraphNodeType */
    vg_san_launch_data_t launch; /* (node_type VG_SAN_GRAPH_NODE_KERNEL only) */
    uint32_t is_graph_upload; /* the callback is part of a graph's upload, not a launch */
} vg_san_graph_node_launch_data_t;
_Static_assert(sizeof(vg_san_launch_data_t) == 136, "Sanitizer_LaunchData is 136 bytes");
_Static_assert(offsetof(vg_san_graph_node_launch_data_t, launch) == 32 &&
                   offsetof(vg_san_graph_node_launch_data_t, is_graph_upload) == 168,
               "the layout of Sanitizer_GraphNodeLaunchData");

typedef void (*vg_san_callback_t)(void *userdata, int domain, uint32_t cbid, const void *data);

/* What memcheck mode calls; sanitizerSetLaunchCallbackData (CUDA 12.3) is also the sign
 * of the launch data's layout above, so an older library is refused, not misread. */
#define VG_SANITIZER_FUNCS(X)                                                               \
    X(sanitizerSubscribe, vg_san_result_t, (vg_san_subscriber_t *, vg_san_callback_t, void *)) \
    X(sanitizerEnableCallback, vg_san_result_t, (uint32_t, vg_san_subscriber_t, int, uint32_t)) \
    X(sanitizerAddPatches, vg_san_result_t, (const void *, CUcontext))                     \
    X(sanitizerPatchInstructions, vg_san_result_t, (int, CUmodule, const char *))          \
    X(sanitizerPatchModule, vg_san_result_t, (CUmodule))                                   \
    X(sanitizerSetLaunchCallbackData, vg_san_result_t,                                     \
      (vg_san_launch_t, CUfunction, vg_san_stream_t, const void *))                        \
    X(sanitizerGetFunctionPcAndSize, vg_san_result_t,                                      \
      (CUmodule, const char *, uint64_t *, uint64_t *))

#endif /* VG_SANITIZER_ABI_H */
