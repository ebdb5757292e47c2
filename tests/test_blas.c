/* dc_blas_info_get: the BLAS says what it is and which kernels it runs, and a
 * generic fallback on a CPU with AVX2 or AVX-512 is named with its remedy.
 * CTest runs this twice: as the machine sets OpenBLAS up, and with
 * OPENBLAS_CORETYPE=Prescott, which makes OpenBLAS (built with DYNAMIC_ARCH,
 * as Debian's is) run its oldest x86-64 kernels, as it does where its
 * detection fails; and a third time under OMP_THREAD_LIMIT=1 and
 * OMP_DYNAMIC=true, where OpenBLAS's OpenMP build, asked for more threads
 * than OpenMP gives, waited for them forever. Also: products on contexts of
 * different thread counts at once, from two threads. */
#include <pthread.h>
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

enum { PM = 256, PK = 64, PN = 128, PRODUCTS = 150 };

/* PRODUCTS times, on a context of `threads` threads: A B for the same A and
 * B (seeded fills), each compared bit for bit with want (NULL: the first is
 * kept there); the count of products that differed. */
typedef struct product_run {
    int threads;
    float *want;
    int wrong;
} product_run;

static void *run_products(void *arg)
{
    product_run *p = arg;
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    o.num_threads = p->threads;
    o.seed = 11;
    o.quiet = true;
    dc_ctx *ctx = dc_ctx_new(&o, NULL);
    float *got = malloc((size_t)PM * PN * sizeof *got);
    if (!ctx || !got) {
        p->wrong = -1;
        free(got);
        return NULL;
    }
    const int64_t as[2] = {PM, PK}, bs[2] = {PK, PN};
    dc_tensor *a = dc_tensor_new(ctx, DC_F32, 2, as), *b = dc_tensor_new(ctx, DC_F32, 2, bs);
    dc_tape *tape = dc_tape_new(ctx);
    if (!a || !b || !tape || dc_tensor_fill_normal(a, 0, 1) != DC_OK || dc_tensor_fill_normal(b, 0, 0.1) != DC_OK)
        p->wrong = -1;
    for (int r = 0; r < PRODUCTS && p->wrong >= 0; ++r) {
        dc_tape_reset(tape);
        dc_tensor *c = dc_op_matmul(tape, a, b);
        if (!c || dc_tensor_to_host(c, got, (size_t)PM * PN * sizeof *got) != DC_OK) {
            p->wrong = -1;
        } else if (!p->want) {
            p->want = malloc((size_t)PM * PN * sizeof *got);
            if (p->want)
                memcpy(p->want, got, (size_t)PM * PN * sizeof *got);
        } else if (memcmp(got, p->want, (size_t)PM * PN * sizeof *got) != 0) {
            p->wrong++;
        }
    }
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_tensor_free(b);
    dc_ctx_free(ctx);
    free(got);
    return NULL;
}

/* Two contexts of 7 and 2 threads multiplying at once, each on its own
 * thread: every product equals the one its context made alone (OpenBLAS's
 * OpenMP build keeps the thread count process-wide; with the two counts
 * changing it under each other, a third of the 7-thread products were
 * wrong in thousands of elements). */
static void test_contexts_multiply_at_once(void **state)
{
    (void)state;
    product_run alone[2] = {{7, NULL, 0}, {2, NULL, 0}};
    for (int i = 0; i < 2; ++i) {
        run_products(&alone[i]);
        assert_true(alone[i].wrong == 0 && alone[i].want);
    }
    product_run both[2] = {{7, alone[0].want, 0}, {2, alone[1].want, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; ++i)
        assert_int_equal(pthread_create(&th[i], NULL, run_products, &both[i]), 0);
    for (int i = 0; i < 2; ++i)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; ++i) {
        if (both[i].wrong != 0)
            fail_msg("the %d-thread context: %d of %d products differ from its products alone", both[i].threads,
                     both[i].wrong, PRODUCTS);
        free(alone[i].want);
    }
}

/* A product large enough for OpenBLAS to go parallel, on a default
 * context: it completes (under OMP_THREAD_LIMIT=1 it had hung) and is
 * right (300 ones a row and column: 300 everywhere). */
static void test_large_product_completes(void **state)
{
    (void)state;
    dc_ctx *ctx = test_cpu_ctx();
    const int64_t s[2] = {300, 300};
    dc_tensor *a = dc_tensor_new(ctx, DC_F32, 2, s);
    TEST_NONNULL(ctx, a);
    TEST_OK(ctx, dc_tensor_fill(a, 1));
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *c = dc_op_matmul(tape, a, a);
    TEST_NONNULL(ctx, c);
    float *v = malloc(300 * 300 * sizeof *v);
    assert_non_null(v);
    TEST_OK(ctx, dc_tensor_to_host(c, v, 300 * 300 * sizeof *v));
    for (int i = 0; i < 300 * 300; ++i)
        if (v[i] != 300.0f)
            fail_msg("element %d is %g, want 300", i, v[i]);
    free(v);
    dc_tape_free(tape);
    dc_tensor_free(a);
    dc_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describes_itself),
        cmocka_unit_test(test_fallback_is_warned),
        cmocka_unit_test(test_contexts_multiply_at_once),
        cmocka_unit_test(test_large_product_completes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
