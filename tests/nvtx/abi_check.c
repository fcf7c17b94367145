/* abi_check.c — vramguard's own NVTX declarations (src/check/nvtx_abi.h) against the CUDA
 * toolkit's nvtx3 headers: every number, size and field offset vramguard relies on,
 * checked at compile time. Built into the test tool (libvgnvtx_inject.so) where the
 * toolkit is installed; a mismatch fails the build.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <stddef.h>

#include "check/nvtx_abi.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)
#define SAME_LAYOUT(ours, theirs)                                                           \
    _Static_assert(sizeof(ours) == sizeof(theirs), "sizeof " #ours);                         \
    _Static_assert(_Alignof(ours) == _Alignof(theirs), "alignof " #ours)
#define SAME_FIELD(ours, of, theirs, tf)                                                    \
    _Static_assert(offsetof(ours, of) == offsetof(theirs, tf), #ours "." #of);               \
    _Static_assert(sizeof(((ours *)0)->of) == sizeof(((theirs *)0)->tf), #ours "." #of " size")

/* Core: versions, export tables, modules. */
SAME(VG_NVTX_VERSION, NVTX_VERSION);
SAME(VG_NVTX_ETID_CALLBACKS, NVTX_ETID_CALLBACKS);
SAME(VG_NVTX_ETID_VERSIONINFO, NVTX_ETID_VERSIONINFO);
SAME(VG_NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE);
SAME(VG_NVTX_CB_MODULE_CUDA, NVTX_CB_MODULE_CUDA);
SAME(VG_NVTX_CB_MODULE_OPENCL, NVTX_CB_MODULE_OPENCL);
SAME(VG_NVTX_CB_MODULE_CUDART, NVTX_CB_MODULE_CUDART);
SAME(VG_NVTX_CB_MODULE_CORE2, NVTX_CB_MODULE_CORE2);
SAME(VG_NVTX_CB_MODULE_SYNC, NVTX_CB_MODULE_SYNC);
SAME(VG_NVTX_CB_MODULE_COUNT, NVTX_CB_MODULE_SIZE);
SAME(VG_NVTX_CBID_CORE_SIZE, NVTX_CBID_CORE_SIZE);
SAME(VG_NVTX_CBID_CUDA_SIZE, NVTX_CBID_CUDA_SIZE);
SAME(VG_NVTX_CBID_OPENCL_SIZE, NVTX_CBID_OPENCL_SIZE);
SAME(VG_NVTX_CBID_CUDART_SIZE, NVTX_CBID_CUDART_SIZE);
SAME(VG_NVTX_CBID_CORE2_SIZE, NVTX_CBID_CORE2_SIZE);
SAME(VG_NVTX_CBID_SYNC_SIZE, NVTX_CBID_SYNC_SIZE);
SAME(VG_NVTX_CBID_CORE2_DOMAIN_CREATE_A, NVTX_CBID_CORE2_DomainCreateA);
SAME(VG_NVTX_CBID_CORE2_DOMAIN_DESTROY, NVTX_CBID_CORE2_DomainDestroy);
SAME(VG_NVTX_MESSAGE_TYPE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
_Static_assert(sizeof(NvtxCallbackModule) == sizeof(int), "module ids travel as int");

SAME_LAYOUT(vg_nvtx_export_callbacks_t, NvtxExportTableCallbacks);
SAME_FIELD(vg_nvtx_export_callbacks_t, struct_size, NvtxExportTableCallbacks, struct_size);
SAME_FIELD(vg_nvtx_export_callbacks_t, get_module_function_table, NvtxExportTableCallbacks,
           GetModuleFunctionTable);
SAME_LAYOUT(vg_nvtx_export_version_t, NvtxExportTableVersionInfo);
SAME_FIELD(vg_nvtx_export_version_t, version, NvtxExportTableVersionInfo, version);
SAME_FIELD(vg_nvtx_export_version_t, set_injection_version, NvtxExportTableVersionInfo,
           SetInjectionNvtxVersion);
SAME_LAYOUT(vg_nvtx_message_t, nvtxMessageValue_t);

/* Extension modules. */
SAME_LAYOUT(vg_nvtx_ext_segment_t, nvtxExtModuleSegment_t);
SAME_FIELD(vg_nvtx_ext_segment_t, segment_id, nvtxExtModuleSegment_t, segmentId);
SAME_FIELD(vg_nvtx_ext_segment_t, slot_count, nvtxExtModuleSegment_t, slotCount);
SAME_FIELD(vg_nvtx_ext_segment_t, function_slots, nvtxExtModuleSegment_t, functionSlots);
SAME_LAYOUT(vg_nvtx_ext_module_info_t, nvtxExtModuleInfo_t);
SAME_FIELD(vg_nvtx_ext_module_info_t, nvtx_ver, nvtxExtModuleInfo_t, nvtxVer);
SAME_FIELD(vg_nvtx_ext_module_info_t, struct_size, nvtxExtModuleInfo_t, structSize);
SAME_FIELD(vg_nvtx_ext_module_info_t, module_id, nvtxExtModuleInfo_t, moduleId);
SAME_FIELD(vg_nvtx_ext_module_info_t, compat_id, nvtxExtModuleInfo_t, compatId);
SAME_FIELD(vg_nvtx_ext_module_info_t, segments_count, nvtxExtModuleInfo_t, segmentsCount);
SAME_FIELD(vg_nvtx_ext_module_info_t, segments, nvtxExtModuleInfo_t, segments);
SAME_FIELD(vg_nvtx_ext_module_info_t, get_export_function, nvtxExtModuleInfo_t,
           getExportFunction);
SAME_FIELD(vg_nvtx_ext_module_info_t, ext_info, nvtxExtModuleInfo_t, extInfo);

/* The Memory API. */
SAME(VG_NVTX_MEM_MODULE_ID, NVTX_EXT_MODULEID_MEM);
SAME(VG_NVTX_MEM_COMPAT_ID, NVTX_EXT_COMPATID_MEM);
SAME(VG_NVTX_MEM_HEAP_REGISTER, NVTX3EXT_CBID_nvtxMemHeapRegister);
SAME(VG_NVTX_MEM_HEAP_UNREGISTER, NVTX3EXT_CBID_nvtxMemHeapUnregister);
SAME(VG_NVTX_MEM_HEAP_RESET, NVTX3EXT_CBID_nvtxMemHeapReset);
SAME(VG_NVTX_MEM_REGIONS_REGISTER, NVTX3EXT_CBID_nvtxMemRegionsRegister);
SAME(VG_NVTX_MEM_REGIONS_RESIZE, NVTX3EXT_CBID_nvtxMemRegionsResize);
SAME(VG_NVTX_MEM_REGIONS_UNREGISTER, NVTX3EXT_CBID_nvtxMemRegionsUnregister);
SAME(VG_NVTX_MEM_REGIONS_NAME, NVTX3EXT_CBID_nvtxMemRegionsName);
SAME(VG_NVTX_MEM_HEAP_USAGE_SUB_ALLOCATOR, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR);
SAME(VG_NVTX_MEM_TYPE_VIRTUAL_ADDRESS, NVTX_MEM_TYPE_VIRTUAL_ADDRESS);
SAME(VG_NVTX_MEM_REGION_REF_POINTER, NVTX_MEM_REGION_REF_TYPE_POINTER);
_Static_assert(VG_NVTX_MEM_SLOT_COUNT > NVTX3EXT_CBID_nvtxMemCudaMarkInitialized,
               "room for every Memory API slot");

SAME_LAYOUT(vg_nvtx_mem_range_t, nvtxMemVirtualRangeDesc_t);
SAME_FIELD(vg_nvtx_mem_range_t, size, nvtxMemVirtualRangeDesc_t, size);
SAME_FIELD(vg_nvtx_mem_range_t, ptr, nvtxMemVirtualRangeDesc_t, ptr);
SAME_LAYOUT(vg_nvtx_mem_region_ref_t, nvtxMemRegionRef_t);

SAME_LAYOUT(vg_nvtx_mem_heap_desc_t, nvtxMemHeapDesc_t);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, ext_compat_id, nvtxMemHeapDesc_t, extCompatID);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, struct_size, nvtxMemHeapDesc_t, structSize);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, usage, nvtxMemHeapDesc_t, usage);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, type, nvtxMemHeapDesc_t, type);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, type_specific_desc_size, nvtxMemHeapDesc_t,
           typeSpecificDescSize);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, type_specific_desc, nvtxMemHeapDesc_t, typeSpecificDesc);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, category, nvtxMemHeapDesc_t, category);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, message_type, nvtxMemHeapDesc_t, messageType);
