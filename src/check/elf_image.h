/* elf_image.h — bounded reads of an ELF64 image handed over by someone else (a module's
 * cubin, from the Compute Sanitizer API's module-loaded callback).
 *
 * Nothing here trusts the image: every header is copied out (the image need not be
 * aligned) and every section checked to lie inside `size` before it is read. A damaged
 * image is "not there", never a crash (tests/unit/test_kernel_names.c and
 * test_cubin_lines.c feed them damaged cubins by the thousand).
 */
#ifndef VG_ELF_IMAGE_H
#define VG_ELF_IMAGE_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct vg_elf {
    const unsigned char *img;
    size_t size;
    Elf64_Ehdr eh;
} vg_elf_t;

/* A little-endian ELF64 image whose section headers lie inside it. */
bool vg__elf_open(vg_elf_t *e, const void *image, size_t size);

/* Section i's header, if its bytes lie inside the image (SHT_NOBITS: none to read). */
bool vg__elf_section(const vg_elf_t *e, unsigned i, Elf64_Shdr *out);

/* Section i as a string table: its bytes, whose last is NUL; NULL if it is not one. */
const char *vg__elf_strtab(const vg_elf_t *e, unsigned i, size_t *size);

/* The section named `name` (looked up through e_shstrndx): its index, or 0 if none. */
unsigned vg__elf_find(const vg_elf_t *e, const char *name, Elf64_Shdr *out);

#endif /* VG_ELF_IMAGE_H */
