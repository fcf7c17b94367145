/* graph.c — vgsim: stream capture and graphs.
 *
 * Between cuStreamBeginCapture and cuStreamEndCapture, the work queued on a stream — and
 * on every stream that joined the capture by waiting for an event recorded in it — is not
 * run but kept, in the order the host queued it. cuStreamEndCapture makes the kept work a
 * graph; each cuGraphLaunch of an instantiated graph queues copies of it on the launch
 * stream, in that order (an order the captured dependencies allow: every operation was
 * queued after those it depends on).
 *
 * What CUDA forbids during a capture fails as on a GPU, because the point of modelling
 * capture is to catch a tool that breaks a program's graphs:
 *  - synchronising or querying a capturing stream, or synchronising the context while a
 *    capture runs: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated;
 *  - a "potentially unsafe" call (cuMemAlloc, cuMemFree, the VMM calls) while a capture
 *    forbids it (cuThreadExchangeStreamCaptureMode's rules: a GLOBAL capture forbids them
 *    in every thread whose own mode is GLOBAL, any non-RELAXED capture in its own
 *    thread): the same error, and the capture is invalidated;
 *  - querying or synchronising an event last recorded in a capture:
 *    CUDA_ERROR_CAPTURED_EVENT; a capturing stream waiting for an event recorded outside
 *    the capture: CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
 *  - ending a capture while a stream that joined it has work the origin stream never
 *    waited for: CUDA_ERROR_STREAM_CAPTURE_UNJOINED.
 * Not modelled: graph memory nodes (cuMemAllocAsync/cuMemFreeAsync in a capture fail with
 * CUDA_ERROR_NOT_SUPPORTED), graphs built node by node, child graphs.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct sim_capture {
    uint64_t id;
    sim_ctx_t *ctx;
    sim_stream_t *origin;
    CUstreamCaptureMode mode;
    pthread_t thread;
    bool invalidated;
    sim_op_t *head, *tail;      /* the captured work, in order */
    struct sim_capture *next;   /* the active captures */
} sim_capture_t;

typedef struct sim_graph {
    sim_op_t *ops;
    _Atomic uint32_t launches; /* (an executable graph's launches so far) */
} sim_graph_t;

static pthread_mutex_t g_capture_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_capture_t *g_captures;   /* the active captures (g_capture_lock) */
static _Atomic int g_ncaptures;      /* their number, to peek at without the lock */
static uint64_t g_next_capture = 1;
static __thread CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---------------------------------------------------------------------------------------
 * Ops kept in graphs
 * ------------------------------------------------------------------------------------- */

static void ops_destroy(sim_op_t *op) {
    while (op) {
        sim_op_t *next = op->next;
        sim_op_destroy(op);
        op = next;
    }
}

sim_op_t *sim_op_clone(const sim_op_t *op) {
    sim_op_t *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    memcpy(n, op, sizeof *n);
    n->next = NULL;
    n->deps = NULL;
    n->ndeps = 0;
    n->seq = 0;
    if (op->kind == OP_COPY && op->u.copy.staging) {
        n->u.copy.staging = malloc(op->u.copy.n);
        if (!n->u.copy.staging) {
            free(n);
            return NULL;
        }
        memcpy(n->u.copy.staging, op->u.copy.staging, op->u.copy.n);
    }
    if (op->kind == OP_KERNEL) {
        const unsigned char *from = op->u.kernel.storage;
        unsigned char *to = n->u.kernel.inline_args;
        if (from != op->u.kernel.inline_args) {
            to = malloc(op->u.kernel.nstorage ? op->u.kernel.nstorage : 1);
            if (!to) {
                free(n);
                return NULL;
            }
            memcpy(to, from, op->u.kernel.nstorage);
        }
        n->u.kernel.storage = to;
        for (int i = 0; i < op->u.kernel.launch.nparams; i++)
            n->u.kernel.launch.params[i] =
                to + ((const unsigned char *)op->u.kernel.launch.params[i] - from);
    }
    return n;
}

