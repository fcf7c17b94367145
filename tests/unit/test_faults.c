/* test_faults.c — fault injection over the driver layer (STYLE.md, SQLite's loops).
 *
 * For N = 1, 2, 3, ...: make the Nth driver call fail, run a sequence of allocator
 * operations, then disarm and check that every step ended in a clean result (success, or
 * an error with its explanation), that the allocator's invariants hold, and that once the
 * cache is emptied the driver has every byte back. Stop at the first N the sequence
 * finishes without reaching.
 */
#include <dlfcn.h>
#include <string.h>

#include "vgtest.h"
#include "diag/sites.h" /* vg__kernel_name */
#include "check/access.h"

static int sequence(CUstream s) {
    void *a = NULL, *b = NULL, *c = NULL;
    int errors = 0;
    vg_status_t st;
    if ((st = vg_malloc(&a, 50 << 20, s)) != VG_OK)
        errors++;
    if ((st = vg_malloc(&b, 3 << 20, NULL)) != VG_OK)
        errors++;
    if (a && (st = vg_free(a, s)) != VG_OK)
        errors++;
    if ((st = vg_malloc(&c, 80 << 20, NULL)) != VG_OK)
        errors++;
    if (b && vg_free(b, NULL) != VG_OK)
        errors++;
    if (c && vg_free(c, NULL) != VG_OK)
        errors++;
    if (vg_empty_cache() != VG_OK)
        errors++;
    return errors;
}

static void fault_loop(int error) {
    CUstream s = vgt_stream();
    size_t free0, total;
    CHECK_VG(vg_empty_cache());
    CHECK_CU(vg__cuMemGetInfo(&free0, &total));
    long n;
    int with_errors = 0;
    for (n = 1; n < 10000; n++) {
        vg__fault_inject(n, error);
        int errors = sequence(s);
        long calls = vg__fault_calls();
        vg__fault_inject(0, 0);
        with_errors += errors > 0;
        /* Clean: the invariants hold and, with the cache emptied, nothing is held. */
        CHECK_MSG(vg_validate() == VG_OK, "N=%ld: %s", n, vg_last_error());
        CHECK_VG(vg_empty_cache());
        vg_stats_t st = vgt_stats();
        CHECK_MSG(st.allocation[VG_POOL_ALL].current == 0, "N=%ld: %lld allocations leaked", n,
                  (long long)st.allocation[VG_POOL_ALL].current);
        CHECK_MSG(st.reserved_bytes[VG_POOL_ALL].current == 0, "N=%ld: %lld bytes still reserved",
                  n, (long long)st.reserved_bytes[VG_POOL_ALL].current);
        size_t free1;
        CHECK_CU(vg__cuMemGetInfo(&free1, &total));
        CHECK_MSG(free1 == free0, "N=%ld: the driver lost %lld bytes", n,
                  (long long)free0 - (long long)free1);
        if (calls < n)
            break; /* the sequence completed before the Nth call: every point was tried */
    }
    /* Failed launches of guard mode's kernels leave no pattern behind: a false report of
     * damage would follow if the blocks they were for were still checked. */
    char *j = vg_errors_json();
    CHECK(j != NULL);
    CHECK_MSG(!strstr(j, "out_of_bounds") && !strstr(j, "use_after_free"),
              "a false memory error under fault injection: %.1500s", j);
    vg_free_string(j);
    CHECK_MSG(n > 5, "the sequence made only %ld driver calls", n);
    CHECK_MSG(with_errors > 0, "no injected fault ever surfaced");
    fprintf(stderr, "fault injection: %ld points tried, %d ended in a clean error\n", n - 1,
            with_errors);
}

VG_TEST(every_driver_call_may_run_out_of_memory) {
    vgt_init("");
    fault_loop(CUDA_ERROR_OUT_OF_MEMORY);
}

VG_TEST(every_driver_call_may_fail) {
    vgt_init("");
    fault_loop(CUDA_ERROR_UNKNOWN);
}

VG_TEST(every_driver_call_may_fail_without_vmm) {
    vgt_init("vmm=off");
    fault_loop(CUDA_ERROR_UNKNOWN);
}

VG_TEST(every_driver_call_may_fail_under_a_limit) {
    vgt_init("limit=96M");
    fault_loop(CUDA_ERROR_OUT_OF_MEMORY);
}

