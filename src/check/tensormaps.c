/* tensormaps.c — the tensor maps a program built, matched in its launches (tensormaps.h).
 *
 * A table of the most recent maps, keyed by a hash of their 128 bytes (cuBLAS builds
 * maps for each matmul's pointers, so old ones are replaced: a slot's probe window full,
 * its home slot is overwritten). A match compares the whole 128 bytes.
 */
#include "check/tensormaps.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/options.h"
#include "check/memcheck.h"

#define MAP_BYTES 128
#define SLOTS 4096 /* a power of two */
#define PROBE 8
#define ALIGN 64   /* a map in a parameter buffer lies at a multiple of 64 bytes */

typedef struct slot {
    uint64_t key; /* 0: empty */
    uint64_t address, span;
    unsigned char bytes[MAP_BYTES];
} slot_t;

static slot_t g_slots[SLOTS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t g_maps, g_launches;

bool vg__tensormaps_wanted(void) { return vg__opt.initcheck && vg__memcheck_on(); }

bool vg__tensormaps_any(void) { return atomic_load_explicit(&g_maps, memory_order_relaxed) != 0; }

static uint64_t key_of(const void *map) {
    uint64_t q[MAP_BYTES / 8], h = 0xcbf29ce484222325ull;
    memcpy(q, map, sizeof q);
    for (size_t i = 0; i < MAP_BYTES / 8; i++) {
        h ^= q[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

uint64_t vg__tensormap_span(CUtensorMapDataType type, unsigned rank, const cuuint64_t *dims,
                            const cuuint64_t *strides) {
    if (rank < 1 || rank > 5 || !dims || (rank > 1 && !strides))
        return 0;
    static const unsigned size[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    uint64_t row; /* the first dimension's bytes (packed types: 16 values in 8 or 16 bytes) */
    if ((unsigned)type < sizeof size / sizeof size[0])
        row = dims[0] * size[type];
    else if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B)
        row = (dims[0] + 1) / 2;
    else if (type <= CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
        row = (dims[0] + 15) / 16 * 16;
    else
        return 0;
    uint64_t span = row, step;
    for (unsigned i = 1; i < rank; i++) {
        if (!dims[i] || dims[i] > (1ull << 32) || strides[i - 1] >= (1ull << 40) ||
            __builtin_mul_overflow(dims[i] - 1, strides[i - 1], &step) ||
            __builtin_add_overflow(span, step, &span))
            return 0;
    }
    return span < (1ull << 48) ? span : 0;
}

static void record(const void *map, uint64_t address, uint64_t span) {
    uint64_t key = key_of(map);
    size_t home = key & (SLOTS - 1), at = home;
    pthread_mutex_lock(&g_lock);
    for (size_t k = 0; k < PROBE; k++) {
        size_t i = (home + k) & (SLOTS - 1);
        if (!g_slots[i].key || g_slots[i].key == key) {
            at = i;
            break;
        }
    }
    g_slots[at].key = key;
    g_slots[at].address = address;
    g_slots[at].span = span;
    memcpy(g_slots[at].bytes, map, MAP_BYTES);
    pthread_mutex_unlock(&g_lock);
    atomic_fetch_add_explicit(&g_maps, 1, memory_order_relaxed);
}

/* The region recorded for these 128 bytes (lock held); false if none. */
static bool find(const void *map, uint64_t *address, uint64_t *span) {
    uint64_t key = key_of(map);
    for (size_t k = 0; k < PROBE; k++) {
        const slot_t *s = &g_slots[(key + k) & (SLOTS - 1)];
        if (!s->key)
            return false;
        if (s->key == key && memcmp(s->bytes, map, MAP_BYTES) == 0) {
            *address = s->address;
            *span = s->span;
            return true;
        }
    }
    return false;
}

void vg__tensormap_encoded(const void *map, uint64_t address, uint64_t span) {
    if (map && span)
        record(map, address, span);
}

void vg__tensormap_replaced(const void *before, const void *map, uint64_t address) {
    if (!before || !map)
        return;
    uint64_t old_address, span;
    pthread_mutex_lock(&g_lock);
    bool known = find(before, &old_address, &span);
    pthread_mutex_unlock(&g_lock);
    if (known)
        record(map, address, span);
}

void vg__tensormaps_scan(const void *bytes, size_t size, size_t offset, CUstream stream) {
    if (!bytes || size < MAP_BYTES)
        return;
    uint64_t marked[8][2];
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t at = (ALIGN - offset % ALIGN) % ALIGN; at + MAP_BYTES <= size && n < 8;
         at += ALIGN) {
        uint64_t address, span;
        if (find((const char *)bytes + at, &address, &span)) {
            marked[n][0] = address;
            marked[n++][1] = span;
        }
    }
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < n; i++) /* (outside the lock: it takes the heap's) */
        vg__memcheck_written(marked[i][0], marked[i][1], stream);
    if (n)
        atomic_fetch_add_explicit(&g_launches, 1, memory_order_relaxed);
}

void vg__tensormap_counts(uint64_t *maps, uint64_t *launches) {
    *maps = atomic_load(&g_maps);
    *launches = atomic_load(&g_launches);
}
