/* sites.c — capturing stacks and interning them as allocation sites (see sites.h).
 *
 * Two unwinders (docs/decisions.md A3):
 *  - frame pointers: follow the saved-frame-pointer chain, each frame checked to lie in
 *    the thread's stack, be aligned and grow upwards, and each return address checked to
 *    lie in code (textmap.h), so a caller built without frame pointers ends the walk
 *    instead of faulting or adding garbage frames. A few nanoseconds a frame. The first
 *    frame (the caller of the allocation) is always right; deeper ones need frame
 *    pointers.
 *  - full: glibc's backtrace() (libgcc's unwinder, DWARF unwind tables): exact, slower.
 *
 * The intern table is insert-only: a slot goes from 0 to a site id once (compare and
 * swap), and a site's frames are written before its id is published, so readers need no
 * lock. A racing insert of the same stack wastes one site id (left unreachable).
 */
#define _GNU_SOURCE
#include "sites.h"

#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"
#include "pyframes.h"
#include "textmap.h"

#define SLOTS (1u << 17)

_Atomic(vg_site_t *) vg__site_chunks[VG_MAX_SITES / VG_SITE_CHUNK];
static _Atomic uint32_t g_nsites = 1; /* id 0 is the unknown site */
static _Atomic uint32_t g_slots[SLOTS];
static VG_TLS_FAST uintptr_t t_stack_lo, t_stack_hi;
static bool g_full_unwind;

static void stack_bounds(void) {
    pthread_attr_t a;
    t_stack_lo = 1;
    t_stack_hi = UINTPTR_MAX;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&a, &addr, &size) == 0) {
            t_stack_lo = (uintptr_t)addr;
            t_stack_hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&a);
    }
}

