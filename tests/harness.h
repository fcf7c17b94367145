/* harness.h — the tests' one registry and assertions.
 *
 *   VG_TEST(name) { CHECK(x == 1); CHECK_EQ(a, b); CHECK_CU(cuInit(0)); }
 *
 * A test binary runs one case when given its name (that is how CTest runs them, one
 * process per case, so a case that kills its CUDA context cannot affect another), every
 * case in turn with no argument, and prints the names with --list. CMake registers the
 * cases by reading the VG_TEST(...) lines of the sources: the source is the only list.
 * A failed check prints file:line and the values, and fails the case at once.
 */
#ifndef VG_TEST_HARNESS_H
#define VG_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*vgt_fn)(void);
void vgt_register(const char *name, vgt_fn fn);
int vgt_main(int argc, char **argv);
void vgt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
/* The bytes of a file of test data (malloc'd, caller frees; fails the case if it cannot
 * be read). */
unsigned char *vgt_read_file(const char *path, size_t *size);
/* Damage an image: one byte at base + a random offset below span, if inside p[0, size),
 * takes a random value (two steps of *seed's generator: the same damage for the same seed). */
void vgt_scribble(unsigned char *p, size_t size, unsigned *seed, size_t base, size_t span);
/* Skip the current case (prints the reason; CTest counts it as skipped, exit code 77). */
void vgt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define VG_TEST(name)                                                                       \
    static void vgt_case_##name(void);                                                      \
    __attribute__((constructor)) static void vgt_reg_##name(void) {                         \
        vgt_register(#name, vgt_case_##name);                                               \
    }                                                                                       \
    static void vgt_case_##name(void)

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond))                                                                        \
            vgt_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond))                                                                        \
            vgt_fail(__FILE__, __LINE__, __VA_ARGS__);                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long vgt_a = (long long)(a), vgt_b = (long long)(b);                           \
        if (vgt_a != vgt_b)                                                                 \
            vgt_fail(__FILE__, __LINE__, "CHECK_EQ(%s, %s) failed: %lld != %lld", #a, #b,  \
                     vgt_a, vgt_b);                                                         \
    } while (0)

#define CHECK_STREQ(a, b)                                                                   \
    do {                                                                                    \
        const char *vgt_a = (a), *vgt_b = (b);                                              \
        if (!vgt_a || !vgt_b || strcmp(vgt_a, vgt_b) != 0)                                  \
            vgt_fail(__FILE__, __LINE__, "CHECK_STREQ(%s, %s) failed: \"%s\" != \"%s\"", #a, \
                     #b, vgt_a ? vgt_a : "(null)", vgt_b ? vgt_b : "(null)");               \
    } while (0)

#define CHECK_CONTAINS(haystack, needle)                                                    \
    do {                                                                                    \
        const char *vgt_h = (haystack), *vgt_n = (needle);                                  \
        if (!vgt_h || !strstr(vgt_h, vgt_n))                                                \
            vgt_fail(__FILE__, __LINE__, "expected to find \"%s\" in:\n%s", vgt_n,          \
                     vgt_h ? vgt_h : "(null)");                                             \
    } while (0)

/* A driver call that must succeed (the conformance suite's main assertion). */
#define CHECK_CU(call)                                                                      \
    do {                                                                                    \
        int vgt_r = (int)(call);                                                            \
        if (vgt_r != 0)                                                                     \
            vgt_fail(__FILE__, __LINE__, "%s returned %d", #call, vgt_r);                   \
    } while (0)

/* A driver call that must return `want`. */
#define CHECK_CU_EQ(call, want)                                                             \
    do {                                                                                    \
        int vgt_r = (int)(call), vgt_w = (int)(want);                                       \
        if (vgt_r != vgt_w)                                                                 \
            vgt_fail(__FILE__, __LINE__, "%s returned %d, expected %s (%d)", #call, vgt_r,  \
                     #want, vgt_w);                                                         \
    } while (0)

#endif /* VG_TEST_HARNESS_H */
