/* args.c — what the verbs share: a verb's flags and arguments parsed (every option of the
 * table, src/base/options.h, is also a flag: --mode=guard, --limit 15G, --verbose; verbs
 * add their own, which help.c describes), errors printed, and vgsim found.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/init.h"
#include "base/options.h"
#include "cli.h"

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vramguard: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------------------------------
 * Argument parsing
 * ------------------------------------------------------------------------------------- */

/* Is --key an option? Flags may spell the key's '_' as '-' (--free-batch); *canon gets
 * the option's own spelling. */
static bool is_option_key(const char *key, size_t len, const char **type, const char **canon) {
    for (int i = 0; i < vg__options_count(); i++) {
        const char *k, *t, *d, *a, *h;
        vg__option_info(i, &k, &t, &d, &a, &h);
        if (strlen(k) != len)
            continue;
        size_t j = 0;
        while (j < len && (k[j] == key[j] || (k[j] == '_' && key[j] == '-')))
            j++;
        if (j == len) {
            *type = t;
            *canon = k;
            return true;
        }
    }
    return false;
}

/* The flag `name` of the verb, or NULL. */
static const cli_flag_spec_t *verb_flag(const char *name, size_t len, const cli_verb_t *verb) {
    for (const cli_flag_spec_t *f = verb->flags; f->name; f++)
        if (strlen(f->name) == len && strncmp(f->name, name, len) == 0)
            return f;
    return NULL;
}

bool cli_parse(int argc, char **argv, const cli_verb_t *verb, cli_args_t *out, int *exit_code) {
    memset(out, 0, sizeof *out);
    *exit_code = CLI_USAGE;
    static char **kept; /* the verbs' arguments live as long as the process */
    out->argv = kept = calloc((size_t)argc + 1, sizeof *out->argv);
    if (!out->argv) {
        cli_error("out of memory");
        return false;
    }
    size_t olen = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            out->rest = &argv[i + 1];
            out->nrest = argc - i - 1;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_print_verb_help(stdout, verb);
            *exit_code = CLI_OK;
            return false;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            out->argv[out->argc++] = argv[i];
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *type;
        const char *canon;
        if (is_option_key(name, nlen, &type, &canon)) {
            const char *val = eq ? eq + 1 : NULL;
            if (!val && strcmp(type, "BOOL") == 0)
                val = "1";
            else if (!val && i + 1 < argc)
                val = argv[++i];
            if (!val) {
                cli_error("--%.*s needs a value", (int)nlen, name);
                return false;
            }
            int w = snprintf(out->options + olen, sizeof out->options - olen, "%s%s=%s",
                             olen ? "," : "", canon, val);
            if (w < 0 || (size_t)w >= sizeof out->options - olen) {
                cli_error("too many options on the command line");
                return false;
            }
            olen += (size_t)w;
            continue;
        }
        const cli_flag_spec_t *vf = verb_flag(name, nlen, verb);
        if (vf && !vf->value && eq) {
            cli_error("--%.*s takes no value", (int)nlen, name);
            return false;
        }
        if (vf && vf->value && !eq) { /* "--flag value" becomes "--flag=value" */
            if (i + 1 >= argc) {
                cli_error("--%.*s needs a value (--%s=%s)", (int)nlen, name, vf->name, vf->value);
                return false;
            }
            char *joined;
            if (asprintf(&joined, "%s=%s", a, argv[++i]) < 0) {
                cli_error("out of memory");
                return false;
            }
            out->argv[out->argc++] = joined; /* (lives as long as the process) */
            continue;
        }
        if (vf) {
            out->argv[out->argc++] = argv[i];
            continue;
        }
        cli_error("unknown flag '%s' (see 'vramguard help %s')", a, verb->name);
        return false;
    }
    if (olen && vg__options_validate(out->options) != VG_OK) {
        cli_error("%s (on the command line)%s", vg_last_error(),
                  strcmp(verb->name, "run") == 0 ? "; the program was not started" : "");
        return false;
    }
    return true;
}

const char *cli_flag(const cli_args_t *a, const char *name, bool *present) {
    size_t n = strlen(name);
    if (present)
        *present = false;
    for (int i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (strncmp(s, "--", 2) != 0 || strncmp(s + 2, name, n) != 0)
            continue;
        if (s[2 + n] == '=')
            return s + 3 + n;
        if (s[2 + n] == '\0') {
            if (present)
                *present = true;
            return NULL;
        }
    }
    return NULL;
}

const char *cli_positional(const cli_args_t *a, int want) {
    int k = 0;
    for (int i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (strncmp(s, "--", 2) == 0)
            continue; /* a flag (cli_parse joined any separate value to it) */
        if (k++ == want)
            return s;
    }
    return NULL;
}

static bool dir_has_vgsim(const char *dir) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/libcuda.so.1", dir);
    return access(p, R_OK) == 0;
}

bool cli_find_vgsim_dir(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            const char *rel[] = {"%s/vgsim", "%s/../lib/vramguard/vgsim",
                                 "%s/../lib64/vramguard/vgsim"};
            for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
                char cand[PATH_MAX], resolved[PATH_MAX];
                snprintf(cand, sizeof cand, rel[i], exe);
                if (dir_has_vgsim(cand) && realpath(cand, resolved)) {
                    snprintf(out, n, "%s", resolved);
                    return true;
                }
            }
        }
    }
    const char *fixed[] = {VG_BUILD_SIM_DIR, VG_INSTALL_SIM_DIR};
    for (size_t i = 0; i < 2; i++) {
        if (dir_has_vgsim(fixed[i])) {
            snprintf(out, n, "%s", fixed[i]);
            return true;
        }
    }
    return false;
}

