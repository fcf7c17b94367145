/* hooks_copy_batch.c — batched copies: cuMemcpyBatchAsync and cuMemcpy3DBatchAsync (CUDA
 * 12.8, which RMM, cuDF, NCCL's copy-engine collectives and vLLM's KV-cache offload use for
 * their copies), CUDA 13's _v2 and CUDA 12.8's versions with a failIdx argument, with
 * their per-thread twins.
 *
 * Each copy of a batch gets the steps of an asynchronous copy (hooks_copy.c): the guard
 * work waiting on the stream is launched before the batch, each copy is recorded beside
 * the kernels ("cuMemcpyBatchAsync (copy 3 of 8) of 4096 bytes", its device sides as
 * arguments, one call site for all), and its pinned host sides get the race guard — the
 * source only when the copy may read it after the call returns (srcAccessOrder STREAM or
 * ANY; with DURING_API_CALL the program may reuse it at once), the destination always,
 * since it is written in stream order.
 *
 * A copy of a linear batch between two devices that cannot reach each other's memory,
 * where a side is vramguard's pages, would be refused by the driver (it stages such a copy
 * of cuMemAlloc memory): it is made with cuMemcpyPeerAsync on the stream instead, before
 * the rest of the batch (docs/decisions.md A11), as the plain copies are. Not done for a
 * 3D batch: its copies between such devices are refused.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>

#include "base/common.h"
#include "alloc/heap.h"
#include "diag/report.h"
#include "copy_shape.h"
#include "hooks.h"
#include "preload.h"
#include "vramguard.h"

/* The race guard's tokens, two per copy; none (NULL) if there is no memory for them. */
typedef struct tokens {
    uintptr_t *t;
    uintptr_t small[16];
} tokens_t;

static uintptr_t *tokens_get(tokens_t *k, size_t copies) {
    if (copies <= sizeof k->small / sizeof k->small[0] / 2)
        k->t = k->small;
    else
        k->t = copies < SIZE_MAX / 2 / sizeof(uintptr_t) ? calloc(2 * copies, sizeof(uintptr_t))
                                                          : NULL;
    return k->t;
}

static void tokens_put(tokens_t *k) {
    if (k->t != k->small)
        free(k->t);
}

/* Before the driver's call, copy c of the batch: the race guard of its pinned host sides
 * (the source only when it may be read after the call). */
static void guard_copy(const shape_t *c, CUmemcpySrcAccessOrder order, const char *call,
                       CUstream s, uintptr_t tok[2]) {
    size_t n;
    void *h;
    tok[0] = tok[1] = 0;
    if (order != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && (h = host_span(&c->src, c, &n)))
        tok[0] = vgp_race_before(h, n, true, s, call);
    if ((h = host_span(&c->dst, c, &n)))
        tok[1] = vgp_race_before(h, n, false, s, call);
}

/* After the batch was queued: copy i of count recorded beside the kernels, from `site`. */
static void note_copy(const shape_t *c, const char *call, size_t i, size_t count, CUstream s,
                      uint32_t site) {
    unsigned n = count > UINT_MAX ? UINT_MAX : (unsigned)count;
    vg__copy_note(call, i < n ? (unsigned)i : n - 1, n, s, site,
                  on_device(&c->dst) ? first_byte(&c->dst) : 0,
                  on_device(&c->src) ? first_byte(&c->src) : 0, bytes_of(c));
}

/* Copy i of a batch, and when it reads its source (*cursor: state a walk from i = 0
 * upwards may keep, 0 at its start). */
typedef shape_t (*copy_at_fn)(const void *batch, size_t i, size_t *cursor,
                              CUmemcpySrcAccessOrder *order);

/* Are every copy's device ranges fine (copy_shape.h sides_ok)? Each bad one is reported;
 * *fail (if not NULL) gets the first one's index, as the driver's failIdx does. */
