/* dc_blas_info_get: the BLAS says what it is and which kernels it runs, and a
 * generic fallback on a CPU with AVX2 or AVX-512 is named with its remedy.
 * CTest runs this twice: as the machine sets OpenBLAS up, and with
 * OPENBLAS_CORETYPE=Prescott, which makes OpenBLAS (built with DYNAMIC_ARCH,
 * as Debian's is) run its oldest x86-64 kernels, as it does where its
 * detection fails. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

static bool cpu_has_avx2(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static void test_describes_itself(void **state)
{
    (void)state;
    dc_blas_info info;
    dc_blas_info_get(&info);
    print_message("BLAS: %s; core %s; CPU vector extension %s\n", info.library, info.core[0] ? info.core : "(none)",
                  info.cpu_vector[0] ? info.cpu_vector : "(none)");
    assert_true(info.library[0] != '\0');
    /* the build links OpenBLAS (CMakeLists.txt looks for nothing else) */
    if (strstr(info.library, "OpenBLAS") == NULL)
        fail_msg("the BLAS describes itself as \"%s\", expected OpenBLAS", info.library);
    assert_true(info.core[0] != '\0');
    if (cpu_has_avx2() && info.cpu_vector[0] == '\0')
        fail_msg("the CPU has AVX2 but cpu_vector is empty");
}

static void test_fallback_is_warned(void **state)
{
    (void)state;
    dc_blas_info info;
    dc_blas_info_get(&info);
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && strcmp(forced, "Prescott") == 0) {
        if (!cpu_has_avx2()) {
            print_message("skipped: this CPU has no AVX2, so Prescott's kernels are no fallback here\n");
            skip();
        }
        if (strcmp(info.core, "Prescott") != 0)
            fail_msg("OPENBLAS_CORETYPE=Prescott but OpenBLAS reports core \"%s\"", info.core);
        if (!strstr(info.warning, "Prescott") || !strstr(info.warning, "OPENBLAS_CORETYPE="))
            fail_msg("no warning naming the core and the remedy: \"%s\"", info.warning);
    } else if (!forced && cpu_has_avx2()) {
        /* on a machine where OpenBLAS detects the CPU (CI's), no warning */
        if (info.warning[0] != '\0')
            fail_msg("core %s on a CPU with %s: unexpected warning \"%s\"", info.core, info.cpu_vector, info.warning);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describes_itself),
        cmocka_unit_test(test_fallback_is_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
