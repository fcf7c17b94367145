/* cubin_lines.h — source lines of a cubin's machine code, read without the driver.
 *
 * memcheck mode names the kernel and the offset of the access in it (`kernel+0x90`); a
 * module built with line information (`nvcc -lineinfo` or `-G`, and every Triton kernel)
 * also says which line of which file that is. The cubin's `.debug_line` section is a
 * DWARF line program (versions 2 to 4) whose sequences start at a relocation against a
 * function's symbol: one sequence a function, addresses counted from its start. This
 * reads it into a table of (function, offset) -> (file, line), as `readelf
 * --debug-dump=decodedline` would print it (tests/unit/test_cubin_lines.c checks it
 * against that).
 *
 * Every read is bounded by `size`: a damaged image gives fewer lines or none, never a
 * crash.
 */
#ifndef VG_CUBIN_LINES_H
#define VG_CUBIN_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vg_lines vg_lines_t;

/* The lines of `image` (a cubin), or NULL: not a cubin, no line information, or no
 * memory. */
vg_lines_t *vg__lines_read(const void *image, size_t size);
void vg__lines_free(vg_lines_t *t);

/* The file and line of the instruction at `offset` bytes into `function` (its mangled
 * name, as the symbol table has it). False if the table has no line there (line 0 is
 * none: code the compiler made). *file lives as long as the table. */
bool vg__lines_find(const vg_lines_t *t, const char *function, uint64_t offset,
                    const char **file, unsigned *line);

/* The functions the table has lines for: n, and the i-th's name. */
size_t vg__lines_functions(const vg_lines_t *t);
const char *vg__lines_function(const vg_lines_t *t, size_t i);

#endif /* VG_CUBIN_LINES_H */
