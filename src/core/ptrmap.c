/* ptrmap.c — user address -> allocated block, open addressing with linear probing.
 *
 * Keys are 512-byte aligned addresses, never 0 (0 marks an empty slot). The table stays at
 * most half full and doubles when it would not; deletion shifts later entries of the probe
 * run back (no tombstones), so lookups stay short under churn. Callers hold the heap lock.
 */
#include <stdlib.h>

#include "heap.h"

static inline size_t slot_of(uint64_t key, size_t cap) {
    return (size_t)(((key >> 9) * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static bool grow(vg_ptrmap_t *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    vg_block_t **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t s = slot_of(m->keys[i], cap);
        while (keys[s])
            s = (s + 1) & (cap - 1);
        keys[s] = m->keys[i];
        vals[s] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

bool vg__ptrmap_put(vg_ptrmap_t *m, uint64_t key, vg_block_t *val) {
    if ((m->n + 1) * 2 > m->cap && !grow(m))
        return false;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & (m->cap - 1);
    if (!m->keys[s])
        m->n++;
    m->keys[s] = key;
    m->vals[s] = val;
    return true;
}

void vg__ptrmap_prefetch(const vg_ptrmap_t *m, uint64_t key) {
    if (m->cap) {
        size_t s = slot_of(key, m->cap);
        __builtin_prefetch(&m->keys[s]);
        __builtin_prefetch(&m->vals[s]);
    }
}

vg_block_t *vg__ptrmap_get(const vg_ptrmap_t *m, uint64_t key) {
    if (!m->cap || !key)
        return NULL;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s]) {
        if (m->keys[s] == key)
            return m->vals[s];
        s = (s + 1) & (m->cap - 1);
    }
    return NULL;
}

vg_block_t *vg__ptrmap_del(vg_ptrmap_t *m, uint64_t key) {
    if (!m->cap || !key)
        return NULL;
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] && m->keys[s] != key)
        s = (s + 1) & (m->cap - 1);
    if (!m->keys[s])
        return NULL;
    vg_block_t *val = m->vals[s];
    m->keys[s] = 0;
    m->vals[s] = NULL;
    m->n--;
    /* Shift back the rest of the probe run so no lookup stops early at the hole. */
    size_t hole = s;
    for (size_t i = (s + 1) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1)) {
        size_t home = slot_of(m->keys[i], m->cap);
        /* Move entry i into the hole if its home is not in (hole, i] cyclically. */
        bool in_range = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!in_range) {
            m->keys[hole] = m->keys[i];
            m->vals[hole] = m->vals[i];
            m->keys[i] = 0;
            m->vals[i] = NULL;
            hole = i;
        }
    }
    return val;
}

void vg__ptrmap_free(vg_ptrmap_t *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