static sim_op_t *ops_clone(const sim_op_t *op) {
    sim_op_t *head = NULL, **tail = &head;
    for (; op; op = op->next) {
        sim_op_t *n = sim_op_clone(op);
        if (!n) {
            ops_destroy(head);
            return NULL;
        }
        *tail = n;
        tail = &n->next;
    }
    return head;
}

/* ---------------------------------------------------------------------------------------
 * The rules (g_capture_lock held)
 * ------------------------------------------------------------------------------------- */

static sim_capture_t *capture_by_id(uint64_t id) {
    for (sim_capture_t *c = g_captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* A thread in `mode` making an unsafe call: does capture c forbid it? */
static bool forbids(const sim_capture_t *c, CUstreamCaptureMode mode) {
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return false;
    if (pthread_equal(c->thread, pthread_self()))
        return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    return mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult sim_capture_unsafe_check(void) {
    if (!atomic_load(&g_ncaptures)) /* (a capture that begins now comes after this call) */
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_capture_lock);
    for (sim_capture_t *c = g_captures; c; c = c->next) {
        if (forbids(c, t_mode)) {
            c->invalidated = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g_capture_lock);
    return r;
}

CUresult sim_capture_sync_check(sim_ctx_t *ctx, sim_stream_t *s) {
    if (!atomic_load(&g_ncaptures))
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_capture_lock);
    for (sim_capture_t *c = g_captures; c; c = c->next) {
        if (s ? atomic_load(&s->capture) == c : c->ctx == ctx) {
            c->invalidated = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g_capture_lock);
    return r;
}

bool sim_capture_op(sim_stream_t *s, sim_op_t *op, CUresult *r) {
    pthread_mutex_lock(&g_capture_lock);
    sim_capture_t *c = atomic_load(&s->capture);
    if (!c) {
        pthread_mutex_unlock(&g_capture_lock);
        return false;
    }
    *r = CUDA_SUCCESS;
    if (c->invalidated) {
        sim_op_destroy(op);
        *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (op->kind == OP_RECORD) { /* an event in a capture marks a point of it */
        sim_event_t *e = op->u.record.event;
        pthread_mutex_lock(&e->lock);
        e->cap_id = c->id;
        e->cap_stream = s;
        e->cap_pos = s->cap_ops;
        pthread_mutex_unlock(&e->lock);
        sim_op_destroy(op);
    } else if ((op->kind == OP_FREE) || op->kind == OP_EXIT) {
        sim_op_destroy(op);
        *r = CUDA_ERROR_NOT_SUPPORTED;
    } else {
        op->next = NULL;
        if (c->tail)
            c->tail->next = op;
        else
            c->head = op;
        c->tail = op;
        s->cap_ops++;
        s->cap_joined = false;
    }
    pthread_mutex_unlock(&g_capture_lock);
    return true;
}

CUresult sim_capture_event_check(sim_event_t *e) {
    pthread_mutex_lock(&e->lock);
    bool captured = e->cap_id != 0;
    pthread_mutex_unlock(&e->lock);
    return captured ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

bool sim_capture_wait(sim_stream_t *s, sim_event_t *e, CUresult *r) {
    pthread_mutex_lock(&e->lock);
    uint64_t id = e->cap_id;
    sim_stream_t *from = e->cap_stream;
    uint64_t pos = e->cap_pos;
    pthread_mutex_unlock(&e->lock);
    if (!id && !atomic_load(&s->capture))
        return false; /* no capture involved */
    *r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_capture_lock);
    sim_capture_t *c = id ? capture_by_id(id) : NULL;
    sim_capture_t *mine = atomic_load(&s->capture);
    if (id && !c) {
        *r = CUDA_ERROR_CAPTURED_EVENT; /* recorded in a capture that has ended */
    } else if (!id) { /* a capturing stream waits for work outside its capture */
        mine->invalidated = true;
        *r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    } else if (!mine) { /* fork: s joins the capture (nothing of its own to join back yet) */
        atomic_store(&s->capture, c);
        s->cap_ops = 0;
        s->cap_joined = true;
    } else if (mine == c) {
        if (from != s && pos == from->cap_ops && s == c->origin)
            from->cap_joined = true; /* the origin waits for all of `from`'s work */
    } else {
        mine->invalidated = c->invalidated = true; /* two captures may not merge */
        *r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    pthread_mutex_unlock(&g_capture_lock);
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Capture API
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
    sim_ctx_t *ctx;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &ctx, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    sim_capture_t *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_capture_lock);
    if (atomic_load(&s->capture)) {
        pthread_mutex_unlock(&g_capture_lock);
        free(c);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    c->id = g_next_capture++;
    c->ctx = ctx;
    c->origin = s;
    c->mode = mode;
    c->thread = pthread_self();
    c->next = g_captures;
    g_captures = c;
    atomic_fetch_add(&g_ncaptures, 1);
    s->cap_ops = 0;
    s->cap_joined = true;
    atomic_store(&s->capture, c);
    pthread_mutex_unlock(&g_capture_lock);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
    sim_ctx_t *ctx;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &ctx, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_capture_lock);
    sim_capture_t *c = atomic_load(&s->capture);
    if (!c) {
        pthread_mutex_unlock(&g_capture_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (c->origin != s) {
        c->invalidated = true;
        pthread_mutex_unlock(&g_capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        pthread_mutex_unlock(&g_capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    bool unjoined = false;
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < ctx->nstreams; i++) {
        sim_stream_t *o = ctx->streams[i];
        if (atomic_load(&o->capture) != c)
            continue;
        unjoined |= o != s && !o->cap_joined;
        atomic_store(&o->capture, NULL);
    }
    pthread_mutex_unlock(&ctx->lock);
    for (sim_capture_t **pp = &g_captures; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            atomic_fetch_sub(&g_ncaptures, 1);
            break;
        }
    }
    pthread_mutex_unlock(&g_capture_lock);
    *graph = NULL;
    r = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        : unjoined     ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED
                       : CUDA_SUCCESS;
    sim_graph_t *g = r == CUDA_SUCCESS ? calloc(1, sizeof *g) : NULL;
    if (r == CUDA_SUCCESS && !g)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (g) {
        g->ops = c->head;
        *graph = (CUgraph)g;
    } else {
        ops_destroy(c->head);
    }
    free(c);
    return r;
}

VGSIM_API CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
    sim_ctx_t *ctx;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &ctx, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_capture_lock);
    sim_capture_t *c = atomic_load(&s->capture);
    *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
              : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&g_capture_lock);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = t_mode;
    t_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------
 * Graphs
 * ------------------------------------------------------------------------------------- */

VGSIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                               unsigned long long flags) {
    sim_ctx_t *ctx;
    CUresult r = sim_ctx_check(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!exec || !graph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_graph_t *g = (const sim_graph_t *)graph;
    sim_graph_t *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->ops = ops_clone(g->ops);
    if (g->ops && !x->ops) {
        free(x);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *exec = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    sim_ctx_t *ctx;
    sim_stream_t *s;
    CUresult r = sim_resolve(stream, &ctx, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load(&s->capture))
        return CUDA_ERROR_NOT_SUPPORTED; /* (child graphs are not modelled) */
    sim_graph_t *x = (sim_graph_t *)exec;
    uint32_t launch_id = atomic_fetch_add(&x->launches, 1);
    for (const sim_op_t *op = x->ops; op; op = op->next) {
        sim_op_t *n = sim_op_clone(op);
        if (!n)
            return CUDA_ERROR_OUT_OF_MEMORY;
        if (n->kind == OP_KERNEL)
            sim_sanitizer_graph_node(exec, launch_id, n, stream);
        if ((r = sim_enqueue(s, n)) != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* Queued launches hold copies: the graph and its executable may go at once. */
VGSIM_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    ops_destroy(((sim_graph_t *)exec)->ops);
    free(exec);
    return CUDA_SUCCESS;
}

VGSIM_API CUresult cuGraphDestroy(CUgraph graph) {
    return cuGraphExecDestroy((CUgraphExec)graph);
}
