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
#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check/cubin_lines.h"
#include "check/elf_image.h"
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
    /* The image cut short (mostly refused as ELF), and .debug_line cut at every length by
     * its section header (the line programs read up to the section's end). */
    vg_elf_t e;
    Elf64_Shdr dl;
    unsigned dl_index;
    CHECK(vg__elf_open(&e, orig, size) && (dl_index = vg__elf_find(&e, ".debug_line", &dl)));
    size_t dl_size_at = e.eh.e_shoff + dl_index * sizeof(Elf64_Shdr) +
                        offsetof(Elf64_Shdr, sh_size);
    int whole = 0;
    for (size_t cut = 0; cut <= size + dl.sh_size;
         cut = cut < 256 || cut >= size ? cut + 1 : cut + 13 < size ? cut + 13 : size) {
        size_t n = cut <= size ? cut : size;
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, orig, n);
        if (cut > size) { /* (the whole image, its .debug_line shorter) */
            uint64_t short_size = cut - size - 1;
            memcpy(copy + dl_size_at, &short_size, sizeof short_size);
        }
        vg_lines_t *t = vg__lines_read(copy, n);
        free(copy); /* (the table keeps nothing of the image) */
        if (cut == size) { /* (the whole image, as it is) */
            CHECK(t != NULL);
            whole++;
        }
        for (uint64_t off = 0; t && off < 0x240; off += 0x10)
            for (size_t f = 0; f < 3; f++)
                (void)strlen(at(t, fns[f], off));
        vg__lines_free(t);
    }
    CHECK_EQ(whole, 1);
    unsigned seed = 4242;
    int tables = 0;
    for (int round = 0; round < 3000; round++) {
        unsigned char *copy = malloc(size);
        memcpy(copy, orig, size);
        /* The ELF header, anywhere, .debug_line, .rela.debug_line (readelf -S). */
        static const size_t base[4] = {0, 0, 0x858, 0x14f0};
        size_t span[4] = {64, size, 0xeb, 0x30};
        for (int k = 0; k < 1 + round % 6; k++)
            vgt_scribble(copy, size, &seed, base[round % 4], span[round % 4]);
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
 * callback, kept a while after the unload, replaced when the handle is loaded again. */
VG_TEST(memcheck_keeps_the_lines_of_each_module_a_while_after_it_unloads) {
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
    /* Unloaded, its lines stay for reports read after the unload, until 64 more modules
     * have unloaded; loaded with no image, the handle's lines go at once. */
    vg__memcheck_lines_unloaded(b);
    CHECK(vg__memcheck_line(b, "_Z5scalePKfPfi", 0x150, line, sizeof line));
    for (uintptr_t k = 0; k < 63; k++)
        vg__memcheck_lines_unloaded((CUmodule)(0x9000 + k));
    CHECK(vg__memcheck_line(b, "_Z5scalePKfPfi", 0x150, line, sizeof line));
    vg__memcheck_lines_unloaded((CUmodule)(uintptr_t)0x9999);
    CHECK(!vg__memcheck_line(b, "_Z5scalePKfPfi", 0x150, line, sizeof line));
    vg__memcheck_lines_loaded(a, img, size);
    CHECK(vg__memcheck_line(a, "read_past", 0x80, line, sizeof line));
    vg__memcheck_lines_loaded(a, NULL, 0);
    CHECK(!vg__memcheck_line(a, "read_past", 0x80, line, sizeof line));
    free(img);
    free(plain);
}

/* ---- synthetic cubins: what nvcc's do not use, built byte by byte ------------------- */

typedef struct {
    unsigned char b[4096];
    size_t n;
} buf_t;

static void put(buf_t *o, uint64_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; i++)
        o->b[o->n++] = (unsigned char)(v >> (8 * i));
}
static void put_uleb(buf_t *o, uint64_t v) {
    do {
        unsigned char c = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = c | (v ? 0x80 : 0);
    } while (v);
}
static void put_sleb(buf_t *o, int64_t v) {
    for (bool more = true; more;) {
        unsigned char c = v & 0x7f;
        v >>= 7; /* (arithmetic: v is signed) */
        more = !((v == 0 && !(c & 0x40)) || (v == -1 && (c & 0x40)));
        o->b[o->n++] = c | (more ? 0x80 : 0);
    }
}
static void put_str(buf_t *o, const char *s) {
    size_t k = strlen(s) + 1;
    memcpy(o->b + o->n, s, k);
    o->n += k;
}

typedef struct {
    uint64_t at;
    uint32_t sym;
    int64_t addend;
} rel_t;

