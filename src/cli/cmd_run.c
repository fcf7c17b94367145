/* cmd_run.c — `vramguard run [--sim] [--follow-children] [options] -- CMD [ARGS...]`:
 * run an unmodified program with vramguard injected (LD_PRELOAD of
 * libvramguard_preload.so), on the GPU or, with --sim, on vgsim. The options go to the
 * program through VRAMGUARD_OPTIONS (over any already set there). The exit status is the
 * program's (or error_exitcode when errors were found, which the injected library sets);
 * a program killed by a signal gives 128 + the signal, as a shell does.
 *
 * A run the user asked to be checked is never run unchecked: every option from every
 * source (VRAMGUARD_OPTIONS, the command line) is validated before the program starts,
 * and so is the driver (without --sim); any problem stops the run with exit status 2
 * before the program starts. VRAMGUARD_REQUIRED=1 tells the injected library the same:
 * should it still fail to start inside the program, it stops the program there rather
 * than let it run unguarded (resolve.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "base/options.h"
#include "api/init.h"

static volatile pid_t g_child;

/* SIGTERM / SIGHUP to `vramguard run` go on to the program (which writes its reports). */
static void forward(int sig) {
    if (g_child > 0)
        kill(g_child, sig);
}

/* libvramguard_preload.so next to the executable (build tree) or in ../lib/vramguard. */
static bool find_preload(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return false;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0';
    const char *rel[] = {"%s/libvramguard_preload.so", "%s/../lib/vramguard/libvramguard_preload.so",
                         "%s/../lib64/vramguard/libvramguard_preload.so"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char cand[PATH_MAX + 64], resolved[PATH_MAX];
        snprintf(cand, sizeof cand, rel[i], exe);
        if (access(cand, R_OK) == 0 && realpath(cand, resolved)) {
            snprintf(out, n, "%s", resolved);
            return true;
        }
    }
    return false;
}

/* setenv(name, value + ":" + old) */
static void prepend_env(const char *name, const char *value) {
    const char *old = getenv(name);
    if (!old || !*old) {
        setenv(name, value, 1);
        return;
    }
    size_t n = strlen(value) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v)
        return;
    snprintf(v, n, "%s:%s", value, old);
    setenv(name, v, 1);
    free(v);
}

/* Without --sim: can the driver the options name be loaded at all? (Loaded and closed,
 * not initialised: the program's vramguard initialises it.) */
static bool driver_present(const char *opts) {
    vg_options_t o;
    if (vg__options_parse(opts, &o) != VG_OK)
        return true; /* (validated before: cannot happen) */
    const char *path = o.driver[0] ? o.driver : "libcuda.so.1";
    dlerror();
    void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return true;
    }
    const char *why = dlerror();
    cli_error("no CUDA driver found: cannot load %s (%s). This machine has no NVIDIA driver, "
              "or it is not on the library path; 'vramguard run --sim -- PROGRAM' runs a "
              "program that calls the CUDA driver API on vgsim, vramguard's CPU simulation "
              "of a GPU. The program was not started",
              path, why ? why : "unknown reason");
    return false;
}

int cmd_run(int argc, char **argv) {
    cli_args_t a;
    int exit_code;
    if (!cli_parse(argc, argv, cli_verb("run"), &a, &exit_code))
        return exit_code;
    if (!a.rest || a.nrest == 0 || cli_positional(&a, 0)) {
        cli_error("usage: vramguard run [--sim] [--follow-children] [--OPTION=VALUE ...] -- "
                  "PROGRAM [ARGS...]");
        return CLI_USAGE;
    }
    bool sim = false, follow = false;
    cli_flag(&a, "sim", &sim);
    cli_flag(&a, "follow-children", &follow);
    char preload[PATH_MAX];
    if (!find_preload(preload, sizeof preload)) {
        cli_error("cannot find libvramguard_preload.so next to the vramguard executable or in "
                  "../lib/vramguard");
        return CLI_USAGE;
    }
    /* Options: the environment's, then the command line's (later keys win). */
    char opts[sizeof a.options + PATH_MAX + 64] = "";
    const char *env = getenv("VRAMGUARD_OPTIONS");
    if (env && *env && vg__options_validate(env) != VG_OK) {
        cli_error("%s (in VRAMGUARD_OPTIONS); the program was not started", vg_last_error());
        return CLI_USAGE;
    }
    size_t used = 0;
    if (env && *env)
        used += (size_t)snprintf(opts + used, sizeof opts - used, "%s", env);
    if (sim) {
        char dir[PATH_MAX];
        if (!cli_find_vgsim_dir(dir, sizeof dir)) {
            cli_error("--sim: cannot find vgsim (libcuda.so.1) next to the vramguard executable");
            return CLI_USAGE;
        }
        used += (size_t)snprintf(opts + used, sizeof opts - used, "%sdriver=%s/libcuda.so.1",
                                 used ? "," : "", dir);
        prepend_env("LD_LIBRARY_PATH", dir); /* the program's own libcuda.so.1 is vgsim */
    }
    if (a.options[0])
        snprintf(opts + used, sizeof opts - used, "%s%s", used ? "," : "", a.options);
    if (!sim && !driver_present(opts))
        return CLI_USAGE;
    setenv("VRAMGUARD_OPTIONS", opts, 1);
    setenv("VRAMGUARD_REQUIRED", "1", 1);
    prepend_env("LD_PRELOAD", preload);
    if (follow)
        setenv("VRAMGUARD_FOLLOW_CHILDREN", "1", 1);
    else
        unsetenv("VRAMGUARD_FOLLOW_CHILDREN");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("cannot start '%s': %s", a.rest[0], strerror(errno));
        return CLI_FAILED;
    }
    if (pid == 0) {
        execvp(a.rest[0], a.rest);
        fprintf(stderr, "vramguard: cannot run '%s': %s\n", a.rest[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    /* The terminal's Ctrl-C reaches the program too; wait for it to finish reporting. */
    g_child = pid;
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGTERM, forward);
    signal(SIGHUP, forward);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            cli_error("waiting for '%s': %s", a.rest[0], strerror(errno));
            return CLI_FAILED;
        }
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "vramguard: '%s' was killed by signal %d (%s)\n", a.rest[0], sig,
                strsignal(sig));
        return 128 + sig;
    }
    return WEXITSTATUS(status);
}
