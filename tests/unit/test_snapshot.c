/* test_snapshot.c — snapshots (issue 7): the JSON vramguard writes validates against the
 * documented schema (docs/snapshot-schema.json), holds what happened, and `vramguard
 * report`'s reader refuses malformed or truncated files with a message naming the problem.
 */
#include <string.h>
#include <unistd.h>

#include "../src/cli/json.h"
#include "../src/cli/report_model.h"
#include "schema_check.h"
#include "vgtest.h"
#include "diag/pinned.h"
#include "diag/report.h" /* vg__report_count_kind */

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static json_doc_t *parse_or_die(const char *text, size_t len) {
    char err[300];
    json_doc_t *d = json_parse(text, len, err, sizeof err);
    CHECK_MSG(d != NULL, "parse: %s", err);
    return d;
}

/* Validate a snapshot's text against the documented schema. */
static void check_schema(const char *snap) {
    size_t slen;
    char *schema_text = slurp(VG_TEST_SOURCE_DIR "/docs/snapshot-schema.json", &slen);
    json_doc_t *schema = parse_or_die(schema_text, slen);
    json_doc_t *doc = parse_or_die(snap, strlen(snap));
    char err[600];
    CHECK_MSG(schema_check(json_root(schema), json_root(doc), err, sizeof err),
              "the snapshot does not match docs/snapshot-schema.json: %s", err);
    json_free(doc);
    json_free(schema);
    free(schema_text);
}

/* A workload with every kind of event: allocations on two streams, frees, an OOM under a
 * limit, and (guard mode) an overrun found by a check and a free not ordered after a
 * kernel on the other stream (G7). */