__attribute__((noinline, no_sanitize_address)) static int unwind_fp(uintptr_t *out, int max,
                                                                     int skip) {
    if (!t_stack_hi)
        stack_bounds();
    uintptr_t *fp = __builtin_frame_address(0);
    int n = 0;
    while (n < max) {
        uintptr_t f = (uintptr_t)fp;
        if (f < t_stack_lo || f + 2 * sizeof(uintptr_t) > t_stack_hi || (f & 7))
            break;
        uintptr_t ret = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (ret < 4096 || !vg__is_code(ret, !vg__in_signal_handler))
            break;
        if (skip > 0)
            skip--;
        else
            out[n++] = ret;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

int vg__unwind_from(uintptr_t pc, uintptr_t fp_addr, uintptr_t *out, int max) {
    int n = 0;
    if (max <= 0)
        return 0;
    /* Frames are return addresses, which the symboliser moves back a byte to land in the
     * call. pc is the faulting instruction itself: stored one byte on, it lands there
     * (moved back unchanged, it would name the previous instruction's line). */
    out[n++] = pc + 1;
    if (!t_stack_hi) /* the bounds are unknown on this thread: finding them is not safe here */
        return n;
    uintptr_t *fp = (uintptr_t *)fp_addr;
    while (n < max) {
        uintptr_t f = (uintptr_t)fp;
        if (f < t_stack_lo || f + 2 * sizeof(uintptr_t) > t_stack_hi || (f & 7))
            break;
        uintptr_t ret = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (ret < 4096 || !vg__is_code(ret, false))
            break;
        out[n++] = ret;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

void vg__stack_bounds_prepare(void) {
    if (!t_stack_hi)
        stack_bounds();
}

__attribute__((noinline)) static int unwind_full(uintptr_t *out, int max, int skip) {
    void *buf[VG_MAX_FRAMES + 8];
    int want = max + skip + 1;
    if (want > (int)VG_ARRAY_LEN(buf))
        want = (int)VG_ARRAY_LEN(buf);
    int got = backtrace(buf, want);
    int n = 0;
    for (int i = skip + 1; i < got && n < max; i++)
        out[n++] = (uintptr_t)buf[i];
    return n;
}

/* When vramguard is a shared library (libvramguard.so, the interposer), the code range
 * of that library: a backtrace starts at the first frame outside it, so it shows the
 * program's call (cuMemAlloc in main), not vramguard's own hooks and wrappers. Empty when
 * vramguard is linked into the executable (the CLI, tests): then the skip counts rule. */
static uintptr_t g_self_lo, g_self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    int *index = arg;
    uintptr_t me = (uintptr_t)&vg__capture_stack;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && me >= lo && me < hi) {
            if (*index > 0) { /* not the executable (always the first object) */
                g_self_lo = lo;
                g_self_hi = hi;
            }
            return 1;
        }
    }
    (*index)++;
    return 0;
}

__attribute__((noinline)) int vg__capture_stack(uintptr_t *frames, int max, int skip) {
    if (max > VG_MAX_FRAMES)
        max = VG_MAX_FRAMES;
    if (max <= 0)
        return 0;
    uintptr_t buf[VG_MAX_FRAMES + 8];
    int want = g_self_hi ? max + 8 : max;
    /* +1: this function's own frame. */
    int n = g_full_unwind ? unwind_full(buf, want, skip + 1) : unwind_fp(buf, want, skip + 1);
    int first = 0;
    while (first < n && first < 8 && buf[first] >= g_self_lo && buf[first] < g_self_hi)
        first++;
    n -= first;
    if (n > max)
        n = max;
    memcpy(frames, buf + first, (size_t)n * sizeof *frames);
    return n;
}

void vg__sites_init(void) {
    g_full_unwind = vg__opt.unwind == VG_UNWIND_FULL;
    vg__pyframes_init();
    int index = 0;
    dl_iterate_phdr(find_self, &index);
    if (g_full_unwind) { /* backtrace() loads libgcc_s on first use: do it now */
        void *buf[2];
        backtrace(buf, 2);
    }
    vg_site_t *chunk0 = calloc(VG_SITE_CHUNK, sizeof *chunk0);
    vg_site_t *expected = NULL;
    if (chunk0 && !atomic_compare_exchange_strong(&vg__site_chunks[0], &expected, chunk0))
        free(chunk0);
}

static uint64_t hash_frames(const uintptr_t *f, int n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)f[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h | 1; /* never 0 */
}

static vg_site_t *site_slot(uint32_t id) { /* the site's storage, allocating its chunk */
    uint32_t c = id / VG_SITE_CHUNK;
    vg_site_t *chunk = atomic_load_explicit(&vg__site_chunks[c], memory_order_acquire);
    if (!chunk) {
        vg_site_t *fresh = calloc(VG_SITE_CHUNK, sizeof *fresh);
        if (!fresh)
            return NULL;
        vg_site_t *expected = NULL;
        if (atomic_compare_exchange_strong(&vg__site_chunks[c], &expected, fresh)) {
            chunk = fresh;
        } else {
            free(fresh);
            chunk = expected;
        }
    }
    return &chunk[id % VG_SITE_CHUNK];
}

uint32_t vg__site_intern(const uintptr_t *frames, int n) {
    if (n <= 0)
        return 0;
    uint64_t h = hash_frames(frames, n);
    uint32_t i = (uint32_t)h & (SLOTS - 1);
    for (uint32_t probe = 0; probe < SLOTS; probe++, i = (i + 1) & (SLOTS - 1)) {
        uint32_t id = atomic_load_explicit(&g_slots[i], memory_order_acquire);
        if (id == 0) {
            uint32_t nid = atomic_fetch_add(&g_nsites, 1);
            if (nid >= VG_MAX_SITES)
                return 0;
            vg_site_t *s = site_slot(nid);
            if (!s)
                return 0;
            s->hash = h;
            s->nframes = (uint32_t)n;
            memcpy(s->frames, frames, (size_t)n * sizeof *frames);
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&g_slots[i], &expected, nid,
                                                        memory_order_release,
                                                        memory_order_acquire))
                return nid;
            s->hash = 0; /* lost the race: this id stays unused */
            s->nframes = 0;
            id = expected;
        }
        vg_site_t *s = vg__site(id);
        if (s && s->hash == h && s->nframes == (uint32_t)n &&
            memcmp(s->frames, frames, (size_t)n * sizeof *frames) == 0)
            return id;
    }
    return 0;
}

__attribute__((noinline)) uint32_t vg__site_here(int skip) {
    uintptr_t frames[VG_MAX_FRAMES];
    int n = 0;
    if (VG_UNLIKELY(vg__pyframes_on)) /* a Python program: its lines, if this thread runs any */
        n = vg__pyframes_capture(frames, VG_MIN((int)vg__opt.stack_depth, VG_MAX_FRAMES));
    if (n == 0)
        n = vg__capture_stack(frames, (int)vg__opt.stack_depth, skip + 1);
    return vg__site_intern(frames, n);
}

uint32_t vg__site_count(void) {
    uint32_t n = atomic_load(&g_nsites);
    return n > VG_MAX_SITES ? VG_MAX_SITES : n;
}
