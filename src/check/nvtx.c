/* nvtx.c — vramguard's allocations told to compute-sanitizer through NVTX's Memory API
 * (docs/decisions.md G12, docs/compute-sanitizer.md).
 *
 * vramguard is its own NVTX client (nvtx_abi.h: no toolkit header, D1). When
 * NVTX_INJECTION64_PATH names a tool — compute-sanitizer sets it for the program it runs —
 * the tool is loaded when the first heap is set up (its context current: compute-sanitizer
 * wants CUDA initialised before any NVTX call), given our export table (it fills our CORE2
 * table, from which nvtxDomainCreateA makes the "vramguard" domain) and our Memory
 * extension slots. Another NVTX client in the process (PyTorch, the program) has its own
 * tables; dlopen hands both the same copy of the tool.
 *
 * What is registered:
 *   segment      a heap of usage SUB_ALLOCATOR over a cuMemAlloc'd or managed segment,
 *                unregistered before the segment is freed (which drops its regions). Not
 *                a virtual-memory segment: compute-sanitizer refuses pools over VMM
 *                mappings, so under a tool vmm=auto gives cuMemAlloc segments, and vmm=on
 *                leaves its segments whole to the tool;
 *   allocation   a region [user, user + requested) from the allocation to the program's
 *                free (a quarantined block is freed memory: no region), named "vramguard
 *                #17, 4000 bytes, app.c:40" (at most 49 characters, compute-sanitizer's
 *                limit), the location being the site's first frame as far as it is known
 *                without running the symbolizer (a Python line, a frame a report already
 *                symbolized, else symbol+offset). Not renamed at exit: by then the tool's
 *                own exit handlers may have run, and a call into it corrupted the
 *                process's heap (the H200, 2026-11-26);
 *   graph pool   a CUDA graph's replays touch what its captures allocated, freed or not
 *                (A7): a pool's regions stay registered after a free until the pool is
 *                released, and an allocation that overlaps them is merged with them into
 *                one region (named as pool memory), so coverage only grows while replays
 *                may run. Then they are unregistered and the pool's live allocations
 *                registered alone again.
 * Anything that fails (no memory for a pool's list, a tool that returns no heap) leaves a
 * segment unregistered: memcheck then sees it as one allocation, as without NVTX — less
 * precise, never a false report.
 */
#define _GNU_SOURCE
#include "nvtx.h"
#include "memcheck.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "guard.h"
#include "nvtx_abi.h"
#include "base/options.h"
#include "diag/sites.h"

static bool g_loaded;              /* the tool took the Memory API (set once, g_once) */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* Whether the tool registered vramguard's first segment: it decides (the tool could
 * refuse every heap; guard mode would then stop its own checks for nothing). */
enum { HEAPS_UNKNOWN = 0, HEAPS_TAKEN = 1, HEAPS_REFUSED = 2 };
static _Atomic int g_heaps_state;

/* ---------------------------------------------------------------------------------------
 * The client side of the protocol: our function tables, the tool's entry points
 * ------------------------------------------------------------------------------------- */

static const unsigned k_module_size[VG_NVTX_CB_MODULE_COUNT] = {
    0, VG_NVTX_CBID_CORE_SIZE, VG_NVTX_CBID_CUDA_SIZE, VG_NVTX_CBID_OPENCL_SIZE,
    VG_NVTX_CBID_CUDART_SIZE, VG_NVTX_CBID_CORE2_SIZE, VG_NVTX_CBID_SYNC_SIZE};
#define MAX_SIZE 16
/* The slots the tool fills, per module, and the tables of pointers to them that it is
 * given (NULL at 0 and past the end, as NVTX's own). */
static vg_nvtx_fn_t g_slots[VG_NVTX_CB_MODULE_COUNT][MAX_SIZE];
static vg_nvtx_fn_t *g_tables[VG_NVTX_CB_MODULE_COUNT][MAX_SIZE + 1];
static intptr_t g_mem_slots[VG_NVTX_MEM_SLOT_COUNT];

static int get_module_function_table(int module, vg_nvtx_table_t *out_table,
                                     unsigned int *out_size) {
    if (module <= 0 || module >= VG_NVTX_CB_MODULE_COUNT)
        return 0;
    if (out_table)
        *out_table = g_tables[module];
    if (out_size)
        *out_size = k_module_size[module];
    return 1;
}