static char *workload_snapshot(void) {
    vgt_init("mode=guard,limit=64M,stack_depth=8,snapshot_events=100000,free_order=on");
    CUstream s;
    CHECK_CU(vg__cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *p[16];
    for (int i = 0; i < 16; i++)
        CHECK_VG(vg_malloc(&p[i], 1000 + 4096 * (size_t)i, i % 2 ? s : NULL));
    for (int i = 0; i < 16; i += 2)
        CHECK_VG(vg_free(p[i], NULL));
    void *big;
    CHECK_EQ(vg_malloc(&big, 1ull << 30, NULL), VG_ERR_OUT_OF_MEMORY);
    unsigned char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_CU(vg__cuMemcpyHtoD((CUdeviceptr)(uintptr_t)p[1] + 1000 + 4096, junk, sizeof junk));
    CHECK_EQ(vg_check(), VG_ERR_MEMORY_ERRORS);
    vg_kernel_launched("my_kernel", s);
    const void *given[] = {p[5]};
    vg_kernel_launched_args("side_kernel", s, given, 1);
    CHECK_VG(vg_free(p[5], NULL)); /* not ordered after side_kernel */
    CHECK_EQ(vg__report_count_kind(VG_REPORT_UNORDERED_FREE), 1);
    /* Pinned host memory, as the interposer counts it (a range, then one refused). */
    CHECK(vg__pinned_admit(4096, 0, "cuMemHostAlloc"));
    vg__pinned_added((void *)(uintptr_t)0x10000000, 4096, 0, false, NULL, 1000);
    CHECK(vg__pinned_admit(1ull << 40, 0, "cuMemHostAlloc"));
    vg__pinned_failed(1ull << 40, 0, "cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY);
    char *snap = vg_snapshot_json();
    CHECK(snap != NULL);
    return snap;
}

VG_TEST(snapshot_matches_the_documented_schema) {
    char *snap = workload_snapshot();
    check_schema(snap);
    vg_free_string(snap);
}

VG_TEST(snapshot_holds_what_happened) {
    char *snap = workload_snapshot();
    json_doc_t *d = parse_or_die(snap, strlen(snap));
    const json_t *root = json_root(d);
    CHECK_STREQ(json_str(root, "mode", ""), "guard");
    const json_t *dev = json_get(root, "devices")->kids[0];
    const json_t *evs = json_get(dev, "events");
    int allocs = 0, frees = 0, ooms = 0, maps = 0;
    for (size_t i = 0; i < evs->n; i++) {
        const char *a = json_str(evs->kids[i], "action", "");
        allocs += strcmp(a, "alloc") == 0;
        frees += strcmp(a, "free") == 0;
        ooms += strcmp(a, "oom") == 0;
        maps += strcmp(a, "map") == 0;
    }
    CHECK_EQ(allocs, 16);
    CHECK_EQ(frees, 9);
    CHECK_EQ(ooms, 1);
    CHECK(maps >= 1);
    /* 7 live blocks and 9 quarantined ones in the segment map */
    int live = 0, quarantined = 0;
    const json_t *segs = json_get(dev, "segments");
    for (size_t i = 0; i < segs->n; i++) {
        const json_t *blocks = json_get(segs->kids[i], "blocks");
        for (size_t k = 0; k < blocks->n; k++) {
            const char *st = json_str(blocks->kids[k], "state", "");
            live += strcmp(st, "allocated") == 0;
            quarantined += strcmp(st, "quarantined") == 0;
        }
    }
    CHECK_EQ(live, 7);
    CHECK_EQ(quarantined, 9);
    CHECK_EQ(json_int(dev, "limit_bytes", 0), 64 << 20);
    const json_t *errs = json_get(root, "errors");
    CHECK(errs->n >= 2); /* the OOM and the overrun */
    bool overrun = false;
    for (size_t i = 0; i < errs->n; i++)
        overrun |= strcmp(json_str(errs->kids[i], "kind", ""), "out_of_bounds_after") == 0;
    CHECK(overrun);
    CHECK(json_get(root, "sites")->n >= 1);
    const json_t *k = json_get(root, "kernels");
    CHECK(k->n >= 1);
    CHECK_STREQ(json_str(k->kids[k->n - 1], "name", ""), "side_kernel");
    json_free(d);
    vg_free_string(snap);
}

/* The events in a snapshot of the current process. */
static size_t events_now(void) {
    char *snap = vg_snapshot_json();
    json_doc_t *d = parse_or_die(snap, strlen(snap));
    const json_t *dev = json_get(json_root(d), "devices")->kids[0];
    size_t n = json_get(dev, "events")->n;
    json_free(d);
    vg_free_string(snap);
    return n;
}

/* Recording can start and stop at run time (PyTorch's _record_memory_history). */
VG_TEST(event_history_starts_and_stops_at_run_time) {
    vgt_init("snapshot_events=0");
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(events_now(), 0);                 /* off at start */
    CHECK_VG(vg_set_event_history(3));
    for (int i = 0; i < 4; i++) {
        CHECK_VG(vg_malloc(&p, 4096, NULL));
        CHECK_VG(vg_free(p, NULL));
    }
    CHECK_EQ(events_now(), 3);                 /* the last three of eight */
    CHECK_VG(vg_set_event_history(0));
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(events_now(), 0);                 /* stopped, and what was kept dropped */
    CHECK_EQ(vg_set_event_history((size_t)1 << 40), VG_ERR_INVALID_ARGUMENT);
}

VG_TEST(snapshot_file_option_and_report_reader) {
    char path[] = "/tmp/vg_snapXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char *snap = workload_snapshot();
    vg_free_string(snap);
    CHECK_VG(vg_write_snapshot(path));
    rp_file_t f;
    char err[600];
    CHECK_MSG(rp_load(path, &f, err, sizeof err), "%s", err);
    CHECK_EQ(f.ndevices, 2); /* the device, then the pinned host memory */
    CHECK(!f.devices[0].pinned && f.devices[1].pinned);
    CHECK(f.devices[0].nsamples > 0);
    CHECK(f.devices[0].nseries >= 1);
    CHECK(f.devices[0].nmarkers >= 1); /* the errors are on the timeline */
    rp_free(&f);
    unlink(path);
}

/* Load `text` as a snapshot file: must fail with a message containing `want`. */
static void expect_rejected(const char *text, size_t len, const char *want) {
    char path[] = "/tmp/vg_badsnapXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, text, len) == (ssize_t)len);
    close(fd);
    rp_file_t f;
    char err[600] = "";
    bool ok = rp_load(path, &f, err, sizeof err);
    unlink(path);
    CHECK_MSG(!ok, "a bad snapshot was accepted (expected an error with '%s')", want);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, path);
}

VG_TEST(malformed_snapshots_give_clear_errors) {
    char *snap = workload_snapshot();
    size_t n = strlen(snap);
    expect_rejected(snap, n / 2, "truncated");          /* cut in the middle */
    expect_rejected("", 0, "empty");
    const char *cut = "{\"format\":\"vramguard-snapshot\",";
    expect_rejected(cut, strlen(cut), "truncated");
    expect_rejected("[1,2,3]", 7, "expected an object");
    const char *other = "{\"format\":\"something-else\",\"version\":1}";
    expect_rejected(other, strlen(other), "vramguard-snapshot");
    const char *newer = "{\"format\":\"vramguard-snapshot\",\"version\":7}";
    expect_rejected(newer, strlen(newer), "newer vramguard");
    expect_rejected("\x01\x02garbage", 9, "line 1, column 1");
    /* a valid document with one field of the wrong type deep inside */
    char *bad = strdup(snap);
    char *p = strstr(bad, "\"action\":\"alloc\",\"address\":");
    CHECK(p != NULL);
    char *size = strstr(p, "\"size\":");
    size[1] = 'z'; /* "zize": the key is gone */
    expect_rejected(bad, strlen(bad), "'size' is missing");
    free(bad);
    vg_free_string(snap);
}

VG_TEST(json_reader_edge_cases) {
    const char *ok[] = {"0", "-1.5e3", "\"a\\u00e9\\ud83d\\ude00\"", "[[],{}]", " {\"a\":[true,false,null]} "};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char err[200];
        json_doc_t *d = json_parse(ok[i], strlen(ok[i]), err, sizeof err);
        CHECK_MSG(d != NULL, "%s: %s", ok[i], err);
        json_free(d);
    }
    const char *bad[] = {"", "[", "{\"a\" 1}", "[1,]", "\"\\x\"", "nul", "1 2", "[1e999]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        CHECK_MSG(json_parse(bad[i], strlen(bad[i]), err, sizeof err) == NULL, "accepted: %s", bad[i]);
        CHECK_CONTAINS(err, "line 1");
    }
    char deep[300];
    memset(deep, '[', sizeof deep);
    char err[200];
    CHECK(json_parse(deep, sizeof deep, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "nested");
}
