/* test_cubin_lines.c — source lines of a cubin's machine code (memcheck mode's reports
 * name the line of the access where the module has line information).
 *
 * data/lines.cubin is lines.cu built by nvcc 13 with -lineinfo for sm_90. The expected
 * lines are what binutils reads in it (`readelf --debug-dump=decodedline lines.cubin`):
 *   read_past        0x0 line 6, 0x10 7, 0x50 8, 0x80 9, 0xf0 10, end at 0x200
 *   _Z5scalePKfPfi   0x0 16, 0x10 17, 0x50 18, 0x80 19 then lines_helper.cuh:3 (inlined),
 *                    0xc0 19, 0xd0 lines_helper.cuh:3, 0xe0 19, 0xf0 20, 0x100 13 and
 *                    0x150 14 (store_one, kept out of line in scale's section), end 0x200
 */
#include <stdlib.h>
#include <string.h>

#include "check/cubin_lines.h"
#include "check/memcheck.h"
#include "harness.h"

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* The line at function+offset, as "file-basename:line", or "-" for none. */
static const char *at(const vg_lines_t *t, const char *fn, uint64_t off) {
    static char buf[256];
    const char *file;
    unsigned line;
    if (!vg__lines_find(t, fn, off, &file, &line))
        return "-";
    const char *slash = strrchr(file, '/');
    snprintf(buf, sizeof buf, "%s:%u", slash ? slash + 1 : file, line);
    return buf;
}

VG_TEST(every_offset_of_a_kernel_has_the_line_readelf_gives) {
    size_t size;
    unsigned char *img = vgt_read_file(VG_TEST_DATA "/lines.cubin", &size);
    vg_lines_t *t = vg__lines_read(img, size);
    CHECK(t != NULL);
    CHECK_STREQ(at(t, "read_past", 0x0), "lines.cu:6");
    CHECK_STREQ(at(t, "read_past", 0xf), "lines.cu:6");
    CHECK_STREQ(at(t, "read_past", 0x10), "lines.cu:7");
    CHECK_STREQ(at(t, "read_past", 0x60), "lines.cu:8");
    CHECK_STREQ(at(t, "read_past", 0x80), "lines.cu:9"); /* out[i] = in[i + 1] */
    CHECK_STREQ(at(t, "read_past", 0xef), "lines.cu:9");
    CHECK_STREQ(at(t, "read_past", 0xf0), "lines.cu:10");
    CHECK_STREQ(at(t, "read_past", 0x1ff), "lines.cu:10");
    CHECK_STREQ(at(t, "read_past", 0x200), "-"); /* past the end of its sequence */
    CHECK_STREQ(at(t, "read_past", 1u << 20), "-");
    /* The path is the directory table's and the file's, joined. */
    const char *file;
    unsigned line;
    CHECK(vg__lines_find(t, "read_past", 0x80, &file, &line));
    CHECK(file[0] == '/' && ends_with(file, "/tests/unit/data/lines.cu"));
    vg__lines_free(t);
    free(img);
}

VG_TEST(inlined_code_and_a_device_function_out_of_line_have_their_own_lines) {
    size_t size;
    unsigned char *img = vgt_read_file(VG_TEST_DATA "/lines.cubin", &size);
    vg_lines_t *t = vg__lines_read(img, size);
    CHECK(t != NULL);
    const char *scale = "_Z5scalePKfPfi"; /* (mangled, as the symbol table and the API) */
    CHECK_STREQ(at(t, scale, 0x0), "lines.cu:16");
    CHECK_STREQ(at(t, scale, 0x50), "lines.cu:18");
    CHECK_STREQ(at(t, scale, 0x80), "lines_helper.cuh:3"); /* twice_at, inlined */
    CHECK_STREQ(at(t, scale, 0xbf), "lines_helper.cuh:3");
    CHECK_STREQ(at(t, scale, 0xc0), "lines.cu:19");
    CHECK_STREQ(at(t, scale, 0xd0), "lines_helper.cuh:3");
    CHECK_STREQ(at(t, scale, 0xe0), "lines.cu:19");
    CHECK_STREQ(at(t, scale, 0xf0), "lines.cu:20");
    CHECK_STREQ(at(t, scale, 0x100), "lines.cu:13"); /* store_one */
    CHECK_STREQ(at(t, scale, 0x150), "lines.cu:14"); /* p[i] = v */
    CHECK_STREQ(at(t, scale, 0x200), "-");
    CHECK_STREQ(at(t, "scale", 0x80), "-"); /* (the demangled name is not the symbol's) */
    CHECK_STREQ(at(t, "store_one", 0x0), "-");
    CHECK_EQ(vg__lines_functions(t), 2);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < vg__lines_functions(t); i++) {
        seen[0] |= strcmp(vg__lines_function(t, i), "read_past") == 0;
        seen[1] |= strcmp(vg__lines_function(t, i), scale) == 0;
    }
    CHECK(seen[0] && seen[1]);
    CHECK(vg__lines_function(t, 2) == NULL);
    vg__lines_free(t);
    free(img);
}

