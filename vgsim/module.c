/* module.c — vgsim: modules, the kernel registry, launches, and built-in kernels.
 *
 * cuModuleLoadData takes PTX text. Each `.entry NAME(...)` becomes a function; its
 * `.param` list gives the size of every argument, so that cuLaunchKernel can copy the
 * arguments at launch time as the real driver does (the caller may reuse them at once).
 * The host implementation is looked up by name at launch: registered by the program
 * (vgsim_register_kernel) or built in (vramguard's checker kernel).
 *
 * cuLibraryLoadData loads the same PTX as a library, whose kernels (CUkernel) are
 * launched as the CUDA runtime launches its own, cast to CUfunction. The cuFunc*
 * queries refuse such a handle (CUDA_ERROR_INVALID_HANDLE, as the driver's
 * cuFuncGetAttribute does) and the cuKernel* ones answer; cuKernelGetFunction gives the
 * kernel's function, which the cuFunc* queries take.
 */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/guard_abi.h"
#include "../kernels/memcheck_abi.h"

#define MAX_KERNELS 256
#define MAX_NAME 128

typedef struct kernel_reg {
    char name[MAX_NAME];
    vgsim_kernel_fn fn;
} kernel_reg_t;

static kernel_reg_t g_kernels[MAX_KERNELS];
static int g_nkernels;
static pthread_mutex_t g_kernels_lock = PTHREAD_MUTEX_INITIALIZER;

enum { SIM_FUNCTION = 0x46554e43, SIM_KERNEL = 0x4b45524e }; /* a handle's kind */

typedef struct sim_func {
    uint32_t kind; /* SIM_FUNCTION or SIM_KERNEL */
    struct sim_func *function; /* a kernel's function (cuKernelGetFunction) */
    struct sim_module *module; /* the module (or library) it came from */
    char name[MAX_NAME];
    vgsim_kernel_fn impl; /* cached at the first launch */
    int nparams;
    size_t sizes[VGSIM_MAX_PARAMS];
    size_t aligns[VGSIM_MAX_PARAMS];
} sim_func_t;

typedef struct sim_module {
    int nfuncs;
    sim_func_t *funcs;
    sim_func_t *kernels; /* a library's: the same entries as SIM_KERNEL handles */
} sim_module_t;

/* The function or kernel behind a launchable handle, or NULL. */
static sim_func_t *launchable(CUfunction f) {
    sim_func_t *fn = (sim_func_t *)f;
    return fn && (fn->kind == SIM_FUNCTION || fn->kind == SIM_KERNEL) ? fn : NULL;
}

/* A CUfunction the cuFunc* queries take (not a kernel cast to one), or NULL. */
static sim_func_t *function(CUfunction f) {
    sim_func_t *fn = (sim_func_t *)f;
    return fn && fn->kind == SIM_FUNCTION ? fn : NULL;
}

/* A library's kernel, which the cuKernel* calls take, or NULL. */
static sim_func_t *kernel_of(CUkernel k) {
    sim_func_t *fn = (sim_func_t *)k;
    return fn && fn->kind == SIM_KERNEL ? fn : NULL;
}

VGSIM_API int vgsim_register_kernel(const char *name, vgsim_kernel_fn fn) {
    if (!name || !fn || strlen(name) >= MAX_NAME)
        return -1;
    pthread_mutex_lock(&g_kernels_lock);
    int rc = -1;
    for (int i = 0; i < g_nkernels; i++) {
        if (strcmp(g_kernels[i].name, name) == 0) {
            g_kernels[i].fn = fn;
            rc = 0;
        }
    }
    if (rc != 0 && g_nkernels < MAX_KERNELS) {
        snprintf(g_kernels[g_nkernels].name, MAX_NAME, "%s", name);
        g_kernels[g_nkernels].fn = fn;
        g_nkernels++;
        rc = 0;
    }
    pthread_mutex_unlock(&g_kernels_lock);
    return rc;
}

static vgsim_kernel_fn lookup_kernel(const char *name) {
    pthread_mutex_lock(&g_kernels_lock);
    vgsim_kernel_fn fn = NULL;
    for (int i = 0; i < g_nkernels && !fn; i++)
        if (strcmp(g_kernels[i].name, name) == 0)
            fn = g_kernels[i].fn;
    pthread_mutex_unlock(&g_kernels_lock);
    return fn;
}

