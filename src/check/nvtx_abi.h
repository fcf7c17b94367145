/* nvtx_abi.h — the subset of NVIDIA's NVTX injection ABI that vramguard speaks (D1: no
 * toolkit header at build time; docs/decisions.md G12).
 *
 * NVTX is a header-only client: each program or library that uses it keeps its own table
 * of function pointers, and the tool (compute-sanitizer, Nsight) fills them in. The tool
 * is a shared library named by NVTX_INJECTION64_PATH; the client loads it with dlopen
 * (one copy per process, whoever loads it first), calls its InitializeInjectionNvtx2
 * with the client's export table (through which the tool finds and fills the client's
 * core function tables, CORE2 holding nvtxDomainCreateA), then, for an extension module
 * such as the Memory API, calls InitializeInjectionNvtxExtension with a module info that
 * points at the module's function slots, which the tool fills in (0: not supported).
 *
 * Layouts and numbers are those of nvtx3 (nvtxTypes.h, nvtxExtTypes.h, nvToolsExtMem.h),
 * declared here under our own names; tests/nvtx/abi_check.c compiles them beside the
 * toolkit's headers, where the toolkit is installed, and fails the build on any mismatch.
 */
#ifndef VG_NVTX_ABI_H
#define VG_NVTX_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#define VG_NVTX_VERSION 3

/* Core: export tables the client offers, callback modules the tool fills. */
#define VG_NVTX_ETID_CALLBACKS 1
#define VG_NVTX_ETID_VERSIONINFO 3

enum {
    VG_NVTX_CB_MODULE_CORE = 1,
    VG_NVTX_CB_MODULE_CUDA = 2,
    VG_NVTX_CB_MODULE_OPENCL = 3,
    VG_NVTX_CB_MODULE_CUDART = 4,
    VG_NVTX_CB_MODULE_CORE2 = 5,
    VG_NVTX_CB_MODULE_SYNC = 6,
    VG_NVTX_CB_MODULE_COUNT = 7 /* (modules 1..6) */
};

/* Each module's table size: its callback ids 1..SIZE-1 (0 is invalid). */
#define VG_NVTX_CBID_CORE_SIZE 16
#define VG_NVTX_CBID_CUDA_SIZE 9
#define VG_NVTX_CBID_OPENCL_SIZE 15
#define VG_NVTX_CBID_CUDART_SIZE 7
#define VG_NVTX_CBID_CORE2_SIZE 16
#define VG_NVTX_CBID_SYNC_SIZE 7
#define VG_NVTX_CBID_CORE2_DOMAIN_CREATE_A 12
#define VG_NVTX_CBID_CORE2_DOMAIN_DESTROY 14

typedef void (*vg_nvtx_fn_t)(void);       /* a slot's generic, uncallable type */
typedef vg_nvtx_fn_t **vg_nvtx_table_t;   /* an array of pointers to slots */

typedef struct vg_nvtx_export_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, vg_nvtx_table_t *out_table,
                                     unsigned int *out_size);
} vg_nvtx_export_callbacks_t;

typedef struct vg_nvtx_export_version {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*set_injection_version)(uint32_t version);
} vg_nvtx_export_version_t;

typedef const void *(*vg_nvtx_get_export_table_t)(uint32_t export_table_id);
typedef int (*vg_nvtx_init_injection_t)(vg_nvtx_get_export_table_t get_export_table);

typedef struct vg_nvtx_domain *vg_nvtx_domain_t;
typedef vg_nvtx_domain_t (*vg_nvtx_domain_create_a_t)(const char *name);
typedef void (*vg_nvtx_domain_destroy_t)(vg_nvtx_domain_t domain);

typedef union vg_nvtx_message {
    const char *ascii;
    const wchar_t *unicode;
    void *registered;
} vg_nvtx_message_t;
#define VG_NVTX_MESSAGE_TYPE_ASCII 1

/* Extension modules. */
#define VG_NVTX_EXTENSION_FRESH 0    /* a slot nobody filled */
#define VG_NVTX_EXTENSION_DISABLED 1 /* a slot the client gave up on */

typedef struct vg_nvtx_ext_segment {
    size_t segment_id;
    size_t slot_count;
    intptr_t *function_slots;
} vg_nvtx_ext_segment_t;

typedef struct vg_nvtx_ext_module_info {
    uint16_t nvtx_ver;
    uint16_t struct_size;
    uint16_t module_id;
    uint16_t compat_id;
    size_t segments_count;
    vg_nvtx_ext_segment_t *segments;
    intptr_t (*get_export_function)(uint32_t export_function_id);
    const void *ext_info;
} vg_nvtx_ext_module_info_t;

typedef int (*vg_nvtx_init_extension_t)(vg_nvtx_ext_module_info_t *module_info);

