/* test_suppress.c — the `suppressions` option (suppress.h): rules KIND:PATTERN hide the
 * reports whose stacks match, per kind, with wildcards; a bad file stops initialisation
 * with an error naming the file and the line. Guard mode on vgsim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vgtest.h"
#include "diag/suppress.h"

static char path[64];

static void remove_rules(void) { unlink(path); }

/* A suppression file with these lines (removed at exit); its path. */
static const char *rules(const char *text) {
    if (!path[0])
        atexit(remove_rules);
    snprintf(path, sizeof path, "/tmp/vg-supp-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
}

static void init_with(const char *text) {
    char opts[256];
    snprintf(opts, sizeof opts, "mode=guard,leaks=off,suppressions=%s", rules(text));
    vgt_init(opts);
}

static __attribute__((noinline)) void double_free_in_third_party_code(void) {
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(vg_free(p, NULL), VG_ERR_DOUBLE_FREE); /* (the caller still gets the error) */
}

static __attribute__((noinline)) void double_free_in_my_code(void) {
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL));
    CHECK_EQ(vg_free(p, NULL), VG_ERR_DOUBLE_FREE);
}

VG_TEST(a_rule_hides_the_reports_whose_stacks_match) {
    init_with("# known bugs in code we do not own\n"
              "\n"
              "double_free: double_free_in_third_party_code   # comment after a rule\n");
    double_free_in_third_party_code();
    CHECK_EQ(vg_error_count(), 0);
    double_free_in_my_code(); /* (no rule for it) */
    CHECK_EQ(vg_error_count(), 1);
    char *j = vg_errors_json();
    CHECK_CONTAINS(j, "double_free_in_my_code");
    CHECK(strstr(j, "double_free_in_third_party_code") == NULL);
    vg_free_string(j);
    char summary[512];
    vg__suppressions_summary(summary, sizeof summary);
    CHECK_CONTAINS(summary, "1 report suppressed (suppressions=/tmp/vg-supp-");
    CHECK_CONTAINS(summary, "1 double_free:double_free_in_third_party_code");
}

VG_TEST(a_rule_is_for_its_kind_only) {
    init_with("leak:double_free_in_third_party_code\n"
              "use_after_free:double_free_in_third_party_code\n");
    double_free_in_third_party_code();
    CHECK_EQ(vg_error_count(), 1);
    char summary[512];
    vg__suppressions_summary(summary, sizeof summary);
    CHECK_EQ(summary[0], '\0');
}

VG_TEST(wildcards_and_any_kind) {
    init_with("*:double_free_in_th?rd_*_code\n");
    double_free_in_third_party_code();
    CHECK_EQ(vg_error_count(), 0);
    double_free_in_my_code();
    CHECK_EQ(vg_error_count(), 1);
}

VG_TEST(the_program_file_is_matched_too) {
    init_with("double_free:unit_suppress\n"); /* (this test program's file name) */
    double_free_in_my_code();
    CHECK_EQ(vg_error_count(), 0);
}

/* vg_init with this file: the error it gives. */
static const char *init_error(const char *text) {
    static char err[1024];
    char opts[512];
    snprintf(opts, sizeof opts, "driver=%s,suppressions=%s", VG_TEST_VGSIM_LIB, rules(text));
    CHECK_EQ(vg_init(opts), VG_ERR_INVALID_OPTION);
    snprintf(err, sizeof err, "%s", vg_last_error());
    CHECK_EQ(vg__suppressions_check(rules(text)), VG_ERR_INVALID_OPTION); /* (the CLI's) */
    return err;
}

VG_TEST(an_unknown_kind_names_the_line_and_the_kinds) {
    const char *e = init_error("# fine\nleak:libfoo\nuse_after_fre:x\n");
    CHECK_CONTAINS(e, "line 3: unknown report kind 'use_after_fre'");
    CHECK_CONTAINS(e, "use_after_free, double_free");
}

