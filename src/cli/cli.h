/* cli.h — what the vramguard command's verbs share. */
#ifndef VG_CLI_H
#define VG_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

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

/* A verb's own flag: --NAME=VALUE when `value` names the value, --NAME when it is NULL. */
typedef struct cli_flag_spec {
    const char *name;  /* without the "--" */
    const char *value; /* the value's placeholder in help ("OUT.html"), or NULL */
    const char *help;  /* one or more lines, '\n' between them */
} cli_flag_spec_t;

/* A verb, as help shows it and cli_parse() accepts its flags (help.c). */
typedef struct cli_verb {
    const char *name;
    const char *synopsis; /* what follows "vramguard NAME" in its usage line */
    const char *summary;  /* one line, for the list of verbs */
    const char *text;     /* what it does, for `vramguard help NAME` */
    const cli_flag_spec_t *flags; /* ends with {0} */
    bool takes_options;   /* vramguard's options are flags of it too */
} cli_verb_t;

extern const cli_verb_t cli_verbs[]; /* ends with {0} */
const cli_verb_t *cli_verb(const char *name);
void cli_print_usage(FILE *f);
void cli_print_verb_help(FILE *f, const cli_verb_t *v);
void cli_print_options_help(FILE *f);

/* Split argv for `verb` (cli_verb("replay")): every --KEY=VALUE (or --KEY VALUE, or
 * --KEY for booleans) whose KEY is a vramguard option goes to `options`; the verb's own
 * flags stay in argv, a flag's separate value joined to it (--html OUT becomes
 * --html=OUT). Returns false when the verb should stop and exit with *exit_code: after
 * printing its help for --help or -h (0), or a one-line error (CLI_USAGE). */
bool cli_parse(int argc, char **argv, const cli_verb_t *verb, cli_args_t *out, int *exit_code);

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