VGP_INLINE bool batch_ranges_ok(const void *b, size_t n, copy_at_fn at, const char *call,
                                CUstream s, size_t *fail) {
    bool ok = true;
    size_t cursor = 0;
    unsigned count = n > UINT_MAX ? UINT_MAX : (unsigned)n;
    for (size_t i = 0; i < n; i++) {
        CUmemcpySrcAccessOrder order;
        shape_t c = at(b, i, &cursor, &order);
        if (!sides_ok(&c, call, i < count ? (unsigned)i : count - 1, count, s)) {
            if (ok && fail)
                *fail = i;
            ok = false;
        }
    }
    return ok;
}

/* Before the driver's call: the guard work waiting on s, then the race guard of each
 * copy's pinned host sides (tokens in *k). */
VGP_INLINE void batch_before(tokens_t *k, const void *b, size_t n, copy_at_fn at,
                             const char *call, CUstream s) {
    vg__guard_flush_stream(s);
    uintptr_t *tok = tokens_get(k, n);
    size_t cursor = 0;
    for (size_t i = 0; tok && i < n; i++) {
        CUmemcpySrcAccessOrder order;
        shape_t c = at(b, i, &cursor, &order);
        guard_copy(&c, order, call, s, &tok[2 * i]);
    }
}

/* After it returned r: the race guards released in stream order, and each copy recorded
 * beside the kernels. Inlined into the hook, whose caller is the copies' site. */
VGP_INLINE CUresult batch_after(CUresult r, tokens_t *k, const void *b, size_t n,
                                copy_at_fn at, const char *call, CUstream s) {
    for (size_t i = 0; k->t && i < 2 * n; i++)
        vgp_race_after(k->t[i], r, s);
    tokens_put(k);
    if (r == CUDA_SUCCESS) {
        uint32_t site = vgp_call_site();
        size_t cursor = 0;
        for (size_t i = 0; i < n; i++) {
            CUmemcpySrcAccessOrder order;
            shape_t c = at(b, i, &cursor, &order);
            note_copy(&c, call, i, n, s, site);
        }
    }
    return vgp_check(r, call);
}

/* ---------------------------------------------------------------------------------------
 * cuMemcpyBatchAsync
 * ------------------------------------------------------------------------------------- */

typedef struct linear {
    CUdeviceptr *dsts, *srcs;
    size_t *sizes, count;
    CUmemcpyAttributes *attrs;
    size_t *idxs, nattrs;
} linear_t;


/* The source access order of copy i, found walking i upwards from 0 (*k: the attribute
 * entry so far). Malformed lists, which the driver refuses, read as STREAM. */
static CUmemcpySrcAccessOrder linear_order(const linear_t *b, size_t i, size_t *k) {
    if (!b->attrs || !b->idxs || b->nattrs == 0 || b->nattrs > b->count)
        return CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    while (*k + 1 < b->nattrs && b->idxs[*k + 1] <= i)
        ++*k;
    return b->attrs[*k].srcAccessOrder;
}

/* Copy i as a one-row copy between unified addresses (a copy_at_fn; the cursor is the
 * attribute entry). */
static shape_t linear_copy(const void *batch, size_t i, size_t *entry,
                           CUmemcpySrcAccessOrder *order) {
    const linear_t *b = batch;
    *order = linear_order(b, i, entry);
    side_t d = {CU_MEMORYTYPE_UNIFIED, b->dsts[i], 0, 0, 0, b->sizes[i], 0};
    side_t s = {CU_MEMORYTYPE_UNIFIED, b->srcs[i], 0, 0, 0, b->sizes[i], 0};
    return (shape_t){s, d, b->sizes[i], 1, 1};
}

/* The attribute lists are as the driver requires (first index 0, increasing, below the
 * count, each source order valid). */
