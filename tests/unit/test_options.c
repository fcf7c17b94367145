/* test_options.c — the option table: parsing, errors that name the key, precedence. */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/options.h"
#include "harness.h"

VG_TEST(defaults_parse) {
    /* Every default in the table must parse with its own parser. */
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__opt.mode, VG_MODE_FAST);
    CHECK_STREQ(vg__opt.driver, "libcuda.so.1");
    CHECK_EQ(vg__opt.verbose, 0);
    CHECK_EQ(vg__opt.limit.bytes, 0);
    CHECK_EQ(vg__opt.stack_depth, 12);
}

VG_TEST(sizes_and_suffixes) {
    uint64_t v = 0;
    CHECK(vg__parse_size("512", &v) && v == 512);
    CHECK(vg__parse_size("64K", &v) && v == 64u << 10);
    CHECK(vg__parse_size("16M", &v) && v == 16u << 20);
    CHECK(vg__parse_size("15G", &v) && v == 15ull << 30);
    CHECK(vg__parse_size("1T", &v) && v == 1ull << 40);
    CHECK(vg__parse_size("2GiB", &v) && v == 2ull << 30);
    CHECK(vg__parse_size("3kb", &v) && v == 3u << 10);
    CHECK(!vg__parse_size("", &v));
    CHECK(!vg__parse_size("G", &v));
    CHECK(!vg__parse_size("-1", &v));
    CHECK(!vg__parse_size("12X", &v));
    CHECK(!vg__parse_size("99999999999999999999", &v));
    CHECK(!vg__parse_size("20000000T", &v)); /* overflows 64 bits */
    CHECK(vg__parse_size("1.5G", &v) && v == 3ull << 29);
    CHECK(vg__parse_size("17.25M", &v) && v == 17ull * (1 << 20) + (1 << 18));
    CHECK(vg__parse_size("0.5K", &v) && v == 512);
    CHECK(!vg__parse_size("1.5", &v));  /* a fraction of a byte */
    CHECK(!vg__parse_size("1.G", &v));
    CHECK(!vg__parse_size("16383.99999999999999999T", &v) || v < UINT64_MAX);
}

VG_TEST(apply_values) {
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__options_apply("mode=guard, verbose=yes ,limit=15G,stack_depth=4", VG_SRC_INIT),
             VG_OK);
    CHECK_EQ(vg__opt.mode, VG_MODE_GUARD);
    CHECK_EQ(vg__opt.verbose, 1);
    CHECK_EQ(vg__opt.limit.bytes, 15ull << 30);
    CHECK_EQ(vg__opt.stack_depth, 4);
    CHECK_EQ(vg__options_apply("limit=0.25", VG_SRC_INIT), VG_OK);
    CHECK_EQ(vg__opt.limit.bytes, 0);
    CHECK(vg__opt.limit.fraction > 0.249 && vg__opt.limit.fraction < 0.251);
    CHECK_STREQ(vg_option("mode"), "guard");
    CHECK_STREQ(vg_option("limit"), "0.25");
    CHECK_EQ(vg__options_apply("limit=1.", VG_SRC_INIT), VG_OK); /* the whole device */
    CHECK(vg__opt.limit.fraction == 1.0 && vg__opt.limit.bytes == 0);
    CHECK_EQ(vg__options_apply("limit=17.5G", VG_SRC_INIT), VG_OK); /* a size, not a fraction */
    CHECK_EQ(vg__opt.limit.bytes, 35ull << 29);
    CHECK_EQ(vg__opt.limit.fraction, 0);
    CHECK(vg_option("no_such_key") == NULL);
}

/* A list option's items run on to the next key=value; elsewhere a bare item is an error. */
VG_TEST(a_list_option_takes_the_items_that_follow_it) {
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__options_apply("memcheck_kernels=*gather*, *index* ,ex_su?,mode=guard",
                               VG_SRC_INIT), VG_OK);
    CHECK_STREQ(vg__opt.memcheck_kernels, "*gather*,*index*,ex_su?");
    CHECK_EQ(vg__opt.mode, VG_MODE_GUARD);
    CHECK_EQ(vg__options_apply("memcheck_kernels=one", VG_SRC_INIT), VG_OK);
    CHECK_STREQ(vg__opt.memcheck_kernels, "one");
    CHECK_EQ(vg__options_apply("mode=guard,stray", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "option 'stray' has no value");
}