/* One line program unit: DWARF `version`, 64-bit offsets or not, minimum instruction
 * length 2. Two sequences of function "kern" (symbol 1; the second through symbol 2, the
 * section symbol of .text.kern):
 *   from 0x100: a.cu:5; +34 (const_add_pc) line 6; +0x10 (fixed_advance_pc) line 7;
 *   b.cu (define_file) +2 line 8 (a special opcode); end at 0x154
 *   from 0x0: a.cu:100; end at 0x10 */
static void unit(buf_t *o, rel_t *rels, int *nrels, unsigned version, bool dwarf64) {
    size_t start = o->n;
    if (dwarf64)
        put(o, 0xffffffffu, 4);
    put(o, 0, dwarf64 ? 8 : 4); /* unit_length, set below */
    size_t body = o->n;
    put(o, version, 2);
    size_t hl = o->n;
    put(o, 0, dwarf64 ? 8 : 4); /* header_length, set below */
    size_t hstart = o->n;
    put(o, 2, 1); /* minimum_instruction_length */
    if (version >= 4)
        put(o, 1, 1); /* maximum_operations_per_instruction */
    put(o, 1, 1);      /* default_is_stmt */
    put(o, 0xfb, 1);   /* line_base -5 */
    put(o, 14, 1);     /* line_range */
    put(o, 13, 1);     /* opcode_base */
    static const unsigned char lengths[12] = {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
    memcpy(o->b + o->n, lengths, sizeof lengths);
    o->n += sizeof lengths;
    put_str(o, "/src");
    put(o, 0, 1);
    put_str(o, "a.cu");
    put_uleb(o, 1), put_uleb(o, 0), put_uleb(o, 0);
    put(o, 0, 1);
    uint64_t header_length = o->n - hstart;
    for (unsigned i = 0; i < (dwarf64 ? 8u : 4u); i++)
        o->b[hl + i] = (unsigned char)(header_length >> (8 * i));
    /* sequence 1 */
    put(o, 0, 1), put_uleb(o, 9), put(o, 2, 1);
    rels[(*nrels)++] = (rel_t){o->n, 1, 0x100};
    put(o, 0, 8);
    put(o, 3, 1), put_sleb(o, 4); /* advance_line: 5 */
    put(o, 1, 1);                 /* copy */
    put(o, 8, 1);                 /* const_add_pc: (255 - 13) / 14 * 2 = 34 */
    put(o, 3, 1), put_sleb(o, 1), put(o, 1, 1);
    put(o, 9, 1), put(o, 0x10, 2); /* fixed_advance_pc (not scaled) */
    put(o, 3, 1), put_sleb(o, 1), put(o, 1, 1);
    put(o, 0, 1), put_uleb(o, 1 + 5 + 3), put(o, 3, 1); /* define_file b.cu, no directory */
    put_str(o, "b.cu");
    put_uleb(o, 0), put_uleb(o, 0), put_uleb(o, 0);
    put(o, 4, 1), put_uleb(o, 2);  /* set_file */
    put(o, 13 + 14 + 6, 1);        /* special: address + 2, line + 1 */
    put(o, 2, 1), put_uleb(o, 0x10); /* advance_pc: 0x20 */
    put(o, 0, 1), put_uleb(o, 1), put(o, 1, 1); /* end_sequence */
    /* sequence 2 */
    put(o, 0, 1), put_uleb(o, 9), put(o, 2, 1);
    rels[(*nrels)++] = (rel_t){o->n, 2, 0};
    put(o, 0, 8);
    put(o, 3, 1), put_sleb(o, 99), put(o, 1, 1); /* (two bytes: 99 has bit 6 set) */
    put(o, 2, 1), put_uleb(o, 8);
    put(o, 0, 1), put_uleb(o, 1), put(o, 1, 1);
    uint64_t len = o->n - body;
    for (unsigned i = 0; i < (dwarf64 ? 8u : 4u); i++)
        o->b[start + (dwarf64 ? 4 : 0) + i] = (unsigned char)(len >> (8 * i));
}

/* A cubin-shaped ELF with the units `lines` holds and their relocations. */
static size_t elf_with(unsigned char *out, const buf_t *lines, const rel_t *rels, int nrels) {
    static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab\0.debug_line\0.rela.debug_line\0.text.kern";
    static const char str[] = "\0kern";
    enum { SH_SHSTR = 1, SH_STR, SH_SYM, SH_LINE, SH_RELA, SH_TEXT, NSEC };
    const unsigned name_at[NSEC] = {0, 1, 11, 19, 27, 39, 56};
    Elf64_Sym syms[3] = {{0}};
    syms[1].st_name = 1, syms[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    syms[1].st_shndx = SH_TEXT, syms[1].st_size = 0x200;
    syms[2].st_info = ELF64_ST_INFO(STB_LOCAL, STT_SECTION), syms[2].st_shndx = SH_TEXT;
    Elf64_Rela rela[8];
    for (int i = 0; i < nrels; i++)
        rela[i] = (Elf64_Rela){rels[i].at, ELF64_R_INFO(rels[i].sym, 2), rels[i].addend};
    Elf64_Ehdr eh = {{0}};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64, eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_EXEC, eh.e_machine = 190 /* EM_CUDA */, eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof eh, eh.e_shentsize = sizeof(Elf64_Shdr), eh.e_shnum = NSEC;
    eh.e_shstrndx = SH_SHSTR;
    Elf64_Shdr sh[NSEC] = {{0}};
    size_t at = sizeof eh;
    const void *data[NSEC] = {NULL, shstr, str, syms, lines->b, rela, NULL};
    const size_t size[NSEC] = {0, sizeof shstr, sizeof str, sizeof syms, lines->n,
                               nrels * sizeof(Elf64_Rela), 0};
    for (int i = 1; i < NSEC; i++) {
        sh[i].sh_name = name_at[i];
        sh[i].sh_type = i == SH_SYM ? SHT_SYMTAB : i == SH_RELA ? SHT_RELA
                      : i == SH_SHSTR || i == SH_STR ? SHT_STRTAB : SHT_PROGBITS;
        sh[i].sh_offset = at, sh[i].sh_size = size[i];
        if (size[i])
            memcpy(out + at, data[i], size[i]);
        at += size[i];
    }
    sh[SH_SYM].sh_link = SH_STR, sh[SH_SYM].sh_entsize = sizeof(Elf64_Sym);
    sh[SH_RELA].sh_link = SH_SYM, sh[SH_RELA].sh_info = SH_LINE;
    sh[SH_RELA].sh_entsize = sizeof(Elf64_Rela);
    eh.e_shoff = at;
    memcpy(out + at, sh, sizeof sh);
    memcpy(out, &eh, sizeof eh);
    return at + sizeof sh;
}

VG_TEST(dwarf_3_and_4_and_64_bit_units_and_every_opcode_read_alike) {
    static const struct {
        unsigned version;
        bool dwarf64;
    } kinds[] = {{2, false}, {3, false}, {4, false}, {4, true}, {3, true}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        buf_t lines = {{0}, 0};
        rel_t rels[8];
        int nrels = 0;
        /* A DWARF 5 unit first (not read: skipped whole), then the one under test. */
        static const unsigned char v5[] = {8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0};
        memcpy(lines.b, v5, sizeof v5);
        lines.n = sizeof v5;
        unit(&lines, rels, &nrels, kinds[k].version, kinds[k].dwarf64);
        static unsigned char img[8192];
        size_t n = elf_with(img, &lines, rels, nrels);
        vg_lines_t *t = vg__lines_read(img, n);
        CHECK_MSG(t != NULL, "version %u, 64-bit %d: no lines", kinds[k].version,
                  kinds[k].dwarf64);
        static const struct {
            uint64_t off;
            const char *want;
        } at_[] = {{0x0, "a.cu:100"}, {0xf, "a.cu:100"}, {0x10, "-"}, {0xff, "-"},
                   {0x100, "a.cu:5"}, {0x121, "a.cu:5"}, {0x122, "a.cu:6"}, {0x131, "a.cu:6"},
                   {0x132, "a.cu:7"}, {0x134, "b.cu:8"}, {0x153, "b.cu:8"}, {0x154, "-"}};
        for (size_t i = 0; i < sizeof at_ / sizeof at_[0]; i++)
            CHECK_MSG(strcmp(at(t, "kern", at_[i].off), at_[i].want) == 0,
                      "version %u, 64-bit %d, kern+0x%llx: %s, expected %s", kinds[k].version,
                      kinds[k].dwarf64, (unsigned long long)at_[i].off,
                      at(t, "kern", at_[i].off), at_[i].want);
        const char *file;
        unsigned line;
        CHECK(vg__lines_find(t, "kern", 0x100, &file, &line));
        CHECK_STREQ(file, "/src/a.cu"); /* (the directory table's entry, joined) */
        CHECK(vg__lines_find(t, "kern", 0x134, &file, &line));
        CHECK_STREQ(file, "b.cu"); /* (defined in the program, with no directory) */
        CHECK_EQ(vg__lines_functions(t), 1);
        vg__lines_free(t);
    }
}
