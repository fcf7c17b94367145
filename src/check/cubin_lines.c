/* cubin_lines.c — source lines of a cubin's machine code (see cubin_lines.h).
 *
 * The DWARF line program (DWARF 4, section 6.2) is run as its state machine: each row it
 * emits is (address, file, line), and an end_sequence row closes the range before it.
 * In a cubin each sequence begins with DW_LNE_set_address at a relocation against the
 * function's symbol, so the function is the relocation's symbol and the address is its
 * addend plus the advances after it. A sequence with no relocation names no function
 * this can tell, and is dropped.
 */
#include "cubin_lines.h"

#include <stdlib.h>
#include <string.h>

#include "elf_image.h"

#define NO_FUNC UINT32_MAX

typedef struct {
    uint32_t func, file; /* function id; file: offset in the string pool */
    uint32_t line, end;  /* end: an end_sequence row (no line from here on) */
    uint64_t addr;
    size_t order; /* (rows of one address stay in the order the program emitted them) */
} row_t;

struct vg_lines {
    row_t *rows;
    size_t nrows, rows_cap;
    char *pool; /* NUL-terminated strings: file paths, function names */
    size_t npool, pool_cap, pool_max; /* (pool_max: a damaged image's bound) */
    uint32_t *funcs; /* id -> its name's offset in the pool; then, the id kept for its name */
    size_t nfuncs, funcs_cap;
    struct by_name {
        const char *name; /* (in the pool, which no longer moves once the table is made) */
        uint32_t id;
    } *by_name; /* the functions sorted by name, each name once */
    size_t nnames;
};

/* ---- growable arrays ---------------------------------------------------------------- */

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* Appends a..b (b may be NULL) joined by '/' when both are there; the offset, or
 * UINT32_MAX for no memory. */
static uint32_t pool_add(vg_lines_t *t, const char *a, const char *b) {
    size_t na = strlen(a), nb = b ? strlen(b) : 0, n = na + (b ? nb + 1 : 0) + 1;
    if (t->npool + n > t->pool_max || t->npool + n > UINT32_MAX - 1 ||
        !grow((void **)&t->pool, &t->pool_cap, t->npool + n, 1))
        return UINT32_MAX;
    uint32_t at = (uint32_t)t->npool;
    memcpy(t->pool + at, a, na);
    if (b) {
        t->pool[at + na] = '/';
        memcpy(t->pool + at + na + 1, b, nb);
    }
    t->pool[at + n - 1] = '\0';
    t->npool += n;
    return at;
}

/* ---- a cursor over bytes that may end anywhere --------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    bool bad;
} cur_t;

static uint64_t get_n(cur_t *c, unsigned n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

static uint64_t uleb(cur_t *c) {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        uint64_t b = get_n(c, 1);
        if (c->bad)
            return 0;
        if (shift < 64)
            v |= (b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t sleb(cur_t *c) {
    uint64_t v = 0;
    unsigned shift = 0;
    uint64_t b;
    do {
        b = get_n(c, 1);
        if (c->bad)
            return 0;
        if (shift < 64)
            v |= (b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~0ull << shift;
    return (int64_t)v;
}

static const char *cstr(cur_t *c) {
    const unsigned char *nul = c->bad ? NULL : memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!nul) {
        c->bad = true;
        return "";
    }
    const char *s = (const char *)c->p;
    c->p = nul + 1;
    return s;
}

/* ---- relocations of .debug_line: which function a set_address names ----------------- */

typedef struct {
    uint64_t at; /* offset in .debug_line */
    uint32_t sym;
    bool rela;      /* RELA: the address is the addend; REL: the bytes stored there */
    int64_t addend;
} reloc_t;

typedef struct {
    reloc_t *r;
    size_t n;
    const Elf64_Sym *syms; /* (copied out: aligned) */
    size_t nsyms;
    const char *names;
    size_t nnames;
    const vg_elf_t *elf; /* (a section symbol is named by its section: .text.NAME) */
    uint32_t *func_of_sym; /* symbol index -> function id + 1, 0: none yet */
} relocs_t;