static void set_injection_version(uint32_t version) { (void)version; }

static const vg_nvtx_export_callbacks_t g_etbl_callbacks = {sizeof g_etbl_callbacks,
                                                            get_module_function_table};
static const vg_nvtx_export_version_t g_etbl_version = {sizeof g_etbl_version, VG_NVTX_VERSION,
                                                        0, set_injection_version};

static const void *get_export_table(uint32_t id) {
    return id == VG_NVTX_ETID_CALLBACKS     ? (const void *)&g_etbl_callbacks
           : id == VG_NVTX_ETID_VERSIONINFO ? (const void *)&g_etbl_version
                                            : NULL;
}

/* The tool's functions we call. */
static vg_nvtx_domain_t g_domain;
static vg_nvtx_mem_heap_register_t g_heap_register;
static vg_nvtx_mem_heap_unregister_t g_heap_unregister;
static vg_nvtx_mem_regions_register_fn g_regions_register;
static vg_nvtx_mem_regions_unregister_fn g_regions_unregister;
static vg_nvtx_mem_regions_name_fn g_regions_name;

static void tables_init(void) {
    for (int m = 1; m < VG_NVTX_CB_MODULE_COUNT; m++)
        for (unsigned i = 1; i < k_module_size[m]; i++)
            g_tables[m][i] = &g_slots[m][i];
}

/* A slot the tool filled, or NULL. */
static void *mem_slot(int i) {
    intptr_t v = g_mem_slots[i];
    return v == VG_NVTX_EXTENSION_FRESH || v == VG_NVTX_EXTENSION_DISABLED ? NULL : (void *)v;
}

static bool init_extension(vg_nvtx_init_extension_t init) {
    vg_nvtx_ext_segment_t seg = {VG_NVTX_MEM_SEGMENT_ID, VG_NVTX_MEM_SLOT_COUNT, g_mem_slots};
    vg_nvtx_ext_module_info_t info = {VG_NVTX_VERSION, sizeof info, VG_NVTX_MEM_MODULE_ID,
                                      VG_NVTX_MEM_COMPAT_ID, 1, &seg, NULL, NULL};
    if (!init(&info))
        return false;
    g_heap_register = (vg_nvtx_mem_heap_register_t)mem_slot(VG_NVTX_MEM_HEAP_REGISTER);
    g_heap_unregister = (vg_nvtx_mem_heap_unregister_t)mem_slot(VG_NVTX_MEM_HEAP_UNREGISTER);
    g_regions_register = (vg_nvtx_mem_regions_register_fn)mem_slot(VG_NVTX_MEM_REGIONS_REGISTER);
    g_regions_unregister =
        (vg_nvtx_mem_regions_unregister_fn)mem_slot(VG_NVTX_MEM_REGIONS_UNREGISTER);
    g_regions_name = (vg_nvtx_mem_regions_name_fn)mem_slot(VG_NVTX_MEM_REGIONS_NAME);
    return g_heap_register && g_heap_unregister && g_regions_register && g_regions_unregister;
}

static void site_texts_init(void);

/* Load the tool and take its Memory API; false (said with verbose) if it cannot be. */
static bool load_tool(const char *path) {
    void *lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        if (vg__opt.verbose)
            vg__log("NVTX: the tool NVTX_INJECTION64_PATH names cannot be loaded (%s): "
                    "allocations are not told to it", e ? e : path);
        return false;
    }
    vg_nvtx_init_injection_t core =
        (vg_nvtx_init_injection_t)vg__dlsym(lib, "InitializeInjectionNvtx2");
    vg_nvtx_init_extension_t ext =
        (vg_nvtx_init_extension_t)vg__dlsym(lib, "InitializeInjectionNvtxExtension");
    if (!core || !ext) {
        if (vg__opt.verbose)
            vg__log("NVTX: %s is no NVTX tool with the Memory API (no %s): allocations are "
                    "not told to it", path, core ? "InitializeInjectionNvtxExtension"
                                                 : "InitializeInjectionNvtx2");
        dlclose(lib); /* (nothing of it ran but its constructors) */
        return false;
    }
    tables_init();
    const char *why = NULL;
    if (!core(get_export_table))
        why = "refused vramguard as a client";
    else if (!init_extension(ext))
        why = "does not take the Memory API's heaps and regions";
    if (why) { /* (the library stays loaded: its code ran and may have left state) */
        if (vg__opt.verbose)
            vg__log("NVTX: the tool %s %s: allocations are not told to it", path, why);
        return false;
    }
    vg_nvtx_domain_create_a_t create =
        (vg_nvtx_domain_create_a_t)g_slots[VG_NVTX_CB_MODULE_CORE2]
                                          [VG_NVTX_CBID_CORE2_DOMAIN_CREATE_A];
    g_domain = create ? create("vramguard") : NULL; /* (NULL: the default domain) */
    site_texts_init();
    return true;
}

