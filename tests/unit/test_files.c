/* test_files.c — files vramguard writes (reports, JSON, snapshots) in someone else's
 * process: atomic replacement, no symlink followed, a full disk or an unwritable path is
 * an error that loses nothing and leaves nothing behind, and never changes the program. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"
#include "vgtest.h"

static char g_dir[] = "/tmp/vg_filesXXXXXX";

static void setup_dir(void) { CHECK(mkdtemp(g_dir) != NULL); }

static char *read_text(const char *path) {
    static char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int entries(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

VG_TEST(files_are_replaced_whole) {
    setup_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/r.json", g_dir);
    CHECK_VG(vg__write_file(path, "first", 5));
    CHECK_STREQ(read_text(path), "first");
    CHECK_VG(vg__write_file(path, "second", 6));
    CHECK_STREQ(read_text(path), "second");
    CHECK_EQ(entries(g_dir), 1); /* no temporary file left */
}

VG_TEST(a_symlink_at_the_target_is_refused) {
    setup_dir();
    char victim[600], link[600];
    snprintf(victim, sizeof victim, "%s/precious", g_dir);
    snprintf(link, sizeof link, "%s/r.json", g_dir);
    int fd = open(victim, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && write(fd, "keep", 4) == 4);
    close(fd);
    CHECK(symlink(victim, link) == 0);
    CHECK_EQ(vg__write_file(link, "overwrite", 9), VG_ERR_IO);
    CHECK_CONTAINS(vg_last_error(), "symbolic link");
    CHECK_STREQ(read_text(victim), "keep");
    CHECK_EQ(entries(g_dir), 2); /* the link and the victim: no temporary left */
}

VG_TEST(an_unwritable_path_is_an_error_naming_it) {
    CHECK_EQ(vg__write_file("/nonexistent-dir/r.json", "x", 1), VG_ERR_IO);
    CHECK_CONTAINS(vg_last_error(), "/nonexistent-dir/r.json");
}

VG_TEST(a_full_disk_loses_nothing) {
    setup_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/r.json", g_dir);
    CHECK_VG(vg__write_file(path, "old report", 10));
    signal(SIGXFSZ, SIG_IGN); /* the file size limit stands in for a full disk */
    struct rlimit small = {4096, 4096}, old;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    static char big[65536];
    memset(big, 'x', sizeof big);
    vg_status_t st = vg__write_file(path, big, sizeof big);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK_EQ(st, VG_ERR_IO);
    CHECK_CONTAINS(vg_last_error(), path);
    CHECK_STREQ(read_text(path), "old report"); /* the previous file is intact */
    CHECK_EQ(entries(g_dir), 1);                /* and the partial one is gone */
}

/* A report sent to a FIFO (or /dev/null, /dev/stdout) is written into it: renamed over
 * it, /dev/null became a regular file for every process on the machine. */
VG_TEST(a_report_to_a_special_file_goes_into_it) {
    setup_dir();
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/pipe", g_dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    int reader = open(fifo, O_RDONLY | O_NONBLOCK); /* (so that the writer's open returns) */
    CHECK(reader >= 0);
    CHECK_VG(vg__write_file(fifo, "{\"errors\":[]}", 13));
    char buf[64] = {0};
    CHECK_EQ(read(reader, buf, sizeof buf - 1), 13);
    CHECK_STREQ(buf, "{\"errors\":[]}");
    close(reader);
    struct stat st;
    CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode)); /* still the FIFO */
    CHECK_EQ(entries(g_dir), 1);                           /* and no temporary file */
    CHECK_VG(vg__write_file("/dev/null", "x", 1));
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    CHECK_EQ(vg__write_file(g_dir, "x", 1), VG_ERR_IO); /* a directory: refused, kept */
    CHECK_CONTAINS(vg_last_error(), "is a directory");
}

VG_TEST(an_unwritable_report_does_not_change_the_program) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        char opts[4200];
        snprintf(opts, sizeof opts, "driver=%s,mode=guard,report_json=/nonexistent-dir/r.json",
                 VG_TEST_VGSIM_LIB);
        if (vg_init(opts) != VG_OK)
            _exit(90);
        void *p;
        if (vg_malloc(&p, 1000, NULL) != VG_OK || vg_free(p, NULL) != VG_OK)
            _exit(91);
        exit(7); /* its own status, through vramguard's exit work */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 7);
}