static int reloc_cmp(const void *a, const void *b) {
    const reloc_t *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The RELA (or REL) sections that apply to section `target`, and their symbol table. */
static bool read_relocs(const vg_elf_t *e, unsigned target, relocs_t *out) {
    memset(out, 0, sizeof *out);
    out->elf = e;
    size_t cap = 0;
    for (unsigned i = 1; i < e->eh.e_shnum; i++) {
        Elf64_Shdr sh, symsh;
        if (!vg__elf_section(e, i, &sh) || (sh.sh_type != SHT_RELA && sh.sh_type != SHT_REL) ||
            sh.sh_info != target)
            continue;
        bool rela = sh.sh_type == SHT_RELA;
        size_t esz = rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
        if (sh.sh_entsize != esz || !vg__elf_section(e, sh.sh_link, &symsh) ||
            symsh.sh_entsize != sizeof(Elf64_Sym))
            continue;
        if (!out->syms) { /* (one symbol table: a cubin has one) */
            const char *names = vg__elf_strtab(e, symsh.sh_link, &out->nnames);
            size_t nsyms = symsh.sh_size / sizeof(Elf64_Sym);
            Elf64_Sym *syms = nsyms ? malloc(nsyms * sizeof *syms) : NULL;
            out->func_of_sym = nsyms ? calloc(nsyms, sizeof *out->func_of_sym) : NULL;
            if (!names || !syms || !out->func_of_sym) {
                free(syms);
                free(out->func_of_sym);
                out->func_of_sym = NULL;
                continue;
            }
            memcpy(syms, e->img + symsh.sh_offset, nsyms * sizeof *syms);
            out->syms = syms;
            out->nsyms = nsyms;
            out->names = names;
        }
        for (size_t k = 0; k < sh.sh_size / esz; k++) {
            Elf64_Rela r = {0};
            memcpy(&r, e->img + sh.sh_offset + k * esz, esz);
            if (!grow((void **)&out->r, &cap, out->n + 1, sizeof *out->r))
                return false;
            out->r[out->n++] = (reloc_t){r.r_offset, (uint32_t)ELF64_R_SYM(r.r_info), rela,
                                         rela ? r.r_addend : 0};
        }
    }
    if (out->n)
        qsort(out->r, out->n, sizeof *out->r, reloc_cmp);
    return true;
}

static const reloc_t *reloc_at(const relocs_t *rs, uint64_t at) {
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->r[mid].at < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rs->n && rs->r[lo].at == at ? &rs->r[lo] : NULL;
}

/* Symbol sym's function name: its own, or for a section symbol its section's name past
 * ".text." (a relocation may name the section a function's code is in); NULL if none. */
static const char *sym_name(const relocs_t *rs, uint32_t sym) {
    const Elf64_Sym *y = &rs->syms[sym];
    if (ELF64_ST_TYPE(y->st_info) == STT_SECTION) {
        static const char text[] = ".text.";
        Elf64_Shdr sh;
        size_t n;
        const char *names = vg__elf_strtab(rs->elf, rs->elf->eh.e_shstrndx, &n);
        if (!names || !vg__elf_section(rs->elf, y->st_shndx, &sh) || sh.sh_name >= n ||
            strncmp(names + sh.sh_name, text, sizeof text - 1) != 0)
            return NULL;
        return names + sh.sh_name + sizeof text - 1;
    }
    return y->st_name < rs->nnames ? rs->names + y->st_name : NULL;
}

/* The function id of symbol `sym`, made on first use; NO_FUNC if it has no name. */
static uint32_t func_of(vg_lines_t *t, relocs_t *rs, uint32_t sym) {
    const char *fname = sym < rs->nsyms ? sym_name(rs, sym) : NULL;
    if (!fname || !*fname)
        return NO_FUNC;
    if (rs->func_of_sym[sym])
        return rs->func_of_sym[sym] - 1;
    uint32_t name = pool_add(t, fname, NULL);
    if (name == UINT32_MAX || t->nfuncs >= UINT32_MAX - 1 ||
        !grow((void **)&t->funcs, &t->funcs_cap, t->nfuncs + 1, sizeof *t->funcs))
        return NO_FUNC;
    t->funcs[t->nfuncs] = name;
    rs->func_of_sym[sym] = (uint32_t)++t->nfuncs;
    return (uint32_t)t->nfuncs - 1;
}

/* ---- one line program --------------------------------------------------------------- */

typedef struct {
    uint8_t min_inst, line_range, opcode_base;
    int8_t line_base;
    const unsigned char *std_lengths; /* opcode_base - 1 of them */
    uint32_t *files;                  /* file index - 1 -> pool offset (UINT32_MAX: none) */
    size_t nfiles, files_cap;
} unit_t;

static bool add_file(vg_lines_t *t, unit_t *u, const char *name, const char **dirs,
                     size_t ndirs, uint64_t dir) {
    uint32_t at;
    if (name[0] == '/' || dir == 0 || dir > ndirs)
        at = pool_add(t, name, NULL);
    else
        at = pool_add(t, dirs[dir - 1], name);
    if (!grow((void **)&u->files, &u->files_cap, u->nfiles + 1, sizeof *u->files))
        return false;
    u->files[u->nfiles++] = at;
    return true;
}

static void emit(vg_lines_t *t, const unit_t *u, uint32_t func, uint64_t file,
                 uint64_t line, uint64_t addr, bool end) {
    if (func == NO_FUNC || !file || file > u->nfiles || u->files[file - 1] == UINT32_MAX ||
        line > UINT32_MAX || !grow((void **)&t->rows, &t->rows_cap, t->nrows + 1, sizeof *t->rows))
        return;
    t->rows[t->nrows] = (row_t){func, u->files[file - 1], (uint32_t)line, end, addr, t->nrows};
    t->nrows++;
}

/* Runs the program of the unit at c (DWARF 2 to 4); false when it cannot be read on. */
static bool run_unit(vg_lines_t *t, relocs_t *rs, const unsigned char *section, cur_t *c) {
    uint64_t len = get_n(c, 4);
    unsigned offset_size = 4;
    if (len == 0xffffffffu) {
        len = get_n(c, 8);
        offset_size = 8;
    }
    if (c->bad || len > (uint64_t)(c->end - c->p))
        return false;
    cur_t unit = {c->p, c->p + len, false};
    c->p += len; /* (the next unit, whatever becomes of this one) */
    unsigned version = (unsigned)get_n(&unit, 2);
    if (version < 2 || version > 4)
        return true; /* (DWARF 5's tables are not read: its unit is skipped) */
    uint64_t header_len = get_n(&unit, offset_size);
    if (unit.bad || header_len > (uint64_t)(unit.end - unit.p))
        return true;
    const unsigned char *program = unit.p + header_len;
    unit_t u = {0};
    u.min_inst = (uint8_t)get_n(&unit, 1);
    if (version >= 4)
        get_n(&unit, 1); /* maximum_operations_per_instruction (VLIW only) */
    get_n(&unit, 1);     /* default_is_stmt */
    u.line_base = (int8_t)get_n(&unit, 1);
    u.line_range = (uint8_t)get_n(&unit, 1);
    u.opcode_base = (uint8_t)get_n(&unit, 1);
    u.std_lengths = unit.p;
    if (unit.bad || !u.line_range || !u.opcode_base ||
        (size_t)(unit.end - unit.p) < u.opcode_base - 1u)
        return true;
    unit.p += u.opcode_base - 1;
    const char *dirs[256];
    size_t ndirs = 0;
    for (const char *d; !unit.bad && *(d = cstr(&unit));)
        if (ndirs < sizeof dirs / sizeof *dirs)
            dirs[ndirs++] = d;
    for (const char *f; !unit.bad && *(f = cstr(&unit));) {
        uint64_t dir = uleb(&unit);
        uleb(&unit), uleb(&unit); /* modification time, length */
        if (unit.bad || !add_file(t, &u, f, dirs, ndirs, dir))
            break;
    }
    if (unit.bad || program > unit.end) {
        free(u.files);
        return true;
    }
    unit.p = program;

    uint32_t func = NO_FUNC;
    uint64_t addr = 0, file = 1, line = 1;
    while (!unit.bad && unit.p < unit.end) {
        unsigned op = (unsigned)get_n(&unit, 1);
        if (op >= u.opcode_base) { /* special: advance both, emit a row */
            unsigned adj = op - u.opcode_base;
            addr += (uint64_t)(adj / u.line_range) * u.min_inst;
            line += (int64_t)u.line_base + adj % u.line_range;
            emit(t, &u, func, file, line, addr, false);
            continue;
        }
        switch (op) {
        case 0: { /* extended */
            uint64_t n = uleb(&unit);
            if (unit.bad || !n || n > (uint64_t)(unit.end - unit.p)) {
                unit.bad = true;
                break;
            }
            const unsigned char *next = unit.p + n;
            unsigned sub = (unsigned)get_n(&unit, 1);
            if (sub == 1) { /* DW_LNE_end_sequence */
                emit(t, &u, func, file, line, addr, true);
                func = NO_FUNC, addr = 0, file = 1, line = 1;
            } else if (sub == 2 && n - 1 <= 8) { /* DW_LNE_set_address */
                const reloc_t *r = reloc_at(rs, (uint64_t)(unit.p - section));
                uint64_t stored = get_n(&unit, (unsigned)(n - 1));
                func = r ? func_of(t, rs, r->sym) : NO_FUNC;
                addr = r && r->rela ? (uint64_t)r->addend : stored;
            } else if (sub == 3) { /* DW_LNE_define_file */
                const char *f = cstr(&unit);
                uint64_t dir = uleb(&unit);
                if (!unit.bad)
                    add_file(t, &u, f, dirs, ndirs, dir);
            }
            unit.p = next;
            break;
        }
        case 1: /* DW_LNS_copy */
            emit(t, &u, func, file, line, addr, false);
            break;
        case 2: /* DW_LNS_advance_pc */
            addr += uleb(&unit) * u.min_inst;
            break;
        case 3: /* DW_LNS_advance_line */
            line += (uint64_t)sleb(&unit);
            break;
        case 4: /* DW_LNS_set_file */
            file = uleb(&unit);
            break;
        case 8: /* DW_LNS_const_add_pc */
            addr += (uint64_t)((255u - u.opcode_base) / u.line_range) * u.min_inst;
            break;
        case 9: /* DW_LNS_fixed_advance_pc */
            addr += get_n(&unit, 2);
            break;
        default: /* the rest change nothing this keeps: skip their operands */
            for (unsigned k = 0; k < u.std_lengths[op - 1]; k++)
                uleb(&unit);
        }
    }
    free(u.files);
    return true;
}

/* ---- the table ---------------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    if (x->func != y->func)
        return x->func < y->func ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->end != y->end) /* (a sequence's end before the next one's start at its address) */
        return x->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(((const struct by_name *)a)->name, ((const struct by_name *)b)->name);
}