SAME_FIELD(vg_nvtx_mem_heap_desc_t, message, nvtxMemHeapDesc_t, message);

SAME_LAYOUT(vg_nvtx_mem_regions_register_t, nvtxMemRegionsRegisterBatch_t);
SAME_FIELD(vg_nvtx_mem_regions_register_t, ext_compat_id, nvtxMemRegionsRegisterBatch_t,
           extCompatID);
SAME_FIELD(vg_nvtx_mem_regions_register_t, struct_size, nvtxMemRegionsRegisterBatch_t,
           structSize);
SAME_FIELD(vg_nvtx_mem_regions_register_t, region_type, nvtxMemRegionsRegisterBatch_t,
           regionType);
SAME_FIELD(vg_nvtx_mem_regions_register_t, heap, nvtxMemRegionsRegisterBatch_t, heap);
SAME_FIELD(vg_nvtx_mem_regions_register_t, region_count, nvtxMemRegionsRegisterBatch_t,
           regionCount);
SAME_FIELD(vg_nvtx_mem_regions_register_t, region_desc_element_size,
           nvtxMemRegionsRegisterBatch_t, regionDescElementSize);
SAME_FIELD(vg_nvtx_mem_regions_register_t, region_desc_elements,
           nvtxMemRegionsRegisterBatch_t, regionDescElements);