static void load_once(void) {
    const char *path = secure_getenv("NVTX_INJECTION64_PATH");
    g_loaded = path && *path && load_tool(path);
    if (!g_loaded)
        atomic_store(&vg__alloc_tool, vg__memcheck_on());
}

/* The first heap registration's outcome (taken: true) decides for all. Said once. */
static bool heaps_decide(bool taken) {
    int want = taken ? HEAPS_TAKEN : HEAPS_REFUSED, was = HEAPS_UNKNOWN;
    if (!atomic_compare_exchange_strong(&g_heaps_state, &was, want))
        return was == HEAPS_TAKEN;
    if (!taken) {
        atomic_store(&vg__alloc_tool, vg__memcheck_on());
        if (vg__opt.verbose)
            vg__log("NVTX: the tool registered no heap for vramguard's first segment: "
                    "allocations are not told to it");
        return false;
    }
    if (vg__opt.verbose)
        vg__log("NVTX: the tool takes vramguard's segments as heaps and its allocations as "
                "regions");
    if (vg__opt.mode >= VG_MODE_GUARD)
        vg__log("guard mode under an NVTX memory checker (compute-sanitizer): it checks "
                "every access against vramguard's allocations, so guard mode launches no "
                "redzone fills or checks of its own; layout, quarantine and host checks "
                "stay (docs/decisions.md G12)");
    return true;
}

static bool g_named; /* NVTX_INJECTION64_PATH names a tool (set at initialisation) */

void vg__nvtx_init(void) {
    const char *path = secure_getenv("NVTX_INJECTION64_PATH");
    g_named = path && *path;
    atomic_store(&vg__alloc_tool, g_named || vg__memcheck_on()); /* (memcheck's shadow) */
}

bool vg__nvtx_plain_segments(void) {
    if (!g_named || vg__opt.vmm != VG_VMM_AUTO)
        return false;
    pthread_once(&g_once, load_once); /* (a heap's first call: its context is current) */
    return g_loaded;
}

bool vg__nvtx_pads_slow(void) {
    return g_loaded && atomic_load_explicit(&g_heaps_state, memory_order_relaxed) != HEAPS_REFUSED;
}

bool vg__nvtx_attached(void) {
    return atomic_load_explicit(&g_heaps_state, memory_order_relaxed) == HEAPS_TAKEN;
}

/* ---------------------------------------------------------------------------------------
 * Heaps and regions
 * ------------------------------------------------------------------------------------- */

static void heap_unregister(vg_segment_t *seg) {
    if (seg->nvtx_heap)
        g_heap_unregister(g_domain, (vg_nvtx_mem_heap_t)seg->nvtx_heap);
    seg->nvtx_heap = NULL;
}

/* Something could not be registered: the segment is left to the tool as one allocation
 * (its regions go with its heap), which is never wrong. */
static void degrade(vg_segment_t *seg, const char *why) {
    heap_unregister(seg);
    if (vg__opt.verbose)
        vg__log("NVTX: a segment of vramguard is no longer split into allocations for the "
                "tool (%s)", why);
}

/* vmm=on under a tool: its virtual-memory segments stay whole to the tool. Said once. */
static void vmm_unregistered(void) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        vg__log("vmm=on under an NVTX tool (compute-sanitizer): the tool takes no pool in "
                "virtual memory, so it sees vramguard's segments whole, not its allocations "
                "(vmm=auto uses cuMemAlloc segments under a tool; docs/decisions.md G12)");
}