vg_lines_t *vg__lines_read(const void *image, size_t size) {
    vg_elf_t e;
    Elf64_Shdr dl;
    unsigned at;
    if (!vg__elf_open(&e, image, size) || !(at = vg__elf_find(&e, ".debug_line", &dl)))
        return NULL;
    vg_lines_t *t = calloc(1, sizeof *t);
    if (t) /* file paths join a directory and a name, both in the section */
        t->pool_max = 8 * (size_t)dl.sh_size + (1u << 20);
    relocs_t rs;
    bool ok = t && read_relocs(&e, at, &rs);
    if (ok) {
        const unsigned char *section = e.img + dl.sh_offset;
        cur_t c = {section, section + dl.sh_size, false};
        while (c.p < c.end && run_unit(t, &rs, section, &c))
            ;
    }
    if (t) {
        free(rs.r);
        free((void *)rs.syms);
        free(rs.func_of_sym);
    }
    if (!ok || !t->nrows || !(t->by_name = malloc(t->nfuncs * sizeof *t->by_name))) {
        vg__lines_free(t);
        return NULL;
    }
    for (size_t i = 0; i < t->nfuncs; i++)
        t->by_name[i] = (struct by_name){t->pool + t->funcs[i], (uint32_t)i};
    qsort(t->by_name, t->nfuncs, sizeof *t->by_name, name_cmp);
    /* One id a name: a function's symbol and its section's may both start sequences.
     * (funcs[] is done with: it becomes each id's id for its name.) */
    for (size_t i = 0; i < t->nfuncs; i++) {
        if (t->nnames && strcmp(t->by_name[i].name, t->by_name[t->nnames - 1].name) == 0) {
            t->funcs[t->by_name[i].id] = t->by_name[t->nnames - 1].id;
        } else {
            t->funcs[t->by_name[i].id] = t->by_name[i].id;
            t->by_name[t->nnames++] = t->by_name[i];
        }
    }
    for (size_t i = 0; i < t->nrows; i++)
        t->rows[i].func = t->funcs[t->rows[i].func];
    qsort(t->rows, t->nrows, sizeof *t->rows, row_cmp);
    return t;
}