static bool attrs_ok(const linear_t *b) {
    if (!b->attrs || !b->idxs || b->nattrs == 0 || b->nattrs > b->count || b->idxs[0] != 0)
        return false;
    for (size_t k = 0; k < b->nattrs; k++) {
        CUmemcpySrcAccessOrder o = b->attrs[k].srcAccessOrder;
        if ((k > 0 && b->idxs[k] <= b->idxs[k - 1]) || b->idxs[k] >= b->count ||
            o < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return false;
    }
    return true;
}

/* The copies of b that need a peer copy (vg__copy_needs_peer) made with
 * cuMemcpyPeerAsync on s, and the others moved into *rest, each with its attributes as an
 * entry of its own (map[j]: the index in b of rest's copy j). False (nothing done) when no
 * copy needs it, which is known at once with one device, or when the batch is one the
 * driver refuses anyway. Else *r is the first peer copy's failure (its index in *fail) or
 * CUDA_SUCCESS, and the caller frees *map, which holds rest's arrays too. */
static bool peer_copies_apart(const linear_t *b, CUstream s, linear_t *rest, size_t **map,
                              size_t *fail, CUresult *r) {
    CUcontext dctx, sctx;
    size_t i = 0, n = b->count, entry = 0;
    while (i < n && !vg__copy_needs_peer(b->dsts[i], b->srcs[i], &dctx, &sctx))
        i++;
    if (i == n || !attrs_ok(b))
        return false;
    size_t each = 2 * sizeof(CUdeviceptr) + 3 * sizeof(size_t) + sizeof(CUmemcpyAttributes);
    *map = n < SIZE_MAX / each ? malloc(n * each) : NULL;
    if (!*map) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return true;
    }
    CUdeviceptr *ptrs = (CUdeviceptr *)(*map + 3 * n);
    *rest = (linear_t){ptrs, ptrs + n, *map + n, 0,
                       (CUmemcpyAttributes *)(ptrs + 2 * n), *map + 2 * n, 0};
    *r = CUDA_SUCCESS;
    for (i = 0; i < n && *r == CUDA_SUCCESS; i++) {
        linear_order(b, i, &entry);
        if (vg__copy_needs_peer(b->dsts[i], b->srcs[i], &dctx, &sctx)) {
            *r = vg__cuMemcpyPeerAsync(b->dsts[i], dctx, b->srcs[i], sctx, b->sizes[i], s);
            if (*r != CUDA_SUCCESS && fail)
                *fail = i;
            continue;
        }
        size_t j = rest->count++;
        rest->dsts[j] = b->dsts[i];
        rest->srcs[j] = b->srcs[i];
        rest->sizes[j] = b->sizes[i];
        rest->attrs[j] = b->attrs[entry];
        rest->idxs[j] = j;
        (*map)[j] = i;
    }
    rest->nattrs = rest->count;
    return true;
}

typedef CUresult (*batch_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                             CUmemcpyAttributes *, size_t *, size_t, CUstream);
typedef CUresult (*batch_fail_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                                  CUmemcpyAttributes *, size_t *, size_t, size_t *, CUstream);

/* `fail_arg`: CUDA 12.8's signature, with failIdx (`fail`). Inlined into each hook. */
VGP_INLINE CUresult linear(void *f, bool fail_arg, const linear_t *b, size_t *fail,
                           CUstream s) {
#define CALL(b, fail)                                                                       \
    (fail_arg ? ((batch_fail_fn)f)((b)->dsts, (b)->srcs, (b)->sizes, (b)->count, (b)->attrs, \
                                   (b)->idxs, (b)->nattrs, fail, s)                         \
              : ((batch_fn)f)((b)->dsts, (b)->srcs, (b)->sizes, (b)->count, (b)->attrs,     \
                              (b)->idxs, (b)->nattrs, s))
    static const char call[] = "cuMemcpyBatchAsync";
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready() || !b->dsts || !b->srcs || !b->sizes || b->count == 0)
        return CALL(b, fail);
    if (!batch_ranges_ok(b, b->count, linear_copy, call, s, fail))
        return CUDA_ERROR_INVALID_VALUE;
    tokens_t k;
    batch_before(&k, b, b->count, linear_copy, call, s);
    CUresult r = CUDA_SUCCESS;
    linear_t rest;
    size_t *map = NULL;
    if (!peer_copies_apart(b, s, &rest, &map, fail, &r)) {
        r = CALL(b, fail);
    } else if (r == CUDA_SUCCESS && rest.count > 0) {
        r = CALL(&rest, fail);
        if (r != CUDA_SUCCESS && fail && *fail < rest.count)
            *fail = map[*fail];
    }
    free(map);
    return batch_after(r, &k, b, b->count, linear_copy, call, s);
