/* fuzz_allocator.c — the allocator driven by fuzzer-chosen operations on vgsim: sizes,
 * streams, frees, double and interior frees, wild frees, recorded streams, limits,
 * empty_cache, synchronisations, CUDA graph pools (requests on the third stream routed to
 * a pool between begin and end, as a capture's; release returns the pool's memory),
 * kernel launches given the slots' pointers, event records, waits and completions (what
 * guard mode's judgement of frees, G7, learns from); the invariant checker (vg_validate)
 * after every step.
 *
 * With VG_FUZZ_GUARD (fuzz_guard.c) the same in guard mode, its work deferred, with a
 * small quarantine: nothing here writes device memory, so a report of damage (an
 * out-of-bounds write or a write to freed memory) would be false, and aborts. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/order.h"
#include "driver/driver.h"
#include "vramguard.h"

#define SLOTS 64
static CUstream g_streams[3];
static CUevent g_events[4];
static int g_ready;

#ifdef VG_FUZZ_GUARD
#define MODE_OPTS ",mode=guard,guard_defer=on,quarantine=48M,check_sync=1"
/* Reports come here instead of standard error: damage must never be reported. */
static void on_output(const char *text, size_t len, void *arg) {
    (void)arg;
    if ((memmem(text, len, "ERROR: out-of-bounds", 20) ||
         memmem(text, len, "ERROR: write to freed memory", 28))) {
        fprintf(stderr, "a false report of damage:\n%.*s\n", (int)len, text);
        abort();
    }
}
#elif defined(VG_FUZZ_PLAN)
/* plan=on, settling from the start (heap.h, vg__heap_settling: forced below), with a
 * small-request range that takes requests larger than a page and slots from 16 MiB:
 * placements at a free block's end, mapped first, in both ranges and beside slots. */
#define MODE_OPTS ",plan=on,small_max=8M,slot_min=16M"
#include "alloc/heap.h"
#else
#define MODE_OPTS ""
#endif

static void setup(void) {
    /* A device of 8 GiB: requests of up to 1 GiB run it out of memory often, and the
     * invariant checker, which walks every page of the heap's address range (twice the
     * device's memory) after every step, costs a tenth of what it does on 80 GiB. */
    setenv("VGSIM_MEMORY", "8G", 0);
    char opts[4300];
    snprintf(opts, sizeof opts, "driver=%s,stack_depth=4,leaks=off,free_order=on" MODE_OPTS,
             VG_FUZZ_VGSIM_LIB);
    if (vg_init(opts) != VG_OK) {
        fprintf(stderr, "vg_init: %s\n", vg_last_error());
        abort();
    }
    CUdevice dev;
    CUcontext ctx;
    CUresult r;
    if ((r = vg__cuDeviceGet(&dev, 0)) || (r = vg__cuDevicePrimaryCtxRetain(&ctx, dev)) ||
        (r = vg__cuCtxSetCurrent(ctx))) {
        fprintf(stderr, "the device did not answer: %s\n", vg__cu_error_name(r));
        abort();
    }
    g_streams[0] = NULL;
    for (int i = 1; i < 3; i++)
        if ((r = vg__cuStreamCreate(&g_streams[i], CU_STREAM_NON_BLOCKING))) {
            fprintf(stderr, "cuStreamCreate: %s\n", vg__cu_error_name(r));
            abort();
        }
    for (int i = 0; i < 4; i++)
        if ((r = vg__cuEventCreate(&g_events[i], CU_EVENT_DISABLE_TIMING))) {
            fprintf(stderr, "cuEventCreate: %s\n", vg__cu_error_name(r));
            abort();
        }
#ifdef VG_FUZZ_GUARD
    vg_set_output_callback(on_output, NULL);
#endif
#ifdef VG_FUZZ_PLAN
    vg_heap_t *h;
    if (vg__heap_current(&h) != VG_OK) {
        fprintf(stderr, "no heap: %s\n", vg_last_error());
        abort();
    }
    pthread_mutex_lock(&h->lock);
    h->moved_unplanned = 1ull << 40; /* (as if four times its memory had moved) */
    pthread_mutex_unlock(&h->lock);
#endif
    g_ready = 1;
}

/* Launches, event records, waits and completions, as the interposer reports them. An
 * unordered_free report may follow (the fuzzer plants such frees); nothing may break. */