void vg__lines_free(vg_lines_t *t) {
    if (!t)
        return;
    free(t->rows);
    free(t->pool);
    free(t->funcs);
    free(t->by_name);
    free(t);
}

bool vg__lines_find(const vg_lines_t *t, const char *function, uint64_t offset,
                    const char **file, unsigned *line) {
    if (!t || !function)
        return false;
    size_t lo = 0, hi = t->nnames;
    while (lo < hi) { /* the function, by name */
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->by_name[mid].name, function);
        if (c == 0)
            lo = hi = mid;
        else if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= t->nnames || strcmp(t->by_name[lo].name, function) != 0)
        return false;
    uint32_t f = t->by_name[lo].id;
    /* The last row of f at or below offset. */
    lo = 0, hi = t->nrows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const row_t *r = &t->rows[mid];
        if (r->func < f || (r->func == f && r->addr <= offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return false;
    const row_t *r = &t->rows[lo - 1];
    if (r->func != f || r->end || !r->line)
        return false;
    *file = t->pool + r->file;
    *line = r->line;
    return true;
}

size_t vg__lines_functions(const vg_lines_t *t) { return t ? t->nnames : 0; }

const char *vg__lines_function(const vg_lines_t *t, size_t i) {
    return t && i < t->nnames ? t->by_name[i].name : NULL;
}