void vg__nvtx_segment_added_slow(vg_heap_t *h, vg_segment_t *seg) {
    pthread_once(&g_once, load_once);
    if (!g_loaded || atomic_load(&g_heaps_state) == HEAPS_REFUSED)
        return;
    /* compute-sanitizer refuses a pool in virtual memory, and counts each refusal as an
     * error; with vmm=on nothing is registered (a managed heap taken alone would turn
     * guard mode's checks off for the unregistered virtual-memory ones too). */
    if (seg->vmm || vg__opt.vmm == VG_VMM_ON) {
        vmm_unregistered();
        return;
    }
    char sz[32], text[128];
    snprintf(text, sizeof text, "vramguard %s segment on device %d, %s",
             h->managed ? "managed-memory" : "cuMemAlloc", h->device,
             vg__fmt_bytes(sz, seg->size));
    vg_nvtx_mem_range_t range = {seg->size, (const void *)(uintptr_t)seg->base};
    vg_nvtx_mem_heap_desc_t d = {
        .ext_compat_id = VG_NVTX_MEM_COMPAT_ID,
        .struct_size = sizeof d,
        .usage = VG_NVTX_MEM_HEAP_USAGE_SUB_ALLOCATOR,
        .type = VG_NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
        .type_specific_desc_size = sizeof range,
        .type_specific_desc = &range,
        .message_type = VG_NVTX_MESSAGE_TYPE_ASCII,
        .message = {.ascii = text}};
    vg_nvtx_mem_heap_t heap = g_heap_register(g_domain, &d);
    seg->nvtx_heap = heap == VG_NVTX_MEM_HEAP_NO_TOOL ? NULL : (void *)heap;
    if (!heaps_decide(seg->nvtx_heap != NULL))
        heap_unregister(seg); /* (another heap's refusal decided first: none at all) */
    else if (!seg->nvtx_heap && vg__opt.verbose)
        vg__log("NVTX: the tool registered no heap for a segment of device %d", h->device);
}

void vg__nvtx_segment_removed_slow(vg_heap_t *h, vg_segment_t *seg) {
    (void)h;
    heap_unregister(seg); /* (NULL unless the tool registered it) */
}

static void region_register(vg_segment_t *seg, uint64_t lo, uint64_t hi) {
    vg_nvtx_mem_range_t r = {hi - lo, (const void *)(uintptr_t)lo};
    vg_nvtx_mem_regions_register_t d = {
        .ext_compat_id = VG_NVTX_MEM_COMPAT_ID,
        .struct_size = sizeof d,
        .region_type = VG_NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
        .heap = (vg_nvtx_mem_heap_t)seg->nvtx_heap,
        .region_count = 1,
        .region_desc_element_size = sizeof r,
        .region_desc_elements = &r};
    g_regions_register(g_domain, &d);
}

static void region_unregister(uint64_t lo) {
    vg_nvtx_mem_region_ref_t ref = {.pointer = (const void *)(uintptr_t)lo};
    vg_nvtx_mem_regions_unregister_t d = {
        .ext_compat_id = VG_NVTX_MEM_COMPAT_ID,
        .struct_size = sizeof d,
        .ref_type = VG_NVTX_MEM_REGION_REF_POINTER,
        .ref_count = 1,
        .ref_element_size = sizeof ref,
        .ref_elements = &ref};
    g_regions_unregister(g_domain, &d);
}

static void region_name(uint64_t lo, const char *text) {
    if (!g_regions_name)
        return;
    vg_nvtx_mem_region_name_t e = {.region_ref_type = VG_NVTX_MEM_REGION_REF_POINTER,
                                   .name_type = VG_NVTX_MESSAGE_TYPE_ASCII,
                                   .region = {.pointer = (const void *)(uintptr_t)lo},
                                   .name = {.ascii = text}};
    vg_nvtx_mem_regions_name_t d = {.ext_compat_id = VG_NVTX_MEM_COMPAT_ID,
                                    .struct_size = sizeof d,
                                    .region_count = 1,
                                    .region_element_size = sizeof e,
                                    .region_elements = &e};
    g_regions_name(g_domain, &d);
}

/* ---------------------------------------------------------------------------------------
 * A graph pool's regions: sorted disjoint [lo, hi) pairs in p->nvtx, each one region
 * ------------------------------------------------------------------------------------- */

static const char k_pool_name[] = "vramguard CUDA graph pool (replays may use it)";