VG_TEST(every_driver_call_may_run_out_of_memory_in_guard_mode_under_a_limit) {
    /* Guard mode's quarantine, its checker launches and its shrinking under a limit
     * (docs/decisions.md G5) meet every failure point. */
    vgt_init("mode=guard,limit=96M,quarantine=64M");
    fault_loop(CUDA_ERROR_OUT_OF_MEMORY);
}

VG_TEST(every_driver_call_may_fail_in_guard_mode_deferred) {
    vgt_init("mode=guard,guard_defer=on");
    fault_loop(CUDA_ERROR_UNKNOWN);
}

/* The driver names a C++ kernel by its mangled name; reports show what a user reads as its
 * name (PyTorch's kernels read _ZN2at6native29vectorized_elementwise_kernel... on the
 * H100). Without the C++ runtime in the process, or for a C name, the name is kept. */
VG_TEST(kernel_names_are_demangled_and_shortened) {
    const char *mangled = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10MulFunctorIfEE"
                          "St5arrayIPcLm2EEEEviT0_T1_";
    CHECK_STREQ(vg__kernel_name("ex_fill"), "ex_fill");
    CHECK(vg__kernel_name(NULL) == NULL);
    if (!dlsym(RTLD_DEFAULT, "__cxa_demangle")) /* (a C program: no C++ runtime loaded) */
        CHECK(vg__kernel_name(mangled) == mangled);
    CHECK(dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL) != NULL);
    const char *shown = vg__kernel_name(mangled);
    CHECK_STREQ(shown, "at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
                       "std::array<char*, 2ul> >");
    CHECK(vg__kernel_name(mangled) == shown); /* (one text per kernel) */
    CHECK(vg__kernel_name("_Znot a name") != NULL);
}

/* A report's first line names the kernel in at most VG_KERNEL_SHORT characters, so that a
 * C++ template's name (cuDNN's run to thousands) leaves room for what the kernel did. */
VG_TEST(long_kernel_names_are_cut_in_the_middle) {
    char buf[VG_KERNEL_SHORT + 1], name[2000];
    CHECK_STREQ(vg__kernel_name_short("ex_fill", buf, sizeof buf), "ex_fill");
    CHECK(vg__kernel_name_short(NULL, buf, sizeof buf) == NULL);
    memset(name, 'a', VG_KERNEL_SHORT);
    name[VG_KERNEL_SHORT] = '\0';
    CHECK(vg__kernel_name_short(name, buf, sizeof buf) == name); /* (exactly the limit) */
    for (size_t i = 0; i < sizeof name - 1; i++)
        name[i] = (char)('a' + i % 26);
    name[sizeof name - 1] = '\0';
    const char *s = vg__kernel_name_short(name, buf, sizeof buf);
    CHECK(s == buf);
    CHECK_EQ(strlen(s), (size_t)VG_KERNEL_SHORT);
    CHECK(strncmp(s, name, 93) == 0);
    CHECK(strncmp(s + 93, "...", 3) == 0);
    CHECK_STREQ(s + 96, name + sizeof name - 1 - 24);
}

/* A launch's parameter words that are two small integers side by side (PyTorch's
 * loaders and storers: data types and sizes) are not taken for pointers: on an H200
 * whose device addresses lay near 16 GiB, (6, 4) read as 0x400000006, inside a freed
 * tensor, and guard mode reported 27 launches "given a pointer to freed memory". */
VG_TEST(two_small_integers_in_a_launch_word_are_no_pointer) {
    CHECK(!vg__launch_word_may_point(0x400000006ull));
    CHECK(!vg__launch_word_may_point(0x400000f06ull));
    CHECK(!vg__launch_word_may_point(0));
    CHECK(!vg__launch_word_may_point(0xffffull << 32 | 0xffff));
    CHECK(vg__launch_word_may_point(0x3fd3b6600ull));     /* (a tensor there) */
    CHECK(vg__launch_word_may_point(0x7f1b3ec00600ull));  /* (the usual high address) */
    CHECK(vg__launch_word_may_point(0x10000ull << 32));   /* (a 256 TiB boundary) */
    CHECK(vg__launch_word_may_point(0x10000ull));
}
