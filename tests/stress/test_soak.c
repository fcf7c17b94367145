/* test_soak.c — a long soak: 10 million allocator operations (a third of them under the
 * sanitizers, VGT_STEPS) over four streams (sizes from bytes to megabytes, stream-ordered
 * frees, recorded streams, synchronisations), with the process's memory and file
 * descriptors flat between the first million and the end. */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "vgtest.h"

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int open_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

VG_TEST(ten_million_operations_stay_flat) {
    vgt_init("stack_depth=4");
    enum { STREAMS = 4, LIVE = 256 };
    CUstream s[STREAMS];
    s[0] = NULL;
    for (int i = 1; i < STREAMS; i++)
        s[i] = vgt_stream();
    void *live[LIVE] = {0};
    int live_stream[LIVE];
    long ops = getenv("VG_SOAK_OPS") ? atol(getenv("VG_SOAK_OPS")) : VGT_STEPS(10000000L);
    long rss_start = 0;
    int fds_start = 0;
    uint64_t rng = 88172645463325252ull;
    for (long i = 0; i < ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % LIVE);
        if (live[k]) {
            CHECK_VG(vg_free(live[k], s[live_stream[k]]));
            live[k] = NULL;
        } else {
            int st = (int)((rng >> 20) % STREAMS);
            size_t size = (rng >> 32) % 17 == 0 ? (size_t)1 << (20 + (rng >> 40) % 3)
                                                : 16 + (size_t)((rng >> 32) % 65536);
            CHECK_VG(vg_malloc(&live[k], size, s[st]));
            live_stream[k] = st;
            if ((rng >> 50) % 11 == 0) /* another stream uses it too */
                CHECK_VG(vg_record_stream(live[k], s[(st + 1) % STREAMS]));
        }
        if (i % 100000 == 99999) {
            CHECK_CU(vg__cuCtxSynchronize());
            for (int j = 0; j < STREAMS; j++)
                vg_stream_synchronized(s[j]);
        }
        if (i == ops / 10) { /* warmed up: the baseline */
            rss_start = rss_kib();
            fds_start = open_fds();
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            CHECK_VG(vg_free(live[k], s[live_stream[k]]));
    CHECK_CU(vg__cuCtxSynchronize());
    CHECK_VALID();
    long rss_end = rss_kib();
    int fds_end = open_fds();
    printf("soak: %ld operations; resident %ld KiB after the first tenth, %ld KiB at the end; "
           "%d then %d file descriptors\n", ops, rss_start, rss_end, fds_start, fds_end);
    CHECK_MSG(rss_end <= rss_start + rss_start / 10 + 8192,
              "resident memory grew from %ld to %ld KiB", rss_start, rss_end);
    CHECK_EQ(fds_end, fds_start);
    CHECK_EQ(vgt_stats().allocation[VG_POOL_ALL].current, 0);
}
