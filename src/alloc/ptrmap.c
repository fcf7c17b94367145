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
    vg_ptrmap_slot_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        size_t s = slot_of(m->slots[i].key, cap);
        while (slots[s].key)
            s = (s + 1) & (cap - 1);
        slots[s] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

bool vg__ptrmap_put(vg_ptrmap_t *m, uint64_t key, vg_block_t *val) {
    if ((m->n + 1) * 2 > m->cap && !grow(m))
        return false;
    size_t s = slot_of(key, m->cap);
    while (m->slots[s].key && m->slots[s].key != key)
        s = (s + 1) & (m->cap - 1);
    if (!m->slots[s].key)
        m->n++;
    m->slots[s] = (vg_ptrmap_slot_t){key, val};
    return true;
}

void vg__ptrmap_prefetch(const vg_ptrmap_t *m, uint64_t key) {
    if (m->cap)
        __builtin_prefetch(&m->slots[slot_of(key, m->cap)]);
}

vg_block_t *vg__ptrmap_get(const vg_ptrmap_t *m, uint64_t key) {
    if (!m->cap || !key)
        return NULL;
    for (size_t s = slot_of(key, m->cap); m->slots[s].key; s = (s + 1) & (m->cap - 1))
        if (m->slots[s].key == key)
            return m->slots[s].val;
    return NULL;
}

vg_block_t *vg__ptrmap_del(vg_ptrmap_t *m, uint64_t key) {
    if (!m->cap || !key)
        return NULL;
    size_t s = slot_of(key, m->cap);
    while (m->slots[s].key && m->slots[s].key != key)
        s = (s + 1) & (m->cap - 1);
    if (!m->slots[s].key)
        return NULL;
    vg_block_t *val = m->slots[s].val;
    m->slots[s] = (vg_ptrmap_slot_t){0, NULL};
    m->n--;
    /* Shift back the rest of the probe run so no lookup stops early at the hole. */
    size_t hole = s;
    for (size_t i = (s + 1) & (m->cap - 1); m->slots[i].key; i = (i + 1) & (m->cap - 1)) {
        size_t home = slot_of(m->slots[i].key, m->cap);
        /* Move entry i into the hole if its home is not in (hole, i] cyclically. */
        bool in_range = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!in_range) {
            m->slots[hole] = m->slots[i];
            m->slots[i] = (vg_ptrmap_slot_t){0, NULL};
            hole = i;
        }
    }
    return val;
}

void vg__ptrmap_free(vg_ptrmap_t *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