VG_TEST(unknown_key_is_an_error_naming_it) {
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__options_apply("mode=guard,colour=blue", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "unknown option 'colour'");
    /* Nothing of a bad string is applied, not even its valid part. */
    CHECK_EQ(vg__opt.mode, VG_MODE_FAST);
}

VG_TEST(bad_values_name_key_and_value) {
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__options_apply("mode=paranoid", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "bad value 'paranoid' for option 'mode'");
    CHECK_CONTAINS(vg_last_error(), "fast|guard");
    CHECK_EQ(vg__options_apply("limit=lots", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "option 'limit'");
    CHECK_EQ(vg__options_apply("limit=1.5", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_EQ(vg__options_apply("verbose=maybe", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "option 'verbose'");
    CHECK_EQ(vg__options_apply("stack_depth=100", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "0..64");
    CHECK_EQ(vg__options_apply("mode", VG_SRC_INIT), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "has no value");
}

VG_TEST(environment_then_init_string) {
    setenv("VRAMGUARD_OPTIONS", "mode=guard,limit=1G", 1);
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK_EQ(vg__opt.mode, VG_MODE_GUARD);
    CHECK_EQ(vg__options_apply("limit=2G", VG_SRC_INIT), VG_OK);
    CHECK_EQ(vg__opt.limit.bytes, 2ull << 30);
    CHECK_EQ(vg__opt.mode, VG_MODE_GUARD); /* untouched keys keep the environment's value */
    setenv("VRAMGUARD_OPTIONS", "mode=bogus", 1);
    CHECK_EQ(vg__options_load_env(), VG_ERR_INVALID_OPTION);
    CHECK_CONTAINS(vg_last_error(), "in VRAMGUARD_OPTIONS");
    unsetenv("VRAMGUARD_OPTIONS");
}

VG_TEST(share_of_the_host_or_a_size) {
    /* pinned_warn: a size, or a percentage of the host's RAM in (0, 100]. */
    unsetenv("VRAMGUARD_OPTIONS");
    CHECK_EQ(vg__options_load_env(), VG_OK);
    CHECK(vg__opt.pinned_warn.fraction > 0.499 && vg__opt.pinned_warn.fraction < 0.501);
    CHECK_STREQ(vg_option("pinned_warn"), "50%");
    CHECK_EQ(vg__options_apply("pinned_warn=64G,pinned_limit=16M", VG_SRC_INIT), VG_OK);
    CHECK_EQ(vg__opt.pinned_warn.bytes, 64ull << 30);
    CHECK_EQ(vg__opt.pinned_warn.fraction, 0);
    CHECK_EQ(vg__opt.pinned_limit, 16u << 20);
    CHECK_EQ(vg__options_apply("pinned_warn=12.5%", VG_SRC_INIT), VG_OK);
    CHECK(vg__opt.pinned_warn.fraction > 0.1249 && vg__opt.pinned_warn.fraction < 0.1251);
    CHECK_STREQ(vg_option("pinned_warn"), "12.5%");
    const char *bad[] = {"pinned_warn=150%", "pinned_warn=0%", "pinned_warn=%", "pinned_warn=x%",
                         "pinned_warn=5%%", "pinned_warn=half", "pinned_limit=0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(vg__options_apply(bad[i], VG_SRC_INIT), VG_ERR_INVALID_OPTION);
        CHECK_CONTAINS(vg_last_error(), strchr(bad[i], '=') ? "pinned_" : "");
    }
    CHECK_EQ(vg__options_apply("pinned_warn=0", VG_SRC_INIT), VG_OK);
    CHECK_EQ(vg__opt.pinned_warn.bytes, 0);
}