static bool pool_room(vg_gpool_t *p) {
    if (p->nnvtx < p->capnvtx)
        return true;
    size_t cap = p->capnvtx ? 2 * p->capnvtx : 16;
    uint64_t *u = realloc(p->nvtx, 2 * cap * sizeof *u);
    if (!u)
        return false;
    p->nvtx = u;
    p->capnvtx = cap;
    return true;
}

/* Add [lo, hi) to p's regions: registered alone if it overlaps none (registered: it is
 * already), else merged with those it overlaps into one region. false: no memory. */
static bool pool_add(vg_segment_t *seg, vg_gpool_t *p, uint64_t lo, uint64_t hi,
                     bool registered) {
    size_t a = 0; /* pairs before a end at or before lo */
    while (a < p->nnvtx && p->nvtx[2 * a + 1] <= lo)
        a++;
    size_t b = a; /* pairs [a, b) overlap [lo, hi) */
    while (b < p->nnvtx && p->nvtx[2 * b] < hi)
        b++;
    if (a == b && !pool_room(p))
        return false;
    uint64_t mlo = lo, mhi = hi;
    for (size_t i = a; i < b; i++) {
        mlo = VG_MIN(mlo, p->nvtx[2 * i]);
        mhi = VG_MAX(mhi, p->nvtx[2 * i + 1]);
        region_unregister(p->nvtx[2 * i]);
    }
    if (registered && a != b)
        region_unregister(lo);
    if (!registered || a != b)
        region_register(seg, mlo, mhi);
    if (a != b)
        region_name(mlo, k_pool_name);
    size_t keep = p->nnvtx - b;
    memmove(&p->nvtx[2 * (a + 1)], &p->nvtx[2 * b], 2 * keep * sizeof *p->nvtx);
    p->nvtx[2 * a] = mlo;
    p->nvtx[2 * a + 1] = mhi;
    p->nnvtx = a + 1 + keep;
    return true;
}

