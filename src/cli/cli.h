/* cli.h — what the vramguard command's verbs share. */
#ifndef VG_CLI_H
#define VG_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "vramguard.h"

/* Exit codes of the CLI itself (a verb that runs a program returns the program's). */
enum {
    CLI_OK = 0,
    CLI_FAILED = 1,  /* the verb ran and found a problem (demo missed a bug, OOM, ...) */
    CLI_USAGE = 2,   /* bad command line, bad option, unreadable or malformed input */
};

/* Parsed command line of a verb: option flags folded into one VRAMGUARD_OPTIONS string,
 * verb-specific flags and positional arguments left for the verb. */
typedef struct cli_args {
    char options[8192]; /* "key=value,..." from --key=value flags */
    int argc;           /* what is left, in order */
    char **argv;
    char **rest;        /* after "--" (run), or NULL */
    int nrest;
} cli_args_t;

/* Split argv: every --KEY=VALUE (or --KEY VALUE, or --KEY for booleans) whose KEY is a
 * vramguard option goes to `options`; `verb_flags` lists the verb's own flags: those that
 * take a value ("html": --html OUT or --html=OUT, kept as "--html=OUT") and, marked with a
 * leading '!', those that take none ("!json"). Returns false after printing a one-line
 * error. */
bool cli_parse(int argc, char **argv, const char *const *verb_flags, cli_args_t *out);

/* The value of a verb flag from a parsed command line, or NULL. `present` (if not NULL)
 * is set when the flag appears without a value. */
const char *cli_flag(const cli_args_t *a, const char *name, bool *present);

/* Positional argument i (not a flag), or NULL. */
const char *cli_positional(const cli_args_t *a, int i);

/* Where vgsim's libcuda.so.1 is: next to the executable (build tree), in the install
 * tree, or at the configured paths. Returns false if it cannot be found. */
bool cli_find_vgsim_dir(char *out, size_t n);

/* Print "vramguard: <msg>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_demo(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif /* VG_CLI_H */
