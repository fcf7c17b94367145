/* copy_shape.h — the interposer's view of a 2D or 3D copy, from any of its parameter
 * structures (hooks_copy_nd.c, hooks_copy_batch.c): where each side's bytes lie, and
 * whether a host side is one range the race guard can take.
 *
 * The race guard protects whole pages, so it takes a host side only when its bytes are
 * one range: a single row, or rows (and slices) back to back. The pages of a
 * sub-rectangle would hold bytes between its rows that are not the copy's, which the
 * program may touch at will: such copies are not guarded.
 */
#ifndef VG_PRELOAD_COPY_SHAPE_H
#define VG_PRELOAD_COPY_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "preload.h"

/* One side of a copy: row (y, z) of the copy starts at
 * base + ((z + side.z) * height + y + side.y) * pitch + x. */
typedef struct side {
    CUmemorytype type; /* host, device, unified (either), or an array */
    uint64_t base;     /* host pointer or device pointer */
    size_t x, y, z, pitch, height;
} side_t;

typedef struct shape {
    side_t src, dst;
    size_t width, rows, depth; /* WidthInBytes, Height, Depth */
} shape_t;

/* The address of the side's first byte (the driver has accepted the copy: it is one). */
static inline uint64_t first_byte(const side_t *s) {
    return s->base + (s->z * s->height + s->y) * s->pitch + s->x;
}

static inline bool on_device(const side_t *s) {
    return s->type == CU_MEMORYTYPE_DEVICE ||
           (s->type == CU_MEMORYTYPE_UNIFIED && vgp_device_memory(s->base));
}

static inline uint64_t bytes_of(const shape_t *c) {
    return (uint64_t)c->width * c->rows * c->depth;
}

/* The bytes from the side's first byte to its last (its rows, and the pitch between
 * them): the span whose ends a range check takes (access.h). */
static inline uint64_t span_of(const side_t *s, const shape_t *c) {
    if (!c->width || !c->rows || !c->depth)
        return 0;
    uint64_t height = s->height ? s->height : c->rows; /* (a 2D copy: its own rows) */
    return ((uint64_t)(c->depth - 1) * height + (c->rows - 1)) * s->pitch + c->width;
}

/* Are the device sides of copy c fine (vgp_range_ok)? Sides in host memory or arrays are
 * not vramguard's; a unified side is looked up (host memory is not in its heaps). Copy
 * `index` of a batch of `count` (count 0: no batch). Inlined into the hook. */
VGP_INLINE bool sides_ok(const shape_t *c, const char *call, unsigned index, unsigned count,
                         CUstream s) {
    const side_t *sides[2] = {&c->src, &c->dst};
    for (int k = 0; k < 2; k++) {
        const side_t *d = sides[k];
        if (d->type != CU_MEMORYTYPE_DEVICE && d->type != CU_MEMORYTYPE_UNIFIED)
            continue;
        vg_access_t a = {call, k ? "destination" : "source", index, count, k == 1,
                         first_byte(d), span_of(d, c), s};
        if (!vgp_range_ok(&a))
            return false;
    }
    return true;
}

/* The side's bytes as one host range, when they are one (see the header). */
static inline void *host_span(const side_t *s, const shape_t *c, size_t *n) {
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_UNIFIED)
        return NULL;
    bool one_row = c->rows == 1 && c->depth == 1;
    bool packed = s->pitch == c->width && (c->depth == 1 || s->height == c->rows);
    if (!one_row && !packed)
        return NULL;
    *n = bytes_of(c);
    return (void *)(uintptr_t)first_byte(s);
}

#endif /* VG_PRELOAD_COPY_SHAPE_H */