SAME_FIELD(vg_nvtx_mem_regions_register_t, region_handle_elements_out,
           nvtxMemRegionsRegisterBatch_t, regionHandleElementsOut);

SAME_LAYOUT(vg_nvtx_mem_regions_unregister_t, nvtxMemRegionsUnregisterBatch_t);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, ext_compat_id, nvtxMemRegionsUnregisterBatch_t,
           extCompatID);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, struct_size, nvtxMemRegionsUnregisterBatch_t,
           structSize);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, ref_type, nvtxMemRegionsUnregisterBatch_t,
           refType);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, ref_count, nvtxMemRegionsUnregisterBatch_t,
           refCount);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, ref_element_size,
           nvtxMemRegionsUnregisterBatch_t, refElementSize);
SAME_FIELD(vg_nvtx_mem_regions_unregister_t, ref_elements, nvtxMemRegionsUnregisterBatch_t,
           refElements);

SAME_LAYOUT(vg_nvtx_mem_region_name_t, nvtxMemRegionNameDesc_t);
SAME_FIELD(vg_nvtx_mem_region_name_t, region_ref_type, nvtxMemRegionNameDesc_t,
           regionRefType);
SAME_FIELD(vg_nvtx_mem_region_name_t, name_type, nvtxMemRegionNameDesc_t, nameType);
SAME_FIELD(vg_nvtx_mem_region_name_t, region, nvtxMemRegionNameDesc_t, region);
SAME_FIELD(vg_nvtx_mem_region_name_t, name, nvtxMemRegionNameDesc_t, name);
SAME_FIELD(vg_nvtx_mem_region_name_t, category, nvtxMemRegionNameDesc_t, category);

SAME_LAYOUT(vg_nvtx_mem_regions_name_t, nvtxMemRegionsNameBatch_t);
SAME_FIELD(vg_nvtx_mem_regions_name_t, ext_compat_id, nvtxMemRegionsNameBatch_t, extCompatID);
SAME_FIELD(vg_nvtx_mem_regions_name_t, struct_size, nvtxMemRegionsNameBatch_t, structSize);
SAME_FIELD(vg_nvtx_mem_regions_name_t, region_count, nvtxMemRegionsNameBatch_t, regionCount);
SAME_FIELD(vg_nvtx_mem_regions_name_t, region_element_size, nvtxMemRegionsNameBatch_t,
           regionElementSize);
SAME_FIELD(vg_nvtx_mem_regions_name_t, region_elements, nvtxMemRegionsNameBatch_t,
           regionElements);
SAME_FIELD(vg_nvtx_mem_regions_name_t, reserved1, nvtxMemRegionsNameBatch_t, reserved1);

/* The entry points vramguard calls: pointers of the same size (their parameters are
 * checked above, struct by struct). */
_Static_assert(sizeof(NvtxInitializeInjectionNvtxFunc_t) == sizeof(vg_nvtx_init_injection_t),
               "InitializeInjectionNvtx2 pointer");
_Static_assert(sizeof(NvtxExtInitializeInjectionFunc_t) == sizeof(vg_nvtx_init_extension_t),
               "InitializeInjectionNvtxExtension pointer");

/* (A translation unit must declare something.) */
int vgnvtx_abi_checked(void);
int vgnvtx_abi_checked(void) { return 1; }
