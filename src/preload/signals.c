/* signals.c — SIGINT and SIGTERM under `vramguard run`: the reports still get written.
 *
 * A program killed by Ctrl-C or `kill` never runs its atexit handlers, so the final check,
 * the leak report, the summary and the JSON files would be lost. If the program has not
 * installed its own handler for these signals (then it decides what they do, and usually
 * exits normally), vramguard installs one that only wakes a watcher thread (a write to a
 * pipe: async-signal-safe). The watcher writes everything, as at exit, then restores the
 * default action and sends the signal again, so the program dies of it as it would have. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "api/init.h"
#include "preload.h"

static int g_pipe[2] = {-1, -1};
static _Atomic int g_signal;

static void on_signal(int sig) {
    int saved = errno;
    vg__note_fatal_signal(sig); /* before the interrupted thread can go on to exit */
    if (!atomic_exchange(&g_signal, sig)) {
        ssize_t w = write(g_pipe[1], "s", 1);
        (void)w;
    }
    errno = saved;
}

static void *watcher(void *arg) {
    (void)arg;
    char c;
    while (read(g_pipe[0], &c, 1) < 0 && errno == EINTR)
        ;
    vgp_flush_deferred();
    vg__shutdown(); /* reports, summary, JSON as at exit; then the process dies of the signal */
    return NULL;
}

void vgp_signals_install(void) {
    static const int sigs[] = {SIGINT, SIGTERM};
    bool any = false;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            any = true;
    }
    if (!any || pipe2(g_pipe, O_CLOEXEC) != 0)
        return;
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev); /* the watcher takes no signal itself */
    int rc = pthread_create(&t, &a, watcher, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&a);
    if (rc != 0)
        return;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(sigs[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(sigs[i], &sa, NULL);
    }
}