#undef CALL
}

VG_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                      size_t count, CUmemcpyAttributes *attrs,
                                      size_t *attrsIdxs, size_t numAttrs, CUstream s) {
    static void *next;
    linear_t b = {dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs};
    return linear(vgp_next("cuMemcpyBatchAsync_v2", &next), false, &b, NULL, s);
}

VG_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                           size_t count, CUmemcpyAttributes *attrs,
                                           size_t *attrsIdxs, size_t numAttrs, CUstream s) {
    return cuMemcpyBatchAsync_v2(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs,
                                 VGP_PT(s));
}

VG_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                   size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                   size_t numAttrs, size_t *failIdx, CUstream s) {
    static void *next;
    linear_t b = {dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs};
    return linear(vgp_next("cuMemcpyBatchAsync", &next), true, &b, failIdx, s);
}

VG_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                        size_t count, CUmemcpyAttributes *attrs,
                                        size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                        CUstream s) {
    return cuMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx,
                              VGP_PT(s));
}

/* ---------------------------------------------------------------------------------------
 * cuMemcpy3DBatchAsync
 * ------------------------------------------------------------------------------------- */

/* An operand as a side of a 3D copy of extent e: a pointer (rows rowLength bytes apart,
 * 0: packed; layers layerHeight rows, 0: packed), or an array (its linear side unknown). */
static side_t operand_side(const CUmemcpy3DOperand *o, const CUextent3D *e) {
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return (side_t){CU_MEMORYTYPE_ARRAY, 0, 0, 0, 0, 0, 0};
    size_t pitch = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t height = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    return (side_t){CU_MEMORYTYPE_UNIFIED, o->op.ptr.ptr, 0, 0, 0, pitch, height};
}

/* Op i of the list (a copy_at_fn; no cursor needed). */
static shape_t op_shape(const void *ops, size_t i, size_t *cursor,
                        CUmemcpySrcAccessOrder *order) {
    (void)cursor;
    const CUDA_MEMCPY3D_BATCH_OP *op = (const CUDA_MEMCPY3D_BATCH_OP *)ops + i;
    const CUextent3D *e = &op->extent;
    *order = op->srcAccessOrder;
    return (shape_t){operand_side(&op->src, e), operand_side(&op->dst, e), e->width,
                     e->height, e->depth};
}

typedef CUresult (*batch_3d_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long,
                                CUstream);
typedef CUresult (*batch_3d_fail_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *,
                                     unsigned long long, CUstream);

VGP_INLINE CUresult boxes(void *f, bool fail_arg, size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                          size_t *fail, unsigned long long flags, CUstream s) {
#define CALL                                                                                \
    (fail_arg ? ((batch_3d_fail_fn)f)(n, ops, fail, flags, s)                               \
              : ((batch_3d_fn)f)(n, ops, flags, s))
    static const char call[] = "cuMemcpy3DBatchAsync";
    if (!f)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgp_ready() || !ops || n == 0)
        return CALL;
    if (!batch_ranges_ok(ops, n, op_shape, call, s, fail))
        return CUDA_ERROR_INVALID_VALUE;
    tokens_t k;
    batch_before(&k, ops, n, op_shape, call, s);
    CUresult r = CALL;
    return batch_after(r, &k, ops, n, op_shape, call, s);
#undef CALL
}

VG_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                        unsigned long long flags, CUstream s) {
    static void *next;
    return boxes(vgp_next("cuMemcpy3DBatchAsync_v2", &next), false, numOps, opList, NULL,
                 flags, s);
}

VG_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                             unsigned long long flags, CUstream s) {
    return cuMemcpy3DBatchAsync_v2(numOps, opList, flags, VGP_PT(s));
}

VG_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                     size_t *failIdx, unsigned long long flags, CUstream s) {
    static void *next;
    return boxes(vgp_next("cuMemcpy3DBatchAsync", &next), true, numOps, opList, failIdx,
                 flags, s);
}

VG_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                          size_t *failIdx, unsigned long long flags,
                                          CUstream s) {
    return cuMemcpy3DBatchAsync(numOps, opList, failIdx, flags, VGP_PT(s));
}
