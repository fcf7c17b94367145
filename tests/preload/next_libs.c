/* next_libs.c — three small libraries for the RTLD_NEXT test (built three times with
 * LIBNO = 1, 2, 3). Each defines which() returning its number; the second also asks
 * dlsym(RTLD_NEXT, "which"), which must find the third (the next after itself), not the
 * first — also with vramguard's dlsym in front. */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((visibility("default"))) int which(void) { return LIBNO; }

#if LIBNO == 2
__attribute__((visibility("default"))) int ask_next(void) {
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "which");
    return next ? next() : -1;
}
#endif
