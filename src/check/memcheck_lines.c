/* memcheck_lines.c — the line information of the modules memcheck mode patched, by
 * module handle (memcheck.h): read from the cubin at the module-loaded callback (the
 * image lives only as long as the callback), looked up when a report is written, dropped
 * when its handle is loaded again. A module unloaded keeps its lines a while (the last
 * of its kernels' bad accesses may be read after the unload): the RETIRED most recently
 * unloaded are kept. Cold paths, one lock, taken last.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin_lines.h"
#include "memcheck.h"

#define RETIRED 64

typedef struct mod_lines {
    CUmodule module;
    vg_lines_t *lines;
    uint64_t unloaded; /* the order in which it was unloaded (0: loaded) */
    struct mod_lines *next;
} mod_lines_t;

static mod_lines_t *g_mods;
static uint64_t g_unloads;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void drop_locked(CUmodule m) {
    for (mod_lines_t **p = &g_mods; *p;) {
        if ((*p)->module == m) {
            mod_lines_t *gone = *p;
            *p = gone->next;
            vg__lines_free(gone->lines);
            free(gone);
        } else {
            p = &(*p)->next;
        }
    }
}

void vg__memcheck_lines_loaded(CUmodule m, const void *image, size_t size) {
    vg_lines_t *lines = vg__lines_read(image, size);
    mod_lines_t *e = lines ? malloc(sizeof *e) : NULL;
    pthread_mutex_lock(&g_lock);
    drop_locked(m); /* (a handle loaded again is another module) */
    if (e) {
        *e = (mod_lines_t){m, lines, 0, g_mods};
        g_mods = e;
    }
    pthread_mutex_unlock(&g_lock);
    if (!e)
        vg__lines_free(lines);
}

void vg__memcheck_lines_unloaded(CUmodule m) {
    pthread_mutex_lock(&g_lock);
    uint64_t now = ++g_unloads;
    for (mod_lines_t **p = &g_mods; *p;) {
        mod_lines_t *e = *p;
        if (e->module == m && !e->unloaded)
            e->unloaded = now;
        if (e->unloaded && now - e->unloaded >= RETIRED) { /* (the oldest unloaded go) */
            *p = e->next;
            vg__lines_free(e->lines);
            free(e);
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

bool vg__memcheck_line(CUmodule m, const char *function, uint64_t offset, char *out,
                       size_t n) {
    bool found = false;
    pthread_mutex_lock(&g_lock);
    for (mod_lines_t *e = g_mods; e && !found; e = e->next) {
        const char *file;
        unsigned line;
        if (e->module == m && vg__lines_find(e->lines, function, offset, &file, &line)) {
            snprintf(out, n, "%s:%u", file, line);
            found = true;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

char **vg__memcheck_line_functions(CUmodule m, size_t *n) {
    char **names = NULL;
    *n = 0;
    pthread_mutex_lock(&g_lock);
    for (mod_lines_t *e = g_mods; e && !names; e = e->next) {
        size_t k = e->module == m ? vg__lines_functions(e->lines) : 0;
        if (!k || !(names = calloc(k, sizeof *names)))
            continue;
        for (size_t i = 0; i < k; i++)
            if ((names[*n] = strdup(vg__lines_function(e->lines, i))))
                ++*n;
    }
    pthread_mutex_unlock(&g_lock);
    return names;
}