VG_TEST(no_line_information_is_no_table) {
    size_t size;
    unsigned char *img = vgt_read_file(VG_TEST_DATA "/two_kernels.cubin", &size); /* no -lineinfo */
    CHECK(vg__lines_read(img, size) == NULL);
    free(img);
    static const char ptx[] = ".version 8.0\n.target sm_75\n.entry k(){}\n.loc 1 2 3\n";
    CHECK(vg__lines_read(ptx, sizeof ptx) == NULL);
    CHECK(vg__lines_read(NULL, 100) == NULL);
    CHECK(vg__lines_read("\177ELF", 4) == NULL);
    CHECK(!vg__lines_find(NULL, "read_past", 0, &(const char *){NULL}, &(unsigned){0}));
    vg__lines_free(NULL);
}

/* Every prefix of the cubin, and the cubin with bytes changed at random (in the headers,
 * in .debug_line and in its relocations): read within bounds (ASan would say otherwise),
 * and every line found is a whole string. */
VG_TEST(damaged_cubins_are_read_within_bounds) {
    size_t size;
    unsigned char *orig = vgt_read_file(VG_TEST_DATA "/lines.cubin", &size);
    static const char *const fns[] = {"read_past", "_Z5scalePKfPfi", "x"};
    for (size_t n = 0; n <= size; n += n < 256 ? 1 : 13) {
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, orig, n);
        vg_lines_t *t = vg__lines_read(copy, n);
        free(copy); /* (the table keeps nothing of the image) */
        for (uint64_t off = 0; t && off < 0x240; off += 0x10)
            for (size_t f = 0; f < 3; f++)
                (void)strlen(at(t, fns[f], off));
        vg__lines_free(t);
    }
    unsigned seed = 4242;
    int tables = 0;
    for (int round = 0; round < 3000; round++) {
        unsigned char *copy = malloc(size);
        memcpy(copy, orig, size);
        for (int k = 0; k < 1 + round % 6; k++) {
            seed = seed * 1103515245u + 12345u;
            /* The ELF header, anywhere, .debug_line, .rela.debug_line (readelf -S). */
            static const size_t base[4] = {0, 0, 0x858, 0x14f0};
            size_t span[4] = {64, size, 0xeb, 0x30};
            size_t pos = base[round % 4] + (seed >> 8) % span[round % 4];
            seed = seed * 1103515245u + 12345u;
            if (pos < size)
                copy[pos] = (unsigned char)(seed >> 16);
        }
        vg_lines_t *t = vg__lines_read(copy, size);
        free(copy);
        tables += t != NULL;
        for (uint64_t off = 0; t && off < 0x240; off += 0x10)
            for (size_t f = 0; f < 3; f++)
                (void)strlen(at(t, fns[f], off));
        vg__lines_free(t);
    }
    CHECK(tables > 0); /* (some damage leaves the lines readable) */
    free(orig);
}

/* memcheck mode's table of modules: lines kept by module handle from the module-loaded
 * callback, dropped at unload, replaced when the handle is loaded again. */
VG_TEST(memcheck_keeps_the_lines_of_each_module_until_it_unloads) {
    size_t size, plain_size;
    unsigned char *img = vgt_read_file(VG_TEST_DATA "/lines.cubin", &size);
    unsigned char *plain = vgt_read_file(VG_TEST_DATA "/two_kernels.cubin", &plain_size);
    CUmodule a = (CUmodule)(uintptr_t)0x1000, b = (CUmodule)(uintptr_t)0x2000;
    char line[512];
    vg__memcheck_lines_loaded(a, img, size);
    vg__memcheck_lines_loaded(b, plain, plain_size); /* (no lines: nothing kept) */
    free(img); /* (the callback's image lives only as long as the callback) */
    CHECK(vg__memcheck_line(a, "read_past", 0x80, line, sizeof line));
    CHECK(ends_with(line, "/lines.cu:9"));
    CHECK(!vg__memcheck_line(b, "read_past", 0x80, line, sizeof line));
    CHECK(!vg__memcheck_line(a, "read_past", 0x200, line, sizeof line));
    size_t n;
    char **names = vg__memcheck_line_functions(a, &n);
    CHECK_EQ(n, 2);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    CHECK(vg__memcheck_line_functions(b, &n) == NULL && n == 0);
    vg__memcheck_lines_loaded(a, plain, plain_size); /* the handle, another module */
    CHECK(!vg__memcheck_line(a, "read_past", 0x80, line, sizeof line));
    img = vgt_read_file(VG_TEST_DATA "/lines.cubin", &size);
    vg__memcheck_lines_loaded(b, img, size);
    CHECK(vg__memcheck_line(b, "_Z5scalePKfPfi", 0x150, line, sizeof line));
    CHECK(ends_with(line, "/lines.cu:14"));
    vg__memcheck_lines_unloaded(b);
    CHECK(!vg__memcheck_line(b, "_Z5scalePKfPfi", 0x150, line, sizeof line));
    free(img);
    free(plain);
}