/* ---------------------------------------------------------------------------------------
 * PTX parsing: just the entries and their parameter sizes.
 * ------------------------------------------------------------------------------------- */

static size_t type_size(const char *t) {
    /* .u8 .s8 .b8 .u16 .f16 .u32 .f32 .b32 .u64 .s64 .f64 .b64 ... */
    while (*t && !isdigit((unsigned char)*t))
        t++;
    int bits = atoi(t);
    return bits >= 8 ? (size_t)bits / 8 : 0;
}

/* Parse "(.param .u64 a, .param .align 8 .b8 b[16], ...)" starting at p (after '('). */
static const char *parse_params(const char *p, sim_func_t *f) {
    f->nparams = 0;
    while (*p && *p != ')') {
        const char *param = strstr(p, ".param");
        const char *close = strchr(p, ')');
        if (!param || (close && param > close))
            break;
        p = param + 6;
        size_t align = 0, size = 0, count = 1;
        char word[64];
        for (;;) {
            while (isspace((unsigned char)*p))
                p++;
            if (*p != '.')
                break;
            int n = 0;
            while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != ')' &&
                   n < (int)sizeof word - 1)
                word[n++] = *p++;
            word[n] = '\0';
            if (strcmp(word, ".align") == 0) {
                while (isspace((unsigned char)*p))
                    p++;
                align = (size_t)strtoul(p, (char **)&p, 10);
            } else if (strcmp(word, ".ptr") != 0 && strcmp(word, ".global") != 0 &&
                       strcmp(word, ".const") != 0 && strcmp(word, ".local") != 0 &&
                       strcmp(word, ".shared") != 0) {
                size = type_size(word);
            }
        }
        while (*p && *p != ',' && *p != ')' && *p != '[')
            p++;
        if (*p == '[') {
            count = (size_t)strtoul(p + 1, (char **)&p, 10);
            while (*p && *p != ']')
                p++;
            if (*p)
                p++;
        }
        if (size == 0 || f->nparams >= VGSIM_MAX_PARAMS)
            return NULL;
        f->sizes[f->nparams] = size * count;
        f->aligns[f->nparams] = align ? align : size;
        f->nparams++;
        while (*p && *p != ',' && *p != ')')
            p++;
        if (*p == ',')
            p++;
    }
    return p;
}

/* The entries of PTX text `image` as a module of SIM_FUNCTION handles. */
static CUresult load_ptx(const void *image, sim_module_t **out) {
    const char *text = image;
    if ((unsigned char)text[0] == 0x7f && text[1] == 'E')
        return CUDA_ERROR_INVALID_IMAGE; /* cubin: vgsim runs PTX-named kernels only */
    sim_module_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (const char *p = strstr(text, ".entry"); p; p = strstr(p, ".entry")) {
        p += 6;
        while (isspace((unsigned char)*p))
            p++;
        sim_func_t f;
        memset(&f, 0, sizeof f);
        f.kind = SIM_FUNCTION;
        size_t n = 0;
        while ((isalnum((unsigned char)*p) || *p == '_' || *p == '$') && n < MAX_NAME - 1)
            f.name[n++] = *p++;
        while (isspace((unsigned char)*p))
            p++;
        if (n == 0 || *p != '(') {
            if (n > 0 && (*p == '{' || *p == '.')) { /* an entry with no parameters */
                f.nparams = 0;
            } else {
                continue;
            }
        } else if (!(p = parse_params(p + 1, &f))) {
            free(m->funcs);
            free(m);
            return CUDA_ERROR_INVALID_PTX;
        }
        sim_func_t *grown = realloc(m->funcs, (size_t)(m->nfuncs + 1) * sizeof *grown);
        if (!grown) {
            free(m->funcs);
            free(m);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        m->funcs = grown;
        m->funcs[m->nfuncs++] = f;
    }
    if (m->nfuncs == 0) {
        free(m);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    for (int i = 0; i < m->nfuncs; i++)
        m->funcs[i].module = m;
    *out = m;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = load_ptx(image, (sim_module_t **)module)) == CUDA_SUCCESS)
        sim_sanitizer_module_loaded(*module, NULL, (const char *)image);
    return r;
}

