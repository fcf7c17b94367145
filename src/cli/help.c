/* help.c — what `vramguard help`, `vramguard help VERB` and `vramguard VERB --help` print.
 *
 * Each verb is described once, in `cli_verbs`: its synopsis, what it does, and every flag
 * of its own with a line of help. cli_parse() takes its list of flags from the same entry,
 * so a flag cannot be accepted without being documented, nor documented without being
 * accepted.
 */
#include <stdio.h>
#include <string.h>

#include "base/options.h"
#include "cli.h"

static const cli_flag_spec_t demo_flags[] = {
    {"sim", NULL, "run on vgsim even when a GPU is present"},
    {0},
};

static const cli_flag_spec_t replay_flags[] = {
    {"device-memory", "SIZE", "memory of the simulated device (default 80G)"},
    {"repeat", "N", "replay the trace N times, 1 to 1000 (default 5); the time is the\n"
                    "median of the N, the first (cold) run's is shown beside it; the\n"
                    "N runs share one allocator, what a run left live freed before the\n"
                    "next, so the memory peaks are those of a program that runs its\n"
                    "loop N times"},
    {"lag", "N", "keep the simulated device N events behind the host, as a busy GPU\n"
                 "is (default 0)"},
    {"perturb", "SEED", "delay 1 free in 50 by 1 to 8 events, in an order drawn from SEED\n"
                        "(0, the default: the trace's own order)"},
    {"threads", "one|log", "one: every event on one thread (the default); log: each\n"
                           "thread of the log on a thread of its own, the events still\n"
                           "in the log's order, as RMM's replay benchmark runs them"},
    {"json", NULL, "print the figures as one JSON object"},
    {"validate", NULL, "check the allocator's invariants after every operation (slow)"},
    {0},
};

static const cli_flag_spec_t run_flags[] = {
    {"sim", NULL, "run the program on vgsim: its libcuda.so.1 comes first on the\n"
                  "library path"},
    {"follow-children", NULL, "also guard the programs that a GPU program starts"},
    {0},
};

static const cli_flag_spec_t report_flags[] = {
    {"html", "OUT.html", "a self-contained page: interactive timeline and segment map"},
    {"svg", "OUT.svg", "the timeline as a picture"},
    {"chrome-trace", "OUT.json", "a trace for Perfetto or chrome://tracing"},
    {"group", "HOW", "group the timeline's allocations: site, size, or auto (default)"},
    {"quiet", NULL, "write the files only, no text summary"},
    {0},
};

const cli_verb_t cli_verbs[] = {
    {"demo", "[--sim] [--OPTION=VALUE ...]",
     "run the bug scenarios end to end (vgsim when there is no GPU)",
     "Plants five bugs (an out-of-bounds write by a kernel, a tensor freed while a side\n"
     "stream writes it, a leak in a training loop, bad frees, an illegal address) in guard\n"
     "mode and checks that each report names the right allocation, size and offset. Exits 0\n"
     "only if all five are caught.",
     demo_flags, true},
    {"replay", "TRACE.csv [flags] [--OPTION=VALUE ...]",
     "replay an allocation trace (RMM log format) through the allocator",
     "Replays an allocation log (RAPIDS RMM's CSV format, plain or gzipped) on vgsim and\n"
     "prints the time per operation, peak allocated and reserved memory, fragmentation and\n"
     "out-of-memory failures; with TRACE.json beside it (python -m vramguard convert writes\n"
     "one from a PyTorch memory snapshot), PyTorch's own figures on the same events beside\n"
     "them.\n"
     "Exits 1 if an allocation failed.",
     replay_flags, true},
    {"run", "[--sim] [--follow-children] [--OPTION=VALUE ...] -- PROGRAM [ARGS ...]",
     "run a program with vramguard injected, unmodified",
     "Injects vramguard into a dynamically linked CUDA program (driver API or CUDA\n"
     "runtime) without rebuilding it, e.g. --mode=guard for the checks, --limit=15G for a\n"
     "smaller GPU, --pinned_limit=16M for a host with less RAM to pin, --error_exitcode=N\n"
     "for CI. Exits with the program's own status. It counts the pinned host memory the\n"
     "program pins, by site (leaks and growth reported in guard mode, pinned_warn).\n"
     "Guard mode then also sees every launch, copy, event and synchronisation: it names\n"
     "the kernels that touched a damaged allocation, reports a free that nothing orders\n"
     "after another stream's use of the memory (free_order), and the host touching a\n"
     "pinned buffer while an async copy uses it (host_race). For a PyTorch script,\n"
     "python -m vramguard run --mode=guard SCRIPT gives tensor-level checks and all of\n"
     "this at once (it runs the script under vramguard run itself). --mode=memcheck adds\n"
     "a check on the GPU of every load and store of every kernel (docs/memcheck.md).\n"
     "Every process is guarded until it first uses the GPU, so a wrapper (a shell script,\n"
     "a python shim, a launcher) passes vramguard on to the GPU program it starts.",
     run_flags, true},
    {"report", "SNAPSHOT.json [SNAPSHOT.json ...] [flags]",
     "summarise snapshots (snapshot=PATH writes them) and draw them",
     "Prints a summary of one or more snapshots (several ranks merge into one view) and\n"
     "writes pictures of them.",
     report_flags, false},
    {0},
};

