/* kernel_names.h — the kernels a module image defines, read without the driver.
 *
 * memcheck mode with `memcheck_kernels=PATTERNS` patches only the modules that define a
 * kernel the patterns name (a module left unpatched runs at full speed: docs/memcheck.md).
 * The Compute Sanitizer API hands the module-loaded callback the module's image: a cubin
 * (ELF) on a GPU, PTX text on vgsim. Every read is bounded by `size`: a damaged or
 * unexpected image is "cannot tell", never a crash.
 */
#ifndef VG_KERNEL_NAMES_H
#define VG_KERNEL_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* Calls fn(name, arg) for each function the image defines, until fn returns true.
 * Returns 1 if fn returned true, 0 if the image was read and it never did, -1 if the
 * image is not one this reads (not ELF64 nor PTX text, or no symbol table). */
int vg__kernel_names_each(const void *image, size_t size,
                          bool (*fn)(const char *name, void *arg), void *arg);

#endif /* VG_KERNEL_NAMES_H */
