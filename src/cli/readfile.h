/* readfile.h — a whole file into memory, for the CLI's readers (traces, snapshots). */
#ifndef VG_CLI_READFILE_H
#define VG_CLI_READFILE_H

#include <stddef.h>

/* The contents of `path` (caller frees) and their length; NULL with a message naming the
 * file in err when it cannot be opened or read, or does not fit in memory. A gzip file
 * (found by its magic bytes, whatever its name) is read decompressed, by `gzip -dc`, if
 * it can be read from its start again (a file; a compressed pipe is refused, with a
 * message); a pipe of plain text is read whole. */
char *cli_read_file(const char *path, size_t *len, char *err, size_t errlen);

#endif /* VG_CLI_READFILE_H */