/* Is [lo, hi) one of p's regions, as it is (not merged)? */
static bool pool_has_alone(const vg_gpool_t *p, uint64_t lo, uint64_t hi) {
    for (size_t i = 0; i < p->nnvtx; i++)
        if (p->nvtx[2 * i] == lo)
            return p->nvtx[2 * i + 1] == hi;
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------- */

/* Per site, the location of its first frame as far as it is known without the symbolizer:
 * made at the site's first allocation, made again once a report (or the exit) has
 * symbolized the frame. A text replaced is kept (another thread may be reading it). */
typedef struct site_name {
    bool final;
    struct site_name *older; /* (in g_replaced) */
    char text[];
} site_name_t;
static _Atomic(site_name_t *) *g_site_text;
static _Atomic(site_name_t *) g_replaced;

static void site_texts_init(void) { g_site_text = calloc(VG_MAX_SITES, sizeof *g_site_text); }

static uintptr_t first_frame(uint32_t site) {
    const vg_site_t *s = site ? vg__site(site) : NULL;
    return s && s->nframes ? s->frames[0] : 0;
}

/* Where a frame's text says it is: "file.c:40" from "func (file.c:40)" (the outermost
 * function's, for inlined code), else the symbol: "func+0x1c" from "func+0x1c (lib.so)". */
static void location(const char *t, char *out, size_t n) {
    for (const char *p; (p = strstr(t, " inlined into "));)
        t = p + 14;
    const char *open = NULL;
    for (const char *p = t; (p = strstr(p, " (")); p++)
        open = p;
    const char *close = open ? strchr(open, ')') : NULL;
    if (open && close && memchr(open, ':', (size_t)(close - open))) {
        const char *file = open + 2; /* (its base name: "app.c:40") */
        for (const char *p = file; p < close; p++)
            if (*p == '/')
                file = p + 1;
        snprintf(out, n, "%.*s", (int)(close - file), file);
    }
    else
        snprintf(out, n, "%.*s", open ? (int)(open - t) : (int)strlen(t), t);
}

static const char *site_text(uint32_t site) {
    uintptr_t f = first_frame(site);
    if (!f || !g_site_text || site >= VG_MAX_SITES)
        return NULL;
    site_name_t *e = atomic_load_explicit(&g_site_text[site], memory_order_acquire);
    if (e && (e->final || !vg__symbolize_known(f)))
        return e->text;
    char buf[512], loc[256];
    bool final = vg__symbolize_quick(f, buf, sizeof buf);
    location(buf, loc, sizeof loc);
    site_name_t *mine = malloc(sizeof *mine + strlen(loc) + 1);
    if (!mine)
        return e ? e->text : NULL;
    mine->final = final;
    strcpy(mine->text, loc);
    site_name_t *was = e;
    if (!atomic_compare_exchange_strong(&g_site_text[site], &was, mine)) {
        free(mine); /* (another thread made it first) */
        return was->text;
    }
    if (e) { /* (kept: another thread may read it) */
        e->older = atomic_load(&g_replaced);
        while (!atomic_compare_exchange_weak(&g_replaced, &e->older, e)) {
        }
    }
    return mine->text;
}

/* "vramguard #17, 4000 bytes, app.c:40" ("#17 (device 1)" off device 0): at most
 * VG_NVTX_NAME_MAX characters, as compute-sanitizer refuses a longer name; a location
 * too long keeps its end (the line). */
static void name_text(const vg_heap_t *h, const vg_block_t *b, const char *loc, char *out,
                      size_t n) {
    _Static_assert(VG_NVTX_NAME_MAX < 640, "name buffers hold VG_NVTX_NAME_MAX characters");
    int k = h->device ? snprintf(out, n, "vramguard #%llu (device %d), %llu bytes",
                                 (unsigned long long)b->id, h->device,
                                 (unsigned long long)b->requested)
                      : snprintf(out, n, "vramguard #%llu, %llu bytes",
                                 (unsigned long long)b->id, (unsigned long long)b->requested);
    if (k >= VG_NVTX_NAME_MAX)
        out[VG_NVTX_NAME_MAX] = '\0';
    if (!loc || !*loc || k + 2 >= VG_NVTX_NAME_MAX)
        return;
    size_t room = VG_NVTX_NAME_MAX - (size_t)k - 2, len = strlen(loc);
    const char *l = len > room ? loc + (len - room) : loc;
    out[k] = ',';
    out[k + 1] = ' ';
    memcpy(out + k + 2, l, strlen(l) + 1);
}

/* Does block b (allocated) have a region of its own, at b->user? */
static bool own_region(const vg_block_t *b) {
    if (!b->seg->nvtx_heap || b->requested == 0)
        return false;
    return !b->gpool || pool_has_alone(b->gpool, b->user, b->user + b->requested);
}

void vg__nvtx_region_added_slow(vg_heap_t *h, vg_block_t *b) {
    (void)h;
    vg_segment_t *seg = b->seg;
    if (!seg->nvtx_heap || b->requested == 0) /* (a 0-byte allocation: nothing to touch) */
        return;
    if (!b->gpool)
        region_register(seg, b->user, b->user + b->requested);
    else if (!pool_add(seg, b->gpool, b->user, b->user + b->requested, false))
        degrade(seg, "no host memory for a CUDA graph pool's regions");
}

void vg__nvtx_region_named_slow(vg_heap_t *h, vg_block_t *b) {
    if (!own_region(b))
        return;
    char text[640];
    name_text(h, b, site_text(b->site), text, sizeof text);
    region_name(b->user, text);
}

void vg__nvtx_region_removed_slow(vg_heap_t *h, vg_block_t *b) {
    (void)h;
    if (b->seg->nvtx_heap && b->requested && !b->gpool) /* (a pool's stay: a replay...) */
        region_unregister(b->user);
}

void vg__nvtx_pool_adopted_slow(vg_heap_t *h, vg_block_t *b) {
    (void)h;
    if (b->seg->nvtx_heap && b->requested &&
        !pool_add(b->seg, b->gpool, b->user, b->user + b->requested, true))
        degrade(b->seg, "no host memory for a CUDA graph pool's regions");
}

void vg__nvtx_pool_released_slow(vg_heap_t *h, vg_gpool_t *p) {
    for (size_t i = 0; i < p->nnvtx; i++) {
        const vg_segment_t *seg = vg__heap_segment_at(h, p->nvtx[2 * i]);
        if (seg && seg->nvtx_heap) /* (a degraded segment's went with its heap) */
            region_unregister(p->nvtx[2 * i]);
    }
    free(p->nvtx);
    p->nvtx = NULL;
    p->nnvtx = p->capnvtx = 0;
}