VG_TEST(a_line_without_a_kind_is_refused) {
    CHECK_CONTAINS(init_error("libfoo.so\n"), "line 1: 'libfoo.so' is not KIND:PATTERN");
}

VG_TEST(a_pattern_that_matches_everything_is_refused) {
    CHECK_CONTAINS(init_error("leak:**\n"), "would match every report");
    CHECK_EQ(vg__suppressions_check(rules("leak:\n")), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "line 1: the pattern after 'leak:' would match every report");
}

VG_TEST(a_missing_file_is_an_error_naming_it) {
    char opts[512];
    snprintf(opts, sizeof opts, "driver=%s,suppressions=/nonexistent/supp.txt",
             VG_TEST_VGSIM_LIB);
    CHECK_EQ(vg_init(opts), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "suppressions=/nonexistent/supp.txt: cannot read it");
}

VG_TEST(an_overlong_line_or_too_many_rules_are_refused) {
    char line[1200];
    memset(line, 'x', sizeof line);
    memcpy(line, "leak:", 5);
    line[sizeof line - 2] = '\n';
    line[sizeof line - 1] = '\0';
    CHECK_CONTAINS(init_error(line), "line 1 is longer than 1022 characters");
    static char many[300 * 16];
    for (int i = 0; i < 300; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "leak:lib%d\n", i);
    CHECK_EQ(vg__suppressions_check(rules(many)), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "more than 256 rules");
}

/* vramguard's own rules (default_suppressions, on by default): a launch of cuDNN's
 * weight-gradient kernel given a freed tensor's address is not reported (a GPU showed the
 * kernel does not touch it); any other kernel given one is; default_suppressions=0 shows
 * it, and the summary says which rule left what out. */
static int freed_pointer_launch(const char *opts, const char *kernel) {
    vgt_init(opts); /* (the same options again: nothing) */
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL)); /* (guard mode: quarantined, so still freed) */
    const void *args[] = {p};
    int before = vg_error_count();
    vg_kernel_launched_args(kernel, NULL, args, 1);
    return vg_error_count() - before;
}

#define WGRAD "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11" \
              "threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi64ELi128ELi32EEENS4_52" \
              "Conv2dWgradOutputGradientTileAccessIteratorOptimized"

VG_TEST(vramguards_own_rules_leave_out_what_a_gpu_showed_false) {
    CHECK_EQ(freed_pointer_launch("mode=guard,leaks=off", WGRAD), 0);
    char summary[512];
    vg__suppressions_summary(summary, sizeof summary);
    CHECK_CONTAINS(summary, "1 report suppressed (vramguard's default rules; "
                            "default_suppressions=0 shows them): 1 launch_with_freed_pointer:"
                            "cutlass__5x_cudnn*Wgrad");
    CHECK_EQ(freed_pointer_launch("mode=guard,leaks=off", "my_kernel"), 1);
}

VG_TEST(default_suppressions_off_shows_what_vramguards_rules_leave_out) {
    CHECK_EQ(freed_pointer_launch("mode=guard,leaks=off,default_suppressions=0", WGRAD), 1);
}

VG_TEST(the_files_rules_and_vramguards_are_summed_up_apart) {
    init_with("double_free:double_free_in_third_party_code\n");
    double_free_in_third_party_code();
    const void *args[1];
    void *p;
    CHECK_VG(vg_malloc(&p, 4096, NULL));
    CHECK_VG(vg_free(p, NULL));
    args[0] = p;
    vg_kernel_launched_args(WGRAD, NULL, args, 1);
    CHECK_EQ(vg_error_count(), 0);
    char summary[512];
    vg__suppressions_summary(summary, sizeof summary);
    CHECK_CONTAINS(summary, "2 reports suppressed (suppressions=/tmp/vg-supp-");
    CHECK_CONTAINS(summary, "): 1 double_free:double_free_in_third_party_code; (vramguard's "
                            "default rules; default_suppressions=0 shows them): 1 "
                            "launch_with_freed_pointer:cutlass__5x_cudnn*Wgrad");
}
