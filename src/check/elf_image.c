/* elf_image.c — bounded reads of an ELF64 image (see elf_image.h). */
#include "elf_image.h"

#include <string.h>

bool vg__elf_open(vg_elf_t *e, const void *image, size_t size) {
    e->img = image;
    e->size = size;
    if (!image || size < sizeof e->eh || memcmp(image, ELFMAG, SELFMAG) != 0)
        return false;
    memcpy(&e->eh, image, sizeof e->eh);
    return e->eh.e_ident[EI_CLASS] == ELFCLASS64 && e->eh.e_ident[EI_DATA] == ELFDATA2LSB &&
           e->eh.e_shentsize == sizeof(Elf64_Shdr) && e->eh.e_shoff <= size &&
           e->eh.e_shnum <= (size - e->eh.e_shoff) / sizeof(Elf64_Shdr);
}

bool vg__elf_section(const vg_elf_t *e, unsigned i, Elf64_Shdr *out) {
    if (i >= e->eh.e_shnum)
        return false;
    memcpy(out, e->img + e->eh.e_shoff + (size_t)i * sizeof *out, sizeof *out);
    return out->sh_type != SHT_NOBITS && out->sh_offset <= e->size &&
           out->sh_size <= e->size - out->sh_offset;
}

const char *vg__elf_strtab(const vg_elf_t *e, unsigned i, size_t *size) {
    Elf64_Shdr sh;
    if (!vg__elf_section(e, i, &sh) || !sh.sh_size || e->img[sh.sh_offset + sh.sh_size - 1])
        return NULL;
    *size = sh.sh_size;
    return (const char *)e->img + sh.sh_offset;
}

unsigned vg__elf_find(const vg_elf_t *e, const char *name, Elf64_Shdr *out) {
    size_t nnames;
    const char *names = vg__elf_strtab(e, e->eh.e_shstrndx, &nnames);
    if (!names)
        return 0;
    for (unsigned i = 1; i < e->eh.e_shnum; i++)
        if (vg__elf_section(e, i, out) && out->sh_name < nnames &&
            strcmp(names + out->sh_name, name) == 0)
            return i;
    return 0;
}