/* The Memory extension (nvToolsExtMem.h): module 1, compatibility 0x0102, one segment
 * (id 1) of 63 slots, the functions at their callback ids. */
#define VG_NVTX_MEM_MODULE_ID 1
#define VG_NVTX_MEM_COMPAT_ID 0x0102
#define VG_NVTX_MEM_SEGMENT_ID 1
#define VG_NVTX_MEM_SLOT_COUNT 63
enum {
    VG_NVTX_MEM_HEAP_REGISTER = 0,
    VG_NVTX_MEM_HEAP_UNREGISTER = 1,
    VG_NVTX_MEM_HEAP_RESET = 2,
    VG_NVTX_MEM_REGIONS_REGISTER = 3,
    VG_NVTX_MEM_REGIONS_RESIZE = 4,
    VG_NVTX_MEM_REGIONS_UNREGISTER = 5,
    VG_NVTX_MEM_REGIONS_NAME = 6,
};

#define VG_NVTX_MEM_HEAP_USAGE_SUB_ALLOCATOR 0x1
#define VG_NVTX_MEM_TYPE_VIRTUAL_ADDRESS 0x1
#define VG_NVTX_MEM_REGION_REF_POINTER 0x1
/* The longest region name compute-sanitizer takes (2025.3: "Memory region name cannot
 * exceed 49 characters"; a longer one is refused and counted as an error). */
#define VG_NVTX_NAME_MAX 49
/* What a heap registration returns when no tool handles it. */
#define VG_NVTX_MEM_HEAP_NO_TOOL ((vg_nvtx_mem_heap_t)(intptr_t)-1)

typedef struct vg_nvtx_mem_heap *vg_nvtx_mem_heap_t;
typedef struct vg_nvtx_mem_region *vg_nvtx_mem_region_t;

typedef union vg_nvtx_mem_region_ref {
    const void *pointer;
    vg_nvtx_mem_region_t handle;
} vg_nvtx_mem_region_ref_t;

typedef struct vg_nvtx_mem_range {
    size_t size;
    const void *ptr;
} vg_nvtx_mem_range_t;

typedef struct vg_nvtx_mem_heap_desc {
    uint16_t ext_compat_id;
    uint16_t struct_size;
    uint32_t reserved0;
    uint32_t usage;
    uint32_t type;
    size_t type_specific_desc_size;
    const void *type_specific_desc;
    uint32_t category;
    uint32_t message_type;
    vg_nvtx_message_t message;
} vg_nvtx_mem_heap_desc_t;

typedef struct vg_nvtx_mem_regions_register {
    uint16_t ext_compat_id;
    uint16_t struct_size;
    uint32_t region_type;
    vg_nvtx_mem_heap_t heap;
    size_t region_count;
    size_t region_desc_element_size;
    const void *region_desc_elements;
    vg_nvtx_mem_region_t *region_handle_elements_out;
} vg_nvtx_mem_regions_register_t;

typedef struct vg_nvtx_mem_regions_unregister {
    uint16_t ext_compat_id;
    uint16_t struct_size;
    uint32_t ref_type;
    size_t ref_count;
    size_t ref_element_size;
    const vg_nvtx_mem_region_ref_t *ref_elements;
} vg_nvtx_mem_regions_unregister_t;

typedef struct vg_nvtx_mem_region_name {
    uint32_t region_ref_type;
    uint32_t name_type;
    vg_nvtx_mem_region_ref_t region;
    vg_nvtx_message_t name;
    uint32_t category;
    uint32_t reserved0;
} vg_nvtx_mem_region_name_t;

typedef struct vg_nvtx_mem_regions_name {
    uint16_t ext_compat_id;
    uint16_t struct_size;
    uint32_t reserved0;
    size_t region_count;
    size_t region_element_size;
    const vg_nvtx_mem_region_name_t *region_elements;
    size_t reserved1;
} vg_nvtx_mem_regions_name_t;

typedef vg_nvtx_mem_heap_t (*vg_nvtx_mem_heap_register_t)(vg_nvtx_domain_t domain,
                                                          const vg_nvtx_mem_heap_desc_t *desc);
typedef void (*vg_nvtx_mem_heap_unregister_t)(vg_nvtx_domain_t domain, vg_nvtx_mem_heap_t heap);
typedef void (*vg_nvtx_mem_regions_register_fn)(vg_nvtx_domain_t domain,
                                                const vg_nvtx_mem_regions_register_t *desc);
typedef void (*vg_nvtx_mem_regions_unregister_fn)(vg_nvtx_domain_t domain,
                                                  const vg_nvtx_mem_regions_unregister_t *desc);
typedef void (*vg_nvtx_mem_regions_name_fn)(vg_nvtx_domain_t domain,
                                            const vg_nvtx_mem_regions_name_t *desc);

#endif /* VG_NVTX_ABI_H */
