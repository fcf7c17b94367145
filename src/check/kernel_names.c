/* kernel_names.c — the kernels a module image defines (see kernel_names.h). */
#include "kernel_names.h"

#include <string.h>

#include "elf_image.h"

/* A cubin: every function symbol of its symbol tables (kernels, and device functions the
 * compiler kept out of line: a pattern naming one of those patches the module too). */
static int elf_each(const void *image, size_t size, bool (*fn)(const char *name, void *arg),
                    void *arg) {
    vg_elf_t e;
    if (!vg__elf_open(&e, image, size))
        return -1;
    bool any_table = false;
    for (unsigned i = 0; i < e.eh.e_shnum; i++) {
        Elf64_Shdr sh;
        size_t nnames;
        if (!vg__elf_section(&e, i, &sh) || sh.sh_type != SHT_SYMTAB ||
            sh.sh_entsize != sizeof(Elf64_Sym))
            continue;
        const char *names = vg__elf_strtab(&e, sh.sh_link, &nnames);
        if (!names)
            continue;
        any_table = true;
        for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, e.img + sh.sh_offset + k * sizeof sym, sizeof sym);
            if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_name < nnames &&
                names[sym.st_name] && fn(names + sym.st_name, arg))
                return 1;
        }
    }
    return any_table ? 0 : -1;
}

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '$';
}

/* PTX text: the name after each ".entry" directive (comments skipped). */
static int ptx_each(const char *text, size_t size, bool (*fn)(const char *name, void *arg),
                    void *arg) {
    static const char entry[] = ".entry";
    const size_t n = sizeof entry - 1;
    bool any = false;
    for (size_t i = 0; i + n < size && text[i]; i++) {
        if (text[i] == '/' && text[i + 1] == '/') { /* to the end of the line */
            while (i + 1 < size && text[i + 1] && text[i + 1] != '\n')
                i++;
            continue;
        }
        if (text[i] == '/' && text[i + 1] == '*') { /* past the closing star-slash */
            for (i += 2; i + 1 < size && text[i] && !(text[i] == '*' && text[i + 1] == '/'); i++)
                ;
            i++; /* (on the slash: the loop's step goes past it) */
            continue;
        }
        if (memcmp(text + i, entry, n) != 0 || name_char(text[i + n]))
            continue;
        size_t j = i + n;
        while (j < size && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' ||
                            text[j] == '\r'))
            j++;
        char name[512];
        size_t k = 0;
        while (j < size && name_char(text[j]) && k + 1 < sizeof name)
            name[k++] = text[j++];
        if (j < size && name_char(text[j]))
            return -1; /* a name longer than this reads: cannot tell (patch the module) */
        if (!k)
            continue;
        name[k] = '\0';
        any = true;
        if (fn(name, arg))
            return 1;
    }
    return any ? 0 : -1;
}

int vg__kernel_names_each(const void *image, size_t size,
                          bool (*fn)(const char *name, void *arg), void *arg) {
    const unsigned char *img = image;
    if (!img || size < 4)
        return -1;
    if (memcmp(img, ELFMAG, SELFMAG) == 0)
        return elf_each(img, size, fn, arg);
    size_t i = 0; /* PTX starts with a comment or a directive (.version) */
    while (i < size && (img[i] == ' ' || img[i] == '\t' || img[i] == '\n' || img[i] == '\r'))
        i++;
    if (i < size && (img[i] == '/' || img[i] == '.'))
        return ptx_each((const char *)img, size, fn, arg);
    return -1;
}