const cli_verb_t *cli_verb(const char *name) {
    for (const cli_verb_t *v = cli_verbs; v->name; v++)
        if (strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

void cli_print_usage(FILE *f) {
    fputs("usage: vramguard <verb> [flags] [arguments]\n\nVerbs:\n", f);
    for (const cli_verb_t *v = cli_verbs; v->name; v++)
        fprintf(f, "  %-9s %s\n", v->name, v->summary);
    fputs("  help      this text; 'help VERB' for a verb's flags, 'help options' for options\n"
          "  version   print the version\n"
          "\n"
          "Every option is also a flag, e.g. --mode=guard --limit=15G --verbose;\n"
          "'vramguard help options' lists them. The same keys work in\n"
          "VRAMGUARD_OPTIONS=\"key=value,key=value\".\n",
          f);
}

/* Writes `text` with every line after the first indented by `indent` columns. */
static void put_indented(FILE *f, const char *text, int indent) {
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%*s", indent, "");
    }
    fputc('\n', f);
}

void cli_print_verb_help(FILE *f, const cli_verb_t *v) {
    fprintf(f, "usage: vramguard %s %s\n\n%s\n\nFlags:\n", v->name, v->synopsis, v->text);
    for (const cli_flag_spec_t *s = v->flags; s->name; s++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", s->name, s->value ? "=" : "",
                 s->value ? s->value : "");
        fprintf(f, "  %-24s ", left);
        put_indented(f, s->help, 27);
    }
    fprintf(f, "  %-24s %s\n", "--help", "this text");
    if (v->takes_options)
        fputs("\nAny vramguard option is also a flag (--mode=guard, --limit=15G, ...):\n"
              "'vramguard help options' lists them.\n",
              f);
}

/* Writes `text` from column `col`, wrapped at word boundaries before column `width`, its
 * continuation lines starting at column `col`. */
static void put_wrapped(FILE *f, const char *text, int col, int width) {
    int at = col;
    const char *p = text;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (at > col && at + 1 + (int)word > width) {
            fprintf(f, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', f);
            at++;
        }
        fwrite(p, 1, word, f);
        at += (int)word;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', f);
}

void cli_print_options_help(FILE *f) {
    int w = 6; /* the widest key */
    for (int i = 0; i < vg__options_count(); i++) {
        const char *k, *t, *d, *a, *h;
        vg__option_info(i, &k, &t, &d, &a, &h);
        if ((int)strlen(k) > w)
            w = (int)strlen(k);
    }
    fprintf(f, "%-*s %-6s %-14s %s\n", w, "option", "type", "default", "meaning");
    for (int i = 0; i < vg__options_count(); i++) {
        const char *k, *t, *d, *a, *h;
        vg__option_info(i, &k, &t, &d, &a, &h);
        char meaning[1024];
        snprintf(meaning, sizeof meaning, "%s%s%s%s", h, a[0] ? " [" : "", a, a[0] ? "]" : "");
        int col = fprintf(f, "%-*s %-6s %-14s ", w, k, t, d[0] ? d : "\"\"");
        put_wrapped(f, meaning, col, 100);
    }
}
