/* readfile.c — see readfile.h. */
#include "readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *cli_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            char *d = cap < ((size_t)1 << 40) ? realloc(data, cap = cap ? cap * 2 : 1 << 20) : NULL;
            if (!d) {
                free(data);
                fclose(f);
                snprintf(err, errlen, "'%s' is too large to read", path);
                return NULL;
            }
            data = d;
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int why = ferror(f) ? errno : 0;
    fclose(f);
    if (why) {
        free(data);
        snprintf(err, errlen, "cannot read '%s': %s", path,
                 why == EISDIR ? "it is a folder; name a file in it" : strerror(why));
        return NULL;
    }
    *len = n;
    return data;
}