/* Context-independent loading (CUDA 12.0). JIT and library options change nothing here. */
VGSIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
                                     CUjit_option *jit_options, void **jit_values,
                                     unsigned int njit, CUlibraryOption *library_options,
                                     void **library_values, unsigned int nlibrary) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!library || !code || (njit && (!jit_options || !jit_values)) ||
        (nlibrary && (!library_options || !library_values)))
        return CUDA_ERROR_INVALID_VALUE;
    sim_module_t *m;
    if ((r = load_ptx(code, &m)) != CUDA_SUCCESS)
        return r;
    m->kernels = malloc((size_t)m->nfuncs * sizeof *m->kernels);
    if (!m->kernels) {
        free(m->funcs);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < m->nfuncs; i++) {
        m->kernels[i] = m->funcs[i];
        m->kernels[i].kind = SIM_KERNEL;
        m->kernels[i].function = &m->funcs[i];
    }
    *library = (CUlibrary)m;
    sim_sanitizer_module_loaded((CUmodule)m, *library, (const char *)code);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuLibraryUnload(CUlibrary library) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_module_t *m = (sim_module_t *)library;
    /* (Kernels may still be queued on a stream: the memory is kept, as for modules.) */
    return m && m->kernels ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

VGSIM_API CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_module_t *m = (sim_module_t *)library;
    if (!kernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!m || !m->kernels)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < m->nfuncs; i++) {
        if (strcmp(m->kernels[i].name, name) == 0) {
            *kernel = (CUkernel)&m->kernels[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* The kernel's function in the current context: vgsim has one copy of each. */
VGSIM_API CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_func_t *k = kernel_of(kernel);
    if (!func)
        return CUDA_ERROR_INVALID_VALUE;
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *func = (CUfunction)k->function;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuModuleUnload(CUmodule module) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_module_t *m = (sim_module_t *)module;
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_sanitizer_module_unloading(module);
    /* Functions may still be queued on a stream: keep the memory (a few bytes). */
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuModuleGetFunction(CUfunction *func, CUmodule module, const char *name) {
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_module_t *m = (sim_module_t *)module;
    if (!func || !m || !name)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < m->nfuncs; i++) {
        if (strcmp(m->funcs[i].name, name) == 0) {
            *func = (CUfunction)&m->funcs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

VGSIM_API CUresult cuFuncGetName(const char **name, CUfunction func) {
    if (!name || !func)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_func_t *f = function(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuKernelGetName(const char **name, CUkernel kernel) {
    if (!name || !kernel)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_func_t *k = kernel_of(kernel);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

static size_t align_to(size_t x, size_t a) { return a ? (x + a - 1) / a * a : x; }

/* CUDA 12.4's cuFuncGetParamInfo: where parameter `index` lies in the parameter buffer.
 * An index past the last parameter is CUDA_ERROR_INVALID_VALUE, as on the driver. */
static CUresult param_info(const sim_func_t *f, size_t index, size_t *offset, size_t *size) {
    if (!offset || !size || index >= (size_t)f->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    size_t off = 0;
    for (size_t i = 0; i < index; i++)
        off = align_to(off, f->aligns[i]) + f->sizes[i];
    *offset = align_to(off, f->aligns[index]);
    *size = f->sizes[index];
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuFuncGetParamInfo(CUfunction func, size_t index, size_t *offset,
                                      size_t *size) {
    if (!func)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_func_t *f = function(func);
    return f ? param_info(f, index, offset, size) : CUDA_ERROR_INVALID_HANDLE;
}

/* CUDA 12.4's cuKernelGetParamInfo: the same for a library's kernel. */
VGSIM_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t index, size_t *offset,
                                        size_t *size) {
    if (!kernel)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_func_t *k = kernel_of(kernel);
    return k ? param_info(k, index, offset, size) : CUDA_ERROR_INVALID_HANDLE;
}

/* ---------------------------------------------------------------------------------------
 * Launches
 * ------------------------------------------------------------------------------------- */


VGSIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                  unsigned int gz, unsigned int bx, unsigned int by,
                                  unsigned int bz, unsigned int shmem, CUstream stream,
                                  void **params, void **extra) {
    sim_ctx_t *c;
    CUresult r = sim_ctx_check(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_func_t *fn = launchable(f);
    if (!fn)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    sim_stream_t *s = sim_stream_resolve(c, stream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    /* (Found at the first launch; threads may launch it at once.) */
    vgsim_kernel_fn impl = __atomic_load_n(&fn->impl, __ATOMIC_ACQUIRE);
    if (!impl) {
        impl = lookup_kernel(fn->name);
        __atomic_store_n(&fn->impl, impl, __ATOMIC_RELEASE);
    }
    if (!impl) {
        sim_logf("no host implementation of kernel '%s' is registered", fn->name);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* Arguments come from kernelParams, or packed in an `extra` buffer. */
    const unsigned char *packed = NULL;
    size_t packed_size = 0;
    if (!params && extra) {
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                packed = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                packed_size = *(size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (fn->nparams > 0 && !params && !packed)
        return CUDA_ERROR_INVALID_VALUE;
    size_t total = 0;
    for (int i = 0; i < fn->nparams; i++)
        total = align_to(total, fn->aligns[i]) + fn->sizes[i];
    if (packed && packed_size < total)
        return CUDA_ERROR_INVALID_VALUE;
    sim_op_t *op = sim_op_get(s, OP_KERNEL);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned char *storage = total <= sizeof op->u.kernel.inline_args ? op->u.kernel.inline_args
                                                                      : malloc(total);
    if (!storage) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vgsim_launch_t *l = &op->u.kernel.launch;
    size_t off = 0;
    for (int i = 0; i < fn->nparams; i++) {
        off = align_to(off, fn->aligns[i]);
        memcpy(storage + off, packed ? packed + off : params[i], fn->sizes[i]);
        l->params[i] = storage + off;
        off += fn->sizes[i];
    }
    l->nparams = fn->nparams;
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
    l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
    l->shared_mem = shmem;
    op->u.kernel.fn = impl;
    op->u.kernel.name = fn->name;
    op->u.kernel.storage = storage;
    op->u.kernel.nstorage = total;
    op->u.kernel.module = (CUmodule)fn->module;
    op->u.kernel.function = f;
    /* Captured into a graph, it is not launched: its launches are the graph's (graph.c). */
    bool captured = atomic_load(&s->capture) != NULL;
    sim_patch_t patch = {sim_sanitizer_captured((CUmodule)fn->module), NULL};
    if (!captured)
        patch = sim_sanitizer_launch_begin((CUmodule)fn->module, f, fn->name, stream, l);
    op->u.kernel.patch = patch.fn;
    op->u.kernel.patch_ud = patch.ud;
    if ((r = sim_enqueue(s, op)) == CUDA_SUCCESS && !captured)
        sim_sanitizer_launch_end((CUmodule)fn->module, f, fn->name, stream, l);
    return r;
}

/* CUDA 12's cuLaunchKernelEx, what cudaLaunchKernelEx and cluster launches reach: the same
 * launch with its configuration in a struct. vgsim runs a kernel's blocks one after another
 * on the host, so the attributes that shape scheduling (cooperative, cluster dimensions,
 * priority, ...) change nothing here and are accepted as given. */
VGSIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                    void **extra) {
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    return cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ,
                          config->blockDimX, config->blockDimY, config->blockDimZ,
                          config->sharedMemBytes, config->hStream, params, extra);
}

/* A cooperative launch (grid-wide synchronisation on a GPU): vgsim runs the blocks one
 * after another, so it is a launch like any other; kernelParams are required. */
VGSIM_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shmem,
                                             CUstream stream, void **params) {
    sim_func_t *fn = launchable(f);
    if (fn && fn->nparams > 0 && !params)
        return CUDA_ERROR_INVALID_VALUE;
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Built-in kernels: vramguard's guard kernel, the host twin of kernels/guard.cu. It
 * must behave exactly as the CUDA version: same descriptors, same log records. On a GPU
 * each descriptor is a thread block, and thread blocks run in no particular order, at
 * the same time: the twins run the descriptors last first, so that a batch whose
 * result depends on their order (a fill and a check of the same bytes) fails here too,
 * as it did on an H100 (docs/gpu-validation.md).
 * ------------------------------------------------------------------------------------- */

static void guard_fill(const vg_guard_desc_t *d) {
    unsigned char *p = (unsigned char *)(uintptr_t)d->addr;
    uint64_t k = 0;
    for (; k < d->len && ((d->addr + k) & 7); k++)
        p[k] = vg_pattern_byte(d->pattern, d->addr + k);
    uint64_t word = (uint64_t)d->pattern | ((uint64_t)d->pattern << 32);
    for (; k + 8 <= d->len; k += 8)
        memcpy(p + k, &word, 8);
    for (; k < d->len; k++)
        p[k] = vg_pattern_byte(d->pattern, d->addr + k);
}

static void guard_check(const vg_guard_desc_t *d, vg_guard_log_t *log) {
    const unsigned char *p = (const unsigned char *)(uintptr_t)d->addr;
    uint64_t word = (uint64_t)d->pattern | ((uint64_t)d->pattern << 32);
    uint64_t first = UINT64_MAX, last = 0, bad = 0;
    for (uint64_t k = 0; k < d->len;) {
        if (((d->addr + k) & 7) == 0 && k + 8 <= d->len) {
            uint64_t v;
            memcpy(&v, p + k, 8);
            if (v == word) {
                k += 8;
                continue;
            }
        }
        if (p[k] != vg_pattern_byte(d->pattern, d->addr + k)) {
            if (first == UINT64_MAX)
                first = k;
            last = k;
            bad++;
        }
        k++;
    }
    if (!bad)
        return;
    uint32_t idx = __atomic_fetch_add(&log->count, 1u, __ATOMIC_RELAXED);
    vg_guard_error_t *e = &log->errors[idx % log->capacity];
    e->tag = d->tag;
    e->user = d->user;
    e->addr = d->addr;
    e->first_bad = first;
    e->last_bad = last;
    e->bad_bytes = bad;
    e->kind = d->kind;
    uint32_t w = 0;
    for (int b = 3; b >= 0; b--)
        w = (w << 8) | (first + (uint64_t)b < d->len ? p[first + (uint64_t)b] : 0u);
    e->first_word = w;
    __atomic_store_n(&e->seq, (uint64_t)idx + 1, __ATOMIC_RELEASE);
    if (d->kind & VG_KIND_REPAIR)
        guard_fill(d);
}

static void guard_one(const vg_guard_desc_t *d, uint32_t poison_max, uint32_t poison_end,
                      vg_guard_log_t *log) {
    if (g_sim.skip_guard)
        return;
    vg_guard_desc_t parts[4];
    unsigned n = 1;
    if (VG_GUARD_IS_BLOCK(d->op))
        n = vg_guard_block_parts(d, poison_max, poison_end, parts);
    else
        parts[0] = *d;
    for (unsigned k = 0; k < n; k++) {
        if (parts[k].op == VG_GUARD_FILL)
            guard_fill(&parts[k]);
        else
            guard_check(&parts[k], log);
    }
}

static void guard_check_kernel(const vgsim_launch_t *l) {
    const vg_guard_desc_t *descs = *(const vg_guard_desc_t **)l->params[0];
    unsigned n = *(const unsigned *)l->params[1];
    vg_guard_log_t *log = *(vg_guard_log_t **)l->params[2];
    for (unsigned i = n; i-- > 0;)
        guard_one(&descs[i], 0, 0, log);
}

static void guard_ranges_kernel(const vgsim_launch_t *l) {
    const vg_guard_batch_t *b = l->params[0];
    vg_guard_log_t *log = *(vg_guard_log_t **)l->params[1];
    for (uint32_t i = b->n < VG_GUARD_BATCH ? b->n : VG_GUARD_BATCH; i-- > 0;)
        guard_one(&b->d[i], b->poison_max, b->poison_end, log);
}

/* memcheck mode's shadow kernel (kernels/guard.cu, kernels/memcheck_abi.h). */
static void guard_shadow_kernel(const vgsim_launch_t *l) {
    const vg_mc_shadow_op_t *op = l->params[0];
    uint16_t *w = (uint16_t *)(uintptr_t)op->shadow;
    uint32_t *bits = (uint32_t *)(uintptr_t)op->init;
    if (g_sim.skip_guard)
        return;
    for (uint32_t i = 0; i < op->n; i++)
        w[i] = vg_mc_shadow_apply(op, i, w[i]);
    for (uint32_t i = 0; i < op->init_n; i++) {
        uint32_t m = vg_mc_init_mask(op, i);
        if (m == ~0u || m == 0)
            bits[i] = m;
        else
            __atomic_fetch_or(&bits[i], m, __ATOMIC_RELAXED);
    }
}

void sim_register_builtin_kernels(void) {
    vgsim_register_kernel("vg_guard_shadow", guard_shadow_kernel);
    vgsim_register_kernel("vg_guard_check", guard_check_kernel);
    vgsim_register_kernel("vg_guard_ranges", guard_ranges_kernel);
}