static void order_op(uint8_t op, void **slot, int k, uint8_t b) {
    CUstream s = g_streams[b % 3];
    CUevent e = g_events[(b >> 2) % 4];
    if (op == 0) {
        const void *ptrs[2] = {slot[k], slot[(k + 1) % SLOTS]};
        vg_kernel_launched_args("fuzz_kernel", s, ptrs, 2);
    } else if (op == 1 && vg__cuEventRecord(e, s) == CUDA_SUCCESS) {
        vg__order_event_record(e, s);
    } else if (op == 2 && vg__cuStreamWaitEvent(s, e, 0) == CUDA_SUCCESS) {
        vg__order_stream_wait(s, e);
    } else if (op == 3 && vg__cuEventSynchronize(e) == CUDA_SUCCESS) {
        vg__order_event_done(e);
    } else if (op == 4 && vg__cuStreamSynchronize(s) == CUDA_SUCCESS) {
        vg_stream_synchronized(s); /* (only once true: guard mode's check at it waits for
                                      no stream, G8) */
    }
}

/* Graph pools 1..3: how many begins each has not ended, and not released. */
#define POOLS 3
static int g_open[POOLS + 1], g_unreleased[POOLS + 1];

static int captured_stream(void *stream, void *arg) {
    (void)arg;
    return stream == (void *)g_streams[2];
}

static void pool_op(uint8_t op, uint8_t b) {
    int p = 1 + b % POOLS;
    if (op == 0 && vg_graph_pool_begin(0, (uint64_t)p, captured_stream, NULL) == VG_OK) {
        g_open[p]++;
        g_unreleased[p]++;
    } else if (op == 1 && g_open[p] > 0) {
        vg_graph_pool_end(0, (uint64_t)p);
        g_open[p]--;
    } else if (op == 2 && g_unreleased[p] > g_open[p]) { /* (a graph is destroyed) */
        vg_graph_pool_release(0, (uint64_t)p);
        g_unreleased[p]--;
    }
}

static void pools_close(void) {
    for (int p = 1; p <= POOLS; p++) {
        for (; g_open[p] > 0; g_open[p]--)
            vg_graph_pool_end(0, (uint64_t)p);
        for (; g_unreleased[p] > 0; g_unreleased[p]--)
            vg_graph_pool_release(0, (uint64_t)p);
    }
}

static void valid(void) {
    if (vg_validate() != VG_OK) {
        fprintf(stderr, "invariant broken: %s\n", vg_last_error());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ready)
        setup();
    void *slot[SLOTS] = {0};
    void *gone[SLOTS] = {0}; /* freed pointers, for double frees */
    for (size_t i = 0; i + 2 < size; i += 3) {
        uint8_t op = data[i] % 10, a = data[i + 1], b = data[i + 2];
        int k = a % SLOTS;
        CUstream s = g_streams[b % 3];
        if (data[i] >= 250) { /* (the highest op bytes; other ops keep their meaning) */
            pool_op((uint8_t)(data[i] - 250) % 3, b);
            valid();
            continue;
        }
        if (data[i] >= 240) {
            order_op((uint8_t)(data[i] - 240) % 5, slot, k, b);
            valid();
            continue;
        }
        switch (op) {
        case 0: case 1: case 2: { /* allocate: sizes from 1 byte to ~1 GiB, log-spread */
            if (slot[k])
                break;
            size_t n = ((size_t)1 << (b % 31)) + (size_t)a * 37;
            if (vg_malloc(&slot[k], n, s) != VG_OK)
                slot[k] = NULL;
            break;
        }
        case 3: case 4: /* free */
            if (slot[k] && vg_free(slot[k], s) == VG_OK) {
                gone[k] = slot[k];
                slot[k] = NULL;
            }
            break;
        case 5: { /* double free, interior free, wild free: errors, nothing else */
            bool reused = false; /* (its address may have been handed out again since) */
            for (int j = 0; j < SLOTS; j++)
                reused |= slot[j] == gone[k];
            if (gone[k] && !reused && vg_free(gone[k], s) == VG_OK)
                abort();
            if (slot[k] && vg_free((char *)slot[k] + 1 + b, s) == VG_OK)
                abort();
            if (vg_free((void *)(uintptr_t)(0x1000 + (size_t)a * 4096), s) == VG_OK)
                abort();
            break;
        }
        case 6: /* another stream uses it */
            if (slot[k])
                vg_record_stream(slot[k], g_streams[(b + 1) % 3]);
            break;
        case 7: /* a limit, or none */
            vg_set_memory_limit(0, b % 4 == 0 ? 0 : ((size_t)1 << (20 + b % 12)));
            break;
        case 8:
            vg_empty_cache();
            break;
        case 9: /* the streams complete; vramguard is told, or learns it from events */
            vg__cuCtxSynchronize();
            if (b & 1)
                vg_stream_synchronized(s);
            break;
        }
        valid();
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k])
            vg_free(slot[k], NULL);
    pools_close();
    vg_set_memory_limit(0, 0);
    vg__cuCtxSynchronize();
#ifdef VG_FUZZ_GUARD
    vg_check(); /* every live and quarantined block: none may look damaged */
#endif
    valid();
    return 0;
}
