/* The CUDA backend against the CPU: every primitive op (embedding included),
 * in float32 and float64, and every broadcast function of the suite, run on
 * both from the same random inputs, forward values and gradients compared by
 * normalized mean squared error (<= 1e-7 in float32, <= 1e-24 for the ops in
 * float64) with NaN and Inf in the same places, shapes without elements
 * included; Adam and SGD steps; backward determinism; the global norm of a
 * large gradient and of several tensors at once, and of gradients beyond the
 * double range of squares; copies between contexts and checkpoints of CUDA
 * tensors; a training step of the demo's HM-LSTM; no cudaMalloc or cudaFree
 * in a steady-state step; contexts on two devices used in turn. The CUDA
 * context is on device 0, or on N with DC_DEVICE=cuda:N. Exits 77
 * (skipped) when no CUDA device can be used, or fails then if
 * DC_REQUIRE_CUDA=1. tests/cuda_emulation runs it on the CPU as well. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, close */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/op_cases.h"
#include "support/test_support.h"

#include "hmlstm.h"

DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(gated_scale);

static dc_ctx *gpu, *cpu;

/* ---- the ops: every row of the shared table of op cases
 * (support/op_cases.h), on both backends ---- */

/* Element i of host values stored in dtype, read and written as a double. */
static double element(const void *values, dc_dtype dtype, int64_t i)
{
    return dtype == DC_F64 ? ((const double *)values)[i] : (double)((const float *)values)[i];
}

static void set_element(void *values, dc_dtype dtype, int64_t i, double value)
{
    if (dtype == DC_F64)
        ((double *)values)[i] = value;
    else
        ((float *)values)[i] = (float)value;
}

/* Normalized mean squared error of b against a reference a (n values in
 * dtype), after checking that NaN and Inf sit in the same places. */
static double nmse_of(dc_dtype dtype, const void *a, const void *b, int64_t n, const char *what)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double on_cpu = element(a, dtype, i), on_cuda = element(b, dtype, i);
        if (isnan(on_cpu) != isnan(on_cuda) || isinf(on_cpu) != isinf(on_cuda) ||
            (isinf(on_cpu) && on_cpu != on_cuda))
            fail_msg("%s: element %lld is %g on the CPU and %g on CUDA", what, (long long)i, on_cpu, on_cuda);
        if (!isfinite(on_cpu))
            continue;
        num += (on_cpu - on_cuda) * (on_cpu - on_cuda);
        den += on_cpu * on_cpu;
    }
    return den > 0 ? num / den : num;
}

/* The same for float32 values. */
static double nmse(const float *a, const float *b, int64_t n, const char *what)
{
    return nmse_of(DC_F32, a, b, n, what);
}

/* Runs case c on ctx in dtype: its inputs (the same values on either
 * backend), the op, and a backward pass seeded with a fixed adjoint.
 * Returns the output and each input's gradient (malloc'd, host memory, in
 * dtype; NULL for an input that gets none). */
static void run_case(dc_ctx *ctx, int c, dc_dtype dtype, void **out, int64_t *n_out, void **grads)
{
    const op_case *k = &cases[c];
    const size_t size = dc_dtype_size(dtype);
    case_inputs in;
    make_inputs(ctx, c, dtype, true, &in);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *y = k->build(tape, in.t, &k->arg);
    TEST_NONNULL(ctx, y);
    if (dc_tensor_dtype(y) != dtype)
        fail_msg("%s (%s): the output is %s", k->name, dc_dtype_name(dtype), dc_dtype_name(dc_tensor_dtype(y)));
    *n_out = dc_tensor_numel(y);
    *out = malloc((size_t)(*n_out ? *n_out : 1) * size);
    /* a view (transpose, slice) is read through a contiguous copy: the
     * device copies only dense tensors to the host */
    dc_tensor *dense = dc_tape_tensor_new(tape, dtype, dc_tensor_ndim(y), dc_tensor_shape(y), NULL);
    TEST_NONNULL(ctx, dense);
    TEST_OK(ctx, dc_tensor_copy(dense, y));
    TEST_OK(ctx, dc_tensor_to_host(dense, *out, (size_t)*n_out * size));
    /* the adjoint: deterministic values in [-1, 1] */
    void *adj = malloc((size_t)(*n_out ? *n_out : 1) * size);
    for (int64_t i = 0; i < *n_out; ++i)
        set_element(adj, dtype, i, sin(0.37 * (double)i + 0.1));
    dc_tensor *g = dc_tape_tensor_new(tape, dtype, dc_tensor_ndim(y), dc_tensor_shape(y), adj);
    free(adj);
    TEST_OK(ctx, dc_backward_with(tape, y, g));
    for (int i = 0; i < k->n_in; ++i) {
        grads[i] = NULL;
        const dc_tensor *gi = dc_tensor_grad(in.t[i]);
        if (!k->grad[i] || !gi)
            continue;
        const int64_t n = dc_tensor_numel(in.t[i]);
        grads[i] = malloc((size_t)(n ? n : 1) * size);
        TEST_OK(ctx, dc_tensor_to_host(gi, grads[i], (size_t)n * size));
    }
    dc_tape_free(tape);
    free_inputs(&in);
}

/* NMSE bounds of the op comparison. float32: a few roundings to float on
 * either side. float64: both backends compute in double; they differ only
 * where CUDA's math functions (exp, log, tanh, pow: within 1 or 2 units in
 * the last place, an NMSE near 1e-31) round differently from the CPU's, and
 * in the order in which sums, matrix products (cuBLAS) and the cross-entropy
 * mean add their terms (both accumulate in double). On these inputs even a
 * strictly sequential sum stays within an NMSE of 1e-27 of the exact one,
 * for the longest sums here too (153900 terms of the full sum, 20000 per
 * column of the bias gradients); the blocked and tree orders of either
 * backend come closer. 1e-24 (1e-12 relative, RMS) leaves a wide margin
 * above that and still catches any rounding to float32 on the way (an NMSE
 * near 1e-15) or a perturbation of one part in 1e9 (1e-18). */
static const double f32_nmse_limit = 1e-7, f64_nmse_limit = 1e-24;

static void test_ops_match_cpu(void **state)
{
    (void)state;
    const dc_dtype dtypes[2] = {DC_F32, DC_F64};
    for (int pass = 0; pass < 2; ++pass) {
        const dc_dtype dtype = dtypes[pass];
        const char *dtype_name = dc_dtype_name(dtype);
        const double limit = dtype == DC_F64 ? f64_nmse_limit : f32_nmse_limit;
        for (int c = 0; c < N_CASES; ++c) {
            const op_case *k = &cases[c];
            void *oc, *og, *gc[3], *gg[3];
            int64_t nc, ng;
            run_case(cpu, c, dtype, &oc, &nc, gc);
            run_case(gpu, c, dtype, &og, &ng, gg);
            assert_int_equal(nc, ng);
            char what[160];
            snprintf(what, sizeof what, "case %d (%s), %s: output", c, k->name, dtype_name);
            const double e = nmse_of(dtype, oc, og, nc, what);
            if (!(e <= limit))
                fail_msg("%s: NMSE %.3g (limit %.0e)", what, e, limit);
            for (int i = 0; i < k->n_in; ++i) {
                if (!gc[i] != !gg[i])
                    fail_msg("case %d (%s), %s: input %d has a gradient on one backend only", c, k->name, dtype_name,
                             i);
                if (!gc[i])
                    continue;
                snprintf(what, sizeof what, "case %d (%s), %s: gradient of input %d", c, k->name, dtype_name, i);
                const double eg = nmse_of(dtype, gc[i], gg[i], shp_numel(&k->shape[i]), what);
                if (!(eg <= limit))
                    fail_msg("%s: NMSE %.3g (limit %.0e)", what, eg, limit);
                free(gc[i]);
                free(gg[i]);
            }
            free(oc);
            free(og);
        }
    }
}

/* A broadcast function on both backends, both policies, with broadcast
 * inputs. */
typedef struct bfn_case {
    const char *name;
    const dc_bfn *fn;
    int n_in;
    int64_t shape[6][2];
    double lo[6], hi[6];
    bool binary[6]; /* 0/1 control values */
} bfn_case;

/* Host doubles into a tensor of either dtype, and back. */
static void set_doubles(dc_ctx *ctx, dc_tensor *t, const double *v, int64_t n)
{
    if (dc_tensor_dtype(t) == DC_F64) {
        TEST_OK(ctx, dc_tensor_from_host_copy(t, v, (size_t)n * sizeof *v));
        return;
    }
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; ++i)
        f[i] = (float)v[i];
    TEST_OK(ctx, dc_tensor_from_host_copy(t, f, (size_t)n * sizeof *f));
    free(f);
}

static void get_doubles(dc_ctx *ctx, const dc_tensor *t, double *v, int64_t n)
{
    if (dc_tensor_dtype(t) == DC_F64) {
        TEST_OK(ctx, dc_tensor_to_host(t, v, (size_t)n * sizeof *v));
        return;
    }
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    TEST_OK(ctx, dc_tensor_to_host(t, f, (size_t)n * sizeof *f));
    for (int64_t i = 0; i < n; ++i)
        v[i] = f[i];
    free(f);
}

/* A tensor's values as floats (malloc'd), whatever its dtype. */
static float *tensor_floats(dc_ctx *ctx, const dc_tensor *t, int64_t skip)
{
    const int64_t n = dc_tensor_numel(t);
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    get_doubles(ctx, t, d, n);
    for (int64_t i = skip; i < n; ++i)
        f[i - skip] = (float)d[i];
    free(d);
    return f;
}

/* Runs the case on ctx in dtype; outputs and gradients come back as float.
 * Every input is a view of a leaf one element longer (offset 1) or of the
 * same length (offset 0): offset 1 leaves no input 16-byte aligned. */
static void run_bfn(dc_ctx *ctx, const bfn_case *c, dc_dtype dtype, int64_t offset, dc_partials_policy policy,
                    float **outs, int64_t *n_out, float **grads)
{
    dc_tensor *leaf[6], *x[6];
    dc_tape *tape = dc_tape_new(ctx);
    for (int k = 0; k < c->n_in; ++k) {
        const int64_t n = c->shape[k][0] * c->shape[k][1], flat = n + offset;
        double *v = calloc((size_t)flat, sizeof *v);
        float *vf = calloc((size_t)flat, sizeof *vf);
        uint64_t s = 99 + (uint64_t)k;
        for (int64_t i = 0; i < n; ++i) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            const double u = (double)(s >> 11) * 0x1.0p-53;
            vf[offset + i] = c->binary[k] ? (float)(u < 0.5) : (float)(c->lo[k] + (c->hi[k] - c->lo[k]) * u);
            v[offset + i] = vf[offset + i]; /* the same values in either dtype */
        }
        leaf[k] = dc_tensor_from_host(ctx, dtype, 1, &flat, dtype == DC_F64 ? (const void *)v : (const void *)vf);
        TEST_NONNULL(ctx, leaf[k]);
        free(v);
        free(vf);
        TEST_OK(ctx, dc_tensor_set_requires_grad(leaf[k], !c->binary[k]));
        x[k] = dc_op_reshape(tape, dc_op_slice(tape, leaf[k], 0, offset, n), 2, c->shape[k]);
        TEST_NONNULL(ctx, x[k]);
    }
    dc_tensor *y[2] = {NULL, NULL};
    TEST_OK(ctx, dc_broadcast_policy(tape, c->fn, c->n_in, x, c->fn->n_outputs, y, policy));
    dc_tensor *loss = y[0];
    for (int k = 1; k < c->fn->n_outputs; ++k)
        loss = dc_op_add(tape, loss, dc_op_affine(tape, y[k], 0.5, 0.0));
    *n_out = dc_tensor_numel(y[0]);
    for (int k = 0; k < c->fn->n_outputs; ++k)
        outs[k] = tensor_floats(ctx, y[k], 0);
    TEST_OK(ctx, dc_backward_with(tape, loss, dc_tape_scalar(tape, dtype, 1.0)));
    for (int k = 0; k < c->n_in; ++k) {
        const dc_tensor *g = dc_tensor_grad(leaf[k]);
        grads[k] = g ? tensor_floats(ctx, g, offset) : NULL;
    }
    dc_tape_free(tape);
    for (int k = 0; k < c->n_in; ++k)
        dc_tensor_free(leaf[k]);
}

static void test_broadcast_functions_match_cpu(void **state)
{
    (void)state;
    const bfn_case bcases[] = {
        {"hmlstm_update_c, control per row", DC_BFN_REF(hmlstm_update_c), 6,
         {{64, 1}, {64, 1}, {64, 300}, {64, 300}, {64, 300}, {64, 300}},
         {0, 0, -2, -2, -2, -2}, {1, 1, 2, 2, 2, 2}, {true, true, false, false, false, false}},
        {"hmlstm_update_c, control per column", DC_BFN_REF(hmlstm_update_c), 6,
         {{1, 300}, {1, 300}, {64, 300}, {64, 300}, {64, 300}, {64, 300}},
         {0, 0, -2, -2, -2, -2}, {1, 1, 2, 2, 2, 2}, {true, true, false, false, false, false}},
        {"polar_pair, broadcast angle", DC_BFN_REF(polar_pair), 2, {{40, 50}, {1, 50}}, {-1, -3}, {2, 3},
         {false, false}},
        {"gated_scale, broadcast b", DC_BFN_REF(gated_scale), 3, {{40, 50}, {40, 1}, {1, 50}}, {-2, 0, -2}, {2, 1, 2},
         {false, true, false}},
        /* gradients summed along rows (a per-row column), and over every
         * element in two stages (a scalar) */
        {"polar_pair, angle per row", DC_BFN_REF(polar_pair), 2, {{600, 64}, {600, 1}}, {-1, -3}, {2, 3},
         {false, false}},
        {"polar_pair, scalar angle", DC_BFN_REF(polar_pair), 2, {{300, 400}, {1, 1}}, {-1, -3}, {2, 3},
         {false, false}},
        /* no elements: the angle's gradient is a sum over nothing, zeros
         * (written into tape memory that earlier cases have used) */
        {"polar_pair, no rows", DC_BFN_REF(polar_pair), 2, {{0, 50}, {1, 50}}, {-1, -3}, {2, 3}, {false, false}},
    };
    /* float32 aligned (the 16-byte path where the layout allows it),
     * float32 misaligned (the strided path), float64 (16 bytes: 2 lanes) */
    const struct {
        dc_dtype dtype;
        int64_t offset;
        const char *name;
    } layouts[] = {{DC_F32, 0, "f32"}, {DC_F32, 1, "f32, misaligned"}, {DC_F64, 0, "f64"}};
    for (size_t i = 0; i < sizeof bcases / sizeof bcases[0]; ++i) {
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; ++l) {
            for (int policy = 0; policy < 2; ++policy) {
                const bfn_case *c = &bcases[i];
                float *oc[2], *og[2], *gc[6], *gg[6];
                int64_t nc, ng;
                run_bfn(cpu, c, layouts[l].dtype, layouts[l].offset, (dc_partials_policy)policy, oc, &nc, gc);
                run_bfn(gpu, c, layouts[l].dtype, layouts[l].offset, (dc_partials_policy)policy, og, &ng, gg);
                assert_int_equal(nc, ng);
                char what[160];
                for (int k = 0; k < c->fn->n_outputs; ++k) {
                    snprintf(what, sizeof what, "%s (%s, %s): output %d", c->name, layouts[l].name,
                             policy ? "recompute" : "store", k);
                    const double e = nmse(oc[k], og[k], nc, what);
                    if (!(e <= 1e-7))
                        fail_msg("%s: NMSE %.3g", what, e);
                    free(oc[k]);
                    free(og[k]);
                }
                for (int k = 0; k < c->n_in; ++k) {
                    if (!gc[k] != !gg[k])
                        fail_msg("%s: input %d has a gradient on one backend only", c->name, k);
                    if (!gc[k])
                        continue;
                    snprintf(what, sizeof what, "%s (%s, %s): gradient %d", c->name, layouts[l].name,
                             policy ? "recompute" : "store", k);
                    const double e = nmse(gc[k], gg[k], c->shape[k][0] * c->shape[k][1], what);
                    if (!(e <= 1e-7))
                        fail_msg("%s: NMSE %.3g", what, e);
                    free(gc[k]);
                    free(gg[k]);
                }
            }
        }
    }
}

/* Runs polar_pair on two column blocks of a leaf x [rows, 2 cols + pad]
 * (slices, as gates of a matrix product are), then again with the blocks
 * swapped, so that each block's gradient is written once and added to once;
 * returns x's gradient (malloc'd floats) and the launches of the backward
 * pass. With `separate`, the blocks are two leaves of their own instead
 * (contiguous gradients), and the gradient returned is theirs, side by side
 * as in x. */
static float *polar_pair_on_blocks(dc_ctx *ctx, dc_dtype dtype, int64_t rows, int64_t cols, int64_t pad,
                                   bool separate, dc_partials_policy policy, uint64_t *launches)
{
    const int64_t width = 2 * cols + pad, shape[2] = {rows, width}, block[2] = {rows, cols};
    dc_tensor *x = dc_tensor_new(ctx, dtype, 2, shape);
    TEST_NONNULL(ctx, x);
    double *values = malloc((size_t)(4 * rows * width) * sizeof *values); /* x, then the adjoint */
    assert_non_null(values);
    for (int64_t i = 0; i < rows * width; ++i)
        values[i] = 0.5 + 0.25 * sin(0.37 * (double)i);
    test_set_values(x, values);
    dc_tape *tape = dc_tape_new(ctx);
    dc_tensor *leaf[2] = {NULL, NULL}, *part[2];
    for (int k = 0; k < 2; ++k) {
        if (separate) {
            /* the same values, copied into a leaf of its own */
            leaf[k] = dc_tensor_new(ctx, dtype, 2, block);
            TEST_NONNULL(ctx, leaf[k]);
            TEST_OK(ctx, dc_tensor_copy(leaf[k], dc_op_slice(tape, x, 1, k * cols, cols)));
            TEST_OK(ctx, dc_tensor_set_requires_grad(leaf[k], true));
            part[k] = leaf[k];
        } else {
            part[k] = dc_op_slice(tape, x, 1, k * cols, cols);
        }
        TEST_NONNULL(ctx, part[k]);
    }
    if (!separate)
        TEST_OK(ctx, dc_tensor_set_requires_grad(x, true));
    /* the slices again, now that x requires a gradient */
    for (int k = 0; k < 2 && !separate; ++k)
        TEST_NONNULL(ctx, part[k] = dc_op_slice(tape, x, 1, k * cols, cols));
    dc_tensor *y[2], *z[2];
    TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, part, 2, y, policy));
    dc_tensor *swapped[2] = {part[1], part[0]};
    TEST_OK(ctx, dc_broadcast_policy(tape, DC_BFN_REF(polar_pair), 2, swapped, 2, z, policy));
    dc_tensor *terms[4] = {y[0], y[1], z[0], z[1]};
    dc_tensor *both = dc_op_concat(tape, 4, terms, 0);
    TEST_NONNULL(ctx, both);
    dc_tensor *adjoint = dc_tensor_new(ctx, dtype, 2, (const int64_t[]){4 * rows, cols});
    TEST_NONNULL(ctx, adjoint);
    for (int64_t i = 0; i < 4 * rows * cols; ++i)
        values[i] = cos(0.11 * (double)i);
    test_set_values(adjoint, values);
    free(values);
    const uint64_t before = dc_ctx_device_counters(ctx).kernel_launches;
    TEST_OK(ctx, dc_backward_with(tape, both, adjoint));
    *launches = dc_ctx_device_counters(ctx).kernel_launches - before;
    float *g = malloc((size_t)(rows * width) * sizeof *g);
    assert_non_null(g);
    if (separate) {
        for (int64_t i = 0; i < rows * width; ++i)
            g[i] = 0;
        for (int k = 0; k < 2; ++k) {
            float *gk = tensor_floats(ctx, dc_tensor_grad(leaf[k]), 0);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c)
                    g[r * width + k * cols + c] = gk[r * cols + c];
            free(gk);
            dc_tensor_free(leaf[k]);
        }
    } else {
        float *gx = tensor_floats(ctx, dc_tensor_grad(x), 0);
        memcpy(g, gx, (size_t)(rows * width) * sizeof *g);
        free(gx);
    }
    dc_tape_free(tape);
    dc_tensor_free(adjoint);
    dc_tensor_free(x);
    return g;
}

/* A broadcast function's backward writes its gradients where they belong,
 * into slices of a larger gradient and adding where one accumulates, in the
 * one launch of its pass: as many launches as with gradients of their own,
 * and the CPU's values. Rows of whole 16-byte groups (the vector loop) and
 * rows one element longer (the element loop); both policies. */
static void test_broadcast_function_gradients_in_place(void **state)
{
    (void)state;
    const dc_dtype dtypes[2] = {DC_F32, DC_F64};
    for (int t = 0; t < 2; ++t)
        for (int64_t pad = 0; pad < 2; ++pad)
            for (int policy = 0; policy < 2; ++policy) {
                const dc_partials_policy pol = (dc_partials_policy)policy;
                uint64_t on_cpu, in_place, separate;
                float *want = polar_pair_on_blocks(cpu, dtypes[t], 48, 64, pad, false, pol, &on_cpu);
                float *got = polar_pair_on_blocks(gpu, dtypes[t], 48, 64, pad, false, pol, &in_place);
                float *apart = polar_pair_on_blocks(gpu, dtypes[t], 48, 64, pad, true, pol, &separate);
                char what[128];
                snprintf(what, sizeof what, "polar_pair on column blocks (%s, pad %d, %s)",
                         dc_dtype_name(dtypes[t]), (int)pad, policy ? "recompute" : "store");
                const int64_t n = 48 * (2 * 64 + pad);
                const double e = nmse(want, got, n, what);
                if (!(e <= 1e-7))
                    fail_msg("%s: gradient NMSE %.3g against the CPU", what, e);
                for (int64_t i = 0; i < n; ++i)
                    if (i % (2 * 64 + pad) < 2 * 64 && got[i] != apart[i])
                        fail_msg("%s: element %lld is %.9g in place, %.9g in gradients of their own", what,
                                 (long long)i, got[i], apart[i]);
                if (pol == DC_PARTIALS_RECOMPUTE && in_place != separate)
                    fail_msg("%s: the backward pass launched %llu kernels, %llu with gradients of their own", what,
                             (unsigned long long)in_place, (unsigned long long)separate);
                free(want);
                free(got);
                free(apart);
            }
}

/* The same backward twice gives bit-identical gradients, reductions
 * included (a bias row broadcast over a batch, a scalar). */
static void test_backward_is_deterministic(void **state)
{
    (void)state;
    const int64_t xs[2] = {512, 1000}, bs[1] = {1000};
    dc_tensor *x = dc_tensor_new(gpu, DC_F32, 2, xs), *b = dc_tensor_new(gpu, DC_F32, 1, bs);
    dc_tensor *s = dc_tensor_new(gpu, DC_F32, 0, NULL);
    TEST_OK(gpu, dc_tensor_fill_uniform(x, -1, 1));
    TEST_OK(gpu, dc_tensor_fill_uniform(b, -1, 1));
    TEST_OK(gpu, dc_tensor_fill(s, 0.3));
    dc_tensor_set_requires_grad(b, true);
    dc_tensor_set_requires_grad(s, true);
    float *first = malloc(1000 * sizeof *first), *again = malloc(1000 * sizeof *again);
    float s1 = 0, s2 = 0;
    for (int run = 0; run < 2; ++run) {
        dc_tensor_zero_grad(b);
        dc_tensor_zero_grad(s);
        dc_tape *tape = dc_tape_new(gpu);
        dc_tensor *y = dc_op_tanh(tape, dc_op_mul(tape, dc_op_add(tape, x, b), s));
        TEST_OK(gpu, dc_backward(tape, dc_op_sum(tape, y, 0, NULL, false)));
        TEST_OK(gpu, dc_tensor_to_host(dc_tensor_grad(b), run ? again : first, 1000 * sizeof(float)));
        TEST_OK(gpu, dc_tensor_to_host(dc_tensor_grad(s), run ? &s2 : &s1, sizeof(float)));
        dc_tape_free(tape);
    }
    assert_memory_equal(first, again, 1000 * sizeof(float));
    assert_memory_equal(&s1, &s2, sizeof(float));
    free(first);
    free(again);

    /* a broadcast function's store-policy backward, reducing straight from
     * the partials: per row and over everything */
    const bfn_case bc[] = {
        {"per row", DC_BFN_REF(polar_pair), 2, {{600, 64}, {600, 1}}, {-1, -3}, {2, 3}, {false, false}},
        {"scalar", DC_BFN_REF(polar_pair), 2, {{300, 400}, {1, 1}}, {-1, -3}, {2, 3}, {false, false}},
    };
    for (size_t i = 0; i < sizeof bc / sizeof bc[0]; ++i) {
        float *o1[2], *o2[2], *g1[6], *g2[6];
        int64_t n1, n2;
        run_bfn(gpu, &bc[i], DC_F32, 0, DC_PARTIALS_STORE, o1, &n1, g1);
        run_bfn(gpu, &bc[i], DC_F32, 0, DC_PARTIALS_STORE, o2, &n2, g2);
        for (int k = 0; k < 2; ++k) {
            const int64_t n = bc[i].shape[k][0] * bc[i].shape[k][1];
            if (memcmp(g1[k], g2[k], (size_t)n * sizeof(float)) != 0)
                fail_msg("polar_pair, %s: gradient %d differs between two identical runs", bc[i].name, k);
            free(g1[k]);
            free(g2[k]);
            free(o1[k]);
            free(o2[k]);
        }
    }
    dc_tensor_free(x);
    dc_tensor_free(b);
    dc_tensor_free(s);
}

/* After the first step, a step calls neither cudaMalloc nor cudaFree. */
static void test_steady_state_allocates_nothing(void **state)
{
    (void)state;
    const int64_t xs[2] = {64, 256}, ws[2] = {256, 128};
    dc_tensor *x = dc_tensor_new(gpu, DC_F32, 2, xs), *w = dc_tensor_new(gpu, DC_F32, 2, ws);
    TEST_OK(gpu, dc_tensor_fill_uniform(x, -1, 1));
    TEST_OK(gpu, dc_tensor_fill_uniform(w, -0.1, 0.1));
    dc_tensor_set_requires_grad(w, true);
    dc_optimizer *opt = dc_optimizer_adam(gpu, 1, &w, NULL);
    TEST_NONNULL(gpu, opt);
    dc_tape *tape = dc_tape_new(gpu);
    dc_device_memory_stats after_first = {0, 0, 0};
    for (int step = 0; step < 5; ++step) {
        dc_tape_reset(tape);
        dc_tensor *y = dc_op_sigmoid(tape, dc_op_matmul(tape, x, w));
        TEST_OK(gpu, dc_backward(tape, dc_op_mean(tape, y, 0, NULL, false)));
        TEST_OK(gpu, dc_clip_grad_norm(gpu, 1, &w, 1.0, NULL));
        TEST_OK(gpu, dc_optimizer_step(opt));
        dc_optimizer_zero_grad(opt);
        TEST_OK(gpu, dc_ctx_synchronize(gpu));
        const dc_device_memory_stats m = dc_ctx_device_memory(gpu);
        if (step == 0)
            after_first = m;
        else if (m.malloc_calls != after_first.malloc_calls || m.free_calls != after_first.free_calls)
            fail_msg("step %d: cudaMalloc %llu -> %llu, cudaFree %llu -> %llu", step,
                     (unsigned long long)after_first.malloc_calls, (unsigned long long)m.malloc_calls,
                     (unsigned long long)after_first.free_calls, (unsigned long long)m.free_calls);
    }
    dc_tape_free(tape);
    dc_optimizer_free(opt);
    dc_tensor_free(x);
    dc_tensor_free(w);
}

/* A training step of the HM-LSTM (forward, backward, clipping, Adam) with
 * its inputs already on the device, once warm: the host never waits for the
 * device, and nothing is allocated or freed with cudaMalloc or cudaFree, so
 * that the step can be captured as a CUDA graph. The same number of kernels
 * every step. */
static void test_training_step_never_waits(void **state)
{
    (void)state;
    hm_config cfg = {2, 16, 5, 8, 11, DC_F32, true, DC_PARTIALS_RECOMPUTE};
    hm_model *m = hm_model_new(gpu, &cfg, 5);
    TEST_NONNULL(gpu, m);
    TEST_OK(gpu, hm_model_set_slope(m, 1.7));
    hm_state *hs = hm_state_new(gpu, &cfg, 4);
    TEST_NONNULL(gpu, hs);
    const int64_t shape[2] = {6, 4};
    double ids_v[24], targets_v[24];
    for (int i = 0; i < 24; ++i) {
        ids_v[i] = (i * 7 + 3) % 11;
        targets_v[i] = (i * 5 + 1) % 11;
    }
    dc_tensor *ids = test_tensor(gpu, DC_F32, 2, shape, ids_v), *targets = test_tensor(gpu, DC_F32, 2, shape, targets_v);
    dc_optimizer *adam = dc_optimizer_adam(gpu, m->n_params, m->params, NULL);
    TEST_NONNULL(gpu, adam);
    dc_tape *tape = dc_tape_new(gpu);
    TEST_OK(gpu, dc_ctx_synchronize(gpu));
    dc_device_counters before = {0, 0, 0, 0, 0, 0};
    uint64_t launches = 0;
    for (int step = 0; step < 8; ++step) {
        const dc_device_counters at_start = dc_ctx_device_counters(gpu);
        dc_tape_reset(tape);
        hm_forward_result r;
        TEST_OK(gpu, hm_forward(tape, m, hs, HM_CELL_MIXED, ids, targets, false, NULL, &r));
        TEST_OK(gpu, dc_backward(tape, r.loss));
        TEST_OK(gpu, dc_clip_grad_norm(gpu, m->n_params, m->params, 1.0, NULL));
        TEST_OK(gpu, dc_optimizer_step(adam));
        dc_optimizer_zero_grad(adam);
        TEST_OK(gpu, hm_state_update(hs, &r));
        const dc_device_counters c = dc_ctx_device_counters(gpu);
        if (step == 5) {
            before = at_start;
            launches = c.kernel_launches - at_start.kernel_launches;
        }
        if (step >= 5) {
            if (c.host_waits != at_start.host_waits || c.malloc_calls != before.malloc_calls ||
                c.free_calls != before.free_calls)
                fail_msg("step %d: %llu host waits, %llu cudaMalloc and %llu cudaFree calls in a warm step", step,
                         (unsigned long long)(c.host_waits - at_start.host_waits),
                         (unsigned long long)(c.malloc_calls - before.malloc_calls),
                         (unsigned long long)(c.free_calls - before.free_calls));
            if (c.kernel_launches - at_start.kernel_launches != launches)
                fail_msg("step %d: %llu kernels, %llu in step 5", step,
                         (unsigned long long)(c.kernel_launches - at_start.kernel_launches),
                         (unsigned long long)launches);
        }
        /* the loss, read after the step (the one wait), is finite */
        double loss = NAN;
        if (step == 7)
            TEST_OK(gpu, dc_tensor_item(r.loss, &loss));
        if (step == 7 && !isfinite(loss))
            fail_msg("the loss after 8 steps is %g", loss);
    }
    print_message("a warm HM-LSTM training step (2 x 16, batch 4 x 6): %llu kernel launches\n",
                  (unsigned long long)launches);
    dc_tape_free(tape);
    dc_optimizer_free(adam);
    dc_tensor_free(ids);
    dc_tensor_free(targets);
    hm_state_free(hs);
    hm_model_free(m);
}

/* A concatenation on CUDA copies its parts in one launch per 32 parts, and
 * its backward pass gives each part's gradient in as many. */
static void test_concat_launches(void **state)
{
    (void)state;
    const int64_t shape[2] = {2, 3};
    dc_tensor *x = dc_tensor_new(gpu, DC_F32, 2, shape);
    TEST_NONNULL(gpu, x);
    TEST_OK(gpu, dc_tensor_fill(x, 0.5));
    TEST_OK(gpu, dc_tensor_set_requires_grad(x, true));
    dc_tape *tape = dc_tape_new(gpu);
    dc_tensor *parts[40];
    for (int k = 0; k < 40; ++k)
        parts[k] = dc_op_affine(tape, x, 1.0 + k, 0.0);
    const uint64_t before = dc_ctx_device_counters(gpu).kernel_launches;
    dc_tensor *y = dc_op_concat(tape, 40, parts, 0);
    TEST_NONNULL(gpu, y);
    assert_int_equal(dc_ctx_device_counters(gpu).kernel_launches - before, 2);
    double v = 0;
    TEST_OK(gpu, dc_tensor_get(y, 79 * 3 + 2, &v));
    assert_true(v == 0.5 * 40);
    dc_tensor *s = dc_op_sum(tape, y, 0, NULL, false);
    TEST_OK(gpu, dc_backward(tape, s));
    /* d/dx of sum_k (1 + k) x = 820 */
    TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(x), 5, &v));
    assert_true(v == 820.0);
    dc_tape_free(tape);
    dc_tensor_free(x);
}

/* The gradient of an operand broadcast along rows is summed in the launch
 * that computes the other operand's: z [4, 1] * h [4, 5] differentiates in
 * one launch, and its sums are right, written and then added to. */
static void test_row_sums_in_one_launch(void **state)
{
    (void)state;
    dc_tensor *z = dc_tensor_new(gpu, DC_F64, 2, (const int64_t[]){4, 1});
    dc_tensor *h = dc_tensor_new(gpu, DC_F64, 2, (const int64_t[]){4, 5});
    dc_tensor *adjoint = dc_tensor_new(gpu, DC_F64, 2, (const int64_t[]){4, 5});
    TEST_NONNULL(gpu, z);
    TEST_NONNULL(gpu, h);
    TEST_NONNULL(gpu, adjoint);
    for (int64_t i = 0; i < 20; ++i) {
        TEST_OK(gpu, dc_tensor_set(h, i, 0.5 * (double)i));
        TEST_OK(gpu, dc_tensor_set(adjoint, i, 1.0 + (double)(i % 3)));
    }
    for (int64_t r = 0; r < 4; ++r)
        TEST_OK(gpu, dc_tensor_set(z, r, 1.0 + (double)r));
    TEST_OK(gpu, dc_tensor_set_requires_grad(z, true));
    TEST_OK(gpu, dc_tensor_set_requires_grad(h, true));
    for (int pass = 1; pass <= 2; ++pass) {
        dc_tape *tape = dc_tape_new(gpu);
        dc_tensor *y = dc_op_mul(tape, z, h);
        TEST_NONNULL(gpu, y);
        const uint64_t before = dc_ctx_device_counters(gpu).kernel_launches;
        TEST_OK(gpu, dc_backward_with(tape, y, adjoint));
        const uint64_t launches = dc_ctx_device_counters(gpu).kernel_launches - before;
        if (launches != 1)
            fail_msg("pass %d: %llu launches for the product's backward pass, want 1", pass,
                     (unsigned long long)launches);
        for (int64_t r = 0; r < 4; ++r) {
            double want = 0, got;
            for (int64_t c = 0; c < 5; ++c)
                want += 0.5 * (double)(r * 5 + c) * (1.0 + (double)((r * 5 + c) % 3));
            TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(z), r, &got));
            if (got != pass * want)
                fail_msg("pass %d: z's gradient at row %lld is %.17g, want %.17g", pass, (long long)r, got,
                         pass * want);
        }
        dc_tape_free(tape);
    }
    dc_tensor_free(z);
    dc_tensor_free(h);
    dc_tensor_free(adjoint);
}

/* A concatenation of slices gives their gradients in one launch when no
 * two of them share a tensor, and part by part (their additions could meet)
 * when two are slices of one; the gradients are right either way. */
static void test_concat_of_slices_backward(void **state)
{
    (void)state;
    const int64_t shape[2] = {4, 3};
    dc_tensor *x = dc_tensor_new(gpu, DC_F32, 2, shape), *w = dc_tensor_new(gpu, DC_F32, 2, shape);
    TEST_NONNULL(gpu, x);
    TEST_NONNULL(gpu, w);
    TEST_OK(gpu, dc_tensor_set_requires_grad(x, true));
    TEST_OK(gpu, dc_tensor_set_requires_grad(w, true));
    for (int shared = 0; shared < 2; ++shared) {
        dc_tensor_zero_grad(x);
        dc_tensor_zero_grad(w);
        dc_tape *tape = dc_tape_new(gpu);
        /* rows 0-1 of x, then rows 1-3 of w (or of x again: row 1 twice) */
        dc_tensor *parts[2] = {dc_op_slice(tape, x, 0, 0, 2), dc_op_slice(tape, shared ? x : w, 0, 1, 3)};
        dc_tensor *y = dc_op_concat(tape, 2, parts, 0);
        TEST_NONNULL(gpu, y);
        dc_tensor *adjoint = dc_tensor_new(gpu, DC_F32, 2, (const int64_t[]){5, 3});
        TEST_NONNULL(gpu, adjoint);
        for (int64_t i = 0; i < 15; ++i)
            TEST_OK(gpu, dc_tensor_set(adjoint, i, 1.0 + (double)i));
        const uint64_t before = dc_ctx_device_counters(gpu).kernel_launches;
        TEST_OK(gpu, dc_backward_with(tape, y, adjoint));
        const uint64_t launches = dc_ctx_device_counters(gpu).kernel_launches - before;
        if (!shared && launches != 1)
            fail_msg("slices of two tensors: %llu launches in the backward pass, want 1", (unsigned long long)launches);
        /* element (r, c) of y's adjoint is 1 + 3 r + c */
        for (int64_t r = 0; r < 4; ++r)
            for (int64_t c = 0; c < 3; ++c) {
                double want_x = r < 2 ? 1 + 3 * r + c : 0, want_w = 0, got_x, got_w;
                if (r >= 1)
                    *(shared ? &want_x : &want_w) += 1 + 3 * (r + 1) + c;
                TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(x), r * 3 + c, &got_x));
                got_w = 0; /* w has no gradient where only x is used */
                if (dc_tensor_grad(w))
                    TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(w), r * 3 + c, &got_w));
                if (got_x != want_x || got_w != want_w)
                    fail_msg("%s: gradients at (%lld, %lld) are %g and %g, want %g and %g",
                             shared ? "slices of one tensor" : "slices of two", (long long)r, (long long)c, got_x,
                             got_w, want_x, want_w);
            }
        dc_tensor_free(adjoint);
        dc_tape_free(tape);
    }
    /* column blocks: each gradient is a strided view into its tensor's */
    dc_tensor_zero_grad(x);
    dc_tensor_zero_grad(w);
    dc_tape *tape = dc_tape_new(gpu);
    dc_tensor *cols[2] = {dc_op_slice(tape, x, 1, 0, 2), dc_op_slice(tape, w, 1, 1, 2)};
    dc_tensor *y = dc_op_concat(tape, 2, cols, 1);
    TEST_NONNULL(gpu, y);
    dc_tensor *adjoint = dc_tensor_new(gpu, DC_F32, 2, (const int64_t[]){4, 4});
    TEST_NONNULL(gpu, adjoint);
    for (int64_t i = 0; i < 16; ++i)
        TEST_OK(gpu, dc_tensor_set(adjoint, i, 1.0 + (double)i));
    TEST_OK(gpu, dc_backward_with(tape, y, adjoint));
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 3; ++c) {
            /* x's columns 0-1 take y's 0-1, w's columns 1-2 take y's 2-3 */
            const double want_x = c < 2 ? 1 + 4 * r + c : 0, want_w = c > 0 ? 1 + 4 * r + c + 1 : 0;
            double got_x, got_w;
            TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(x), r * 3 + c, &got_x));
            TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(w), r * 3 + c, &got_w));
            if (got_x != want_x || got_w != want_w)
                fail_msg("column blocks: gradients at (%lld, %lld) are %g and %g, want %g and %g", (long long)r,
                         (long long)c, got_x, got_w, want_x, want_w);
        }
    dc_tensor_free(adjoint);
    dc_tape_free(tape);
    dc_tensor_free(x);
    dc_tensor_free(w);

    /* a part whose gradient layout needs three axes (rows 1-3 of the
     * middle axis of a [2, 5, 4] tensor, joined along the last axis with a
     * [2, 3, 4] one): copied on its own, the other part in the one launch */
    dc_tensor *base = dc_tensor_new(gpu, DC_F32, 3, (const int64_t[]){2, 5, 4});
    dc_tensor *side = dc_tensor_new(gpu, DC_F32, 3, (const int64_t[]){2, 3, 4});
    TEST_NONNULL(gpu, base);
    TEST_NONNULL(gpu, side);
    TEST_OK(gpu, dc_tensor_set_requires_grad(base, true));
    TEST_OK(gpu, dc_tensor_set_requires_grad(side, true));
    tape = dc_tape_new(gpu);
    dc_tensor *deep[2] = {dc_op_slice(tape, base, 1, 1, 3), side};
    y = dc_op_concat(tape, 2, deep, 2);
    TEST_NONNULL(gpu, y);
    adjoint = dc_tensor_new(gpu, DC_F32, 3, (const int64_t[]){2, 3, 8});
    TEST_NONNULL(gpu, adjoint);
    for (int64_t i = 0; i < 48; ++i)
        TEST_OK(gpu, dc_tensor_set(adjoint, i, 1.0 + (double)i));
    TEST_OK(gpu, dc_backward_with(tape, y, adjoint));
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t r = 0; r < 5; ++r)
            for (int64_t c = 0; c < 4; ++c) {
                /* y's (b, r - 1, c) for the base's rows 1-3, else 0; the side's (b, r, c) is y's (b, r, 4 + c) */
                const double want_base = r >= 1 && r <= 3 ? 1 + 24 * b + 8 * (r - 1) + c : 0;
                double got;
                TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(base), 20 * b + 4 * r + c, &got));
                if (got != want_base)
                    fail_msg("three-axis part: the base's gradient at (%lld, %lld, %lld) is %g, want %g",
                             (long long)b, (long long)r, (long long)c, got, want_base);
                if (r < 3) {
                    TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(side), 12 * b + 4 * r + c, &got));
                    if (got != 1 + 24 * b + 8 * r + 4 + c)
                        fail_msg("three-axis part: the side's gradient at (%lld, %lld, %lld) is %g", (long long)b,
                                 (long long)r, (long long)c, got);
                }
            }
    dc_tensor_free(adjoint);
    dc_tape_free(tape);
    dc_tensor_free(base);
    dc_tensor_free(side);
}

/* On CUDA, indices are read on the device: an embedding id or a target out
 * of range is found there, the op uses row 0 in its place, and the next
 * call that waits for the device reports it, naming the op and the index;
 * the report is given once. */
static void test_bad_index_reported_at_the_next_wait(void **state)
{
    (void)state;
    const int64_t ts[2] = {5, 3}, is[1] = {4};
    const double ids_v[4] = {1, 4, 7, 2}, targets_v[4] = {0, 2, -1, 1};
    dc_tensor *table = dc_tensor_new(gpu, DC_F32, 2, ts);
    TEST_OK(gpu, dc_tensor_fill(table, 0.5));
    dc_tensor *ids = test_tensor(gpu, DC_F32, 1, is, ids_v), *targets = test_tensor(gpu, DC_F32, 1, is, targets_v);
    TEST_OK(gpu, dc_ctx_synchronize(gpu));
    dc_tape *tape = dc_tape_new(gpu);
    dc_tensor *rows = dc_op_embedding(tape, table, ids);
    TEST_NONNULL(gpu, rows);
    const dc_status st = dc_ctx_synchronize(gpu);
    if (st != DC_ERR_ARG || !strstr(dc_last_error(gpu), "dc_op_embedding") || !strstr(dc_last_error(gpu), "ids[2]") ||
        !strstr(dc_last_error(gpu), " 7"))
        fail_msg("an id of 7 into 5 rows: %s \"%s\"; want DC_ERR_ARG naming dc_op_embedding and ids[2] = 7",
                 dc_status_name(st), dc_last_error(gpu));
    TEST_OK(gpu, dc_ctx_synchronize(gpu)); /* reported once */
    const int64_t ls[2] = {4, 3};
    dc_tensor *logits = dc_tape_tensor_new(tape, DC_F32, 2, ls, NULL);
    TEST_NONNULL(gpu, dc_op_cross_entropy(tape, logits, targets));
    double v;
    const dc_status st2 = dc_tensor_item(dc_op_sum(tape, logits, 0, NULL, false), &v);
    if (st2 != DC_ERR_ARG || !strstr(dc_last_error(gpu), "dc_op_cross_entropy") ||
        !strstr(dc_last_error(gpu), "targets[2]"))
        fail_msg("a target of -1: %s \"%s\"; want DC_ERR_ARG naming dc_op_cross_entropy and targets[2]",
                 dc_status_name(st2), dc_last_error(gpu));
    dc_tape_free(tape);
    dc_tensor_free(table);
    dc_tensor_free(ids);
    dc_tensor_free(targets);
}

/* Three steps of Adam (with weight decay) and of SGD with momentum, in
 * float32 and float64, from the same parameters on both backends: the loss
 * sum(tanh(w) x) gives each step a gradient that depends on w. */
static void optimize(dc_ctx *ctx, dc_dtype dtype, int adam, const double *w0, const double *x0, int64_t n,
                     double *w_out)
{
    const int64_t shape[2] = {n / 70, 70};
    dc_tensor *w = dc_tensor_new(ctx, dtype, 2, shape), *x = dc_tensor_new(ctx, dtype, 2, shape);
    TEST_NONNULL(ctx, w);
    TEST_NONNULL(ctx, x);
    set_doubles(ctx, w, w0, n);
    set_doubles(ctx, x, x0, n);
    dc_tensor_set_requires_grad(w, true);
    dc_adam_options o = dc_adam_options_default();
    o.lr = 0.01;
    o.weight_decay = 0.1;
    dc_optimizer *opt = adam ? dc_optimizer_adam(ctx, 1, &w, &o) : dc_optimizer_sgd(ctx, 1, &w, 0.05, 0.9);
    TEST_NONNULL(ctx, opt);
    dc_tape *tape = dc_tape_new(ctx);
    for (int step = 0; step < 3; ++step) {
        dc_tape_reset(tape);
        dc_optimizer_zero_grad(opt);
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, dc_op_mul(tape, dc_op_tanh(tape, w), x), 0, NULL, false)));
        TEST_OK(ctx, dc_optimizer_step(opt));
    }
    get_doubles(ctx, w, w_out, n);
    dc_tape_free(tape);
    dc_optimizer_free(opt);
    dc_tensor_free(w);
    dc_tensor_free(x);
}

/* 41 parameters of sizes 1 to 281, float64 but for one float32 in the
 * middle, one of them without a gradient, three steps: every value, on
 * ctx, into w_out (41 * 281 doubles, a row per parameter); the launches of
 * the last step through *launches. */
enum { BATCH_PARAMS = 41, BATCH_WIDTH = 281, BATCH_F32 = 36, BATCH_IDLE = 5 };
static void optimize_batch(dc_ctx *ctx, int adam, double *w_out, uint64_t *launches)
{
    dc_tensor *w[BATCH_PARAMS];
    for (int k = 0; k < BATCH_PARAMS; ++k) {
        const int64_t n = 7 * k + 1;
        w[k] = dc_tensor_new(ctx, k == BATCH_F32 ? DC_F32 : DC_F64, 1, &n);
        TEST_NONNULL(ctx, w[k]);
        for (int64_t i = 0; i < n; ++i)
            TEST_OK(ctx, dc_tensor_set(w[k], i, sin(0.37 * (double)(k * BATCH_WIDTH + i))));
        TEST_OK(ctx, dc_tensor_set_requires_grad(w[k], true));
    }
    dc_adam_options o = dc_adam_options_default();
    o.lr = 0.01;
    o.weight_decay = 0.1;
    dc_optimizer *opt = adam ? dc_optimizer_adam(ctx, BATCH_PARAMS, w, &o)
                             : dc_optimizer_sgd(ctx, BATCH_PARAMS, w, 0.05, 0.9);
    TEST_NONNULL(ctx, opt);
    dc_tape *tape = dc_tape_new(ctx);
    for (int step = 0; step < 3; ++step) {
        dc_optimizer_zero_grad(opt);
        for (int k = 0; k < BATCH_PARAMS; ++k) {
            if (k == BATCH_IDLE)
                continue;
            dc_tape_reset(tape);
            dc_tensor *y = dc_op_affine(tape, dc_op_tanh(tape, w[k]), 0.5 + 0.01 * k, 0.0);
            TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, y, 0, NULL, false)));
        }
        const uint64_t before = ctx == gpu ? dc_ctx_device_counters(ctx).kernel_launches : 0;
        TEST_OK(ctx, dc_optimizer_step(opt));
        *launches = ctx == gpu ? dc_ctx_device_counters(ctx).kernel_launches - before : 0;
    }
    for (int k = 0; k < BATCH_PARAMS; ++k) {
        for (int64_t i = 0; i < 7 * k + 1; ++i)
            TEST_OK(ctx, dc_tensor_get(w[k], i, &w_out[k * BATCH_WIDTH + i]));
        dc_tensor_free(w[k]);
    }
    dc_tape_free(tape);
    dc_optimizer_free(opt);
}

/* On CUDA an optimizer step updates its parameters a batch at a time: up
 * to 32 of one dtype per launch (Adam: and one launch for their step
 * counts), with the CPU's values; a parameter without a gradient is left
 * alone. */
static void test_optimizer_batches(void **state)
{
    (void)state;
    double *on_cpu = calloc(BATCH_PARAMS * BATCH_WIDTH, sizeof *on_cpu);
    double *on_gpu = calloc(BATCH_PARAMS * BATCH_WIDTH, sizeof *on_gpu);
    assert_non_null(on_cpu);
    assert_non_null(on_gpu);
    for (int adam = 0; adam < 2; ++adam) {
        uint64_t unused, launches;
        optimize_batch(cpu, adam, on_cpu, &unused);
        optimize_batch(gpu, adam, on_gpu, &launches);
        /* runs of 35 float64 with a gradient (32 and 3), 1 float32, 4
         * float64: four batches */
        const uint64_t want = adam ? 8 : 4;
        if (launches != want)
            fail_msg("%s: a step launched %llu kernels, want %llu", adam ? "Adam" : "SGD",
                     (unsigned long long)launches, (unsigned long long)want);
        for (int k = 0; k < BATCH_PARAMS; ++k)
            for (int64_t i = 0; i < 7 * k + 1; ++i) {
                const double a = on_cpu[k * BATCH_WIDTH + i], b = on_gpu[k * BATCH_WIDTH + i];
                const double tol = k == BATCH_F32 ? 2e-6 : 1e-13;
                if (!(fabs(a - b) <= tol))
                    fail_msg("%s: parameter %d element %lld is %.17g on the CPU and %.17g on CUDA", adam ? "Adam" : "SGD",
                             k, (long long)i, a, b);
                if (k == BATCH_IDLE && b != sin(0.37 * (double)(k * BATCH_WIDTH + i)))
                    fail_msg("%s: the parameter without a gradient changed", adam ? "Adam" : "SGD");
            }
    }
    free(on_cpu);
    free(on_gpu);
}

static void test_optimizers_match_cpu(void **state)
{
    (void)state;
    enum { N = 300 * 70 };
    double *w0 = malloc(N * sizeof *w0), *x0 = malloc(N * sizeof *x0);
    double *on_cpu = malloc(N * sizeof *on_cpu), *on_gpu = malloc(N * sizeof *on_gpu);
    for (int64_t i = 0; i < N; ++i) {
        w0[i] = sin(0.731 * (double)i) * 2.0;
        x0[i] = cos(0.413 * (double)i + 0.5);
    }
    for (int adam = 0; adam < 2; ++adam)
        for (int d = 0; d < 2; ++d) {
            const dc_dtype dtype = d ? DC_F64 : DC_F32;
            optimize(cpu, dtype, adam, w0, x0, N, on_cpu);
            optimize(gpu, dtype, adam, w0, x0, N, on_gpu);
            /* float32 ends within a few units of the last place of w (|w| <= 2) */
            const double tol = dtype == DC_F32 ? 2e-6 : 1e-13;
            for (int64_t i = 0; i < N; ++i)
                if (!(fabs(on_gpu[i] - on_cpu[i]) <= tol))
                    fail_msg("%s %s: w[%lld] is %.17g on the CPU and %.17g on CUDA after three steps",
                             adam ? "Adam" : "SGD", dc_dtype_name(dtype), (long long)i, on_cpu[i], on_gpu[i]);
        }
    free(w0);
    free(x0);
    free(on_cpu);
    free(on_gpu);
}

/* A parameter on the device, every element 0.25, without a gradient yet. */
static dc_tensor *new_param(dc_dtype dtype, int ndim, const int64_t *shape)
{
    dc_tensor *w = dc_tensor_new(gpu, dtype, ndim, shape);
    TEST_OK(gpu, dc_tensor_fill(w, 0.25));
    dc_tensor_set_requires_grad(w, true);
    return w;
}

/* Gives w the gradient a everywhere: d/dw of sum(a w), backward on the
 * reset tape. */
static void give_gradient(dc_tape *tape, dc_tensor *w, double a)
{
    dc_tape_reset(tape);
    TEST_OK(gpu, dc_backward(tape, dc_op_sum(tape, dc_op_affine(tape, w, a, 0.0), 0, NULL, false)));
}

/* The global norm of a gradient larger than the device's resident blocks
 * cover in one pass (the sum of squares strides over its grid). */
static void test_clip_norm_of_a_large_gradient(void **state)
{
    (void)state;
    const int64_t ws[2] = {2048, 1024};
    dc_tensor *w = new_param(DC_F32, 2, ws);
    dc_tape *tape = dc_tape_new(gpu);
    give_gradient(tape, w, 3.0);
    double norm = 0;
    TEST_OK(gpu, dc_clip_grad_norm(gpu, 1, &w, 1e9, &norm));
    const double expected = 3.0 * sqrt(2048.0 * 1024.0);
    if (!(fabs(norm - expected) <= 1e-9 * expected))
        fail_msg("norm %.17g, expected %.17g", norm, expected);
    dc_tape_free(tape);
    dc_tensor_free(w);
}

/* The global norm over several tensors at once: float32 and float64, one
 * larger than a full grid covers, one of a single element, one without a
 * gradient. Every gradient is a constant a_i, so the norm is exact in
 * double; after clipping each gradient holds a_i times the same scale. */
static void test_clip_norm_of_many_tensors(void **state)
{
    (void)state;
    enum { N = 5 };
    const dc_dtype dtype[N] = {DC_F32, DC_F64, DC_F32, DC_F64, DC_F32};
    const int64_t shape[N][2] = {{2048, 1024}, {3, 5}, {1, 1}, {7, 9}, {600, 500}};
    const double a[N] = {0.5, -3.0, 1.25, 2.0, -0.75};
    const bool used[N] = {true, true, true, false, true};
    dc_tensor *w[N];
    dc_tape *tape = dc_tape_new(gpu);
    double squares = 0;
    for (int i = 0; i < N; ++i) {
        w[i] = new_param(dtype[i], 2, shape[i]);
        if (!used[i])
            continue;
        give_gradient(tape, w[i], a[i]);
        squares += a[i] * a[i] * (double)(shape[i][0] * shape[i][1]);
    }
    assert_null(dc_tensor_grad(w[3]));
    const double expected = sqrt(squares), max_norm = 10.0;
    double norm = 0;
    /* first the same tensors in reverse order, without clipping: the table
     * of block sums is reused with other row lengths, so rows left short
     * must have been cleared */
    dc_tensor *reversed[N];
    for (int i = 0; i < N; ++i)
        reversed[i] = w[N - 1 - i];
    TEST_OK(gpu, dc_clip_grad_norm(gpu, N, reversed, 1e30, &norm));
    if (!(fabs(norm - expected) <= 1e-12 * expected))
        fail_msg("norm of the reversed list %.17g, expected %.17g", norm, expected);
    /* one launch per pass for the four gradients of two dtypes (three
     * passes, each with its combine and decide), one to scale them */
    const uint64_t before = dc_ctx_device_counters(gpu).kernel_launches;
    TEST_OK(gpu, dc_clip_grad_norm(gpu, N, w, max_norm, &norm));
    const uint64_t launches = dc_ctx_device_counters(gpu).kernel_launches - before;
    if (launches != 3 * 3 + 1)
        fail_msg("the clip launched %llu kernels, want 10", (unsigned long long)launches);
    if (!(fabs(norm - expected) <= 1e-12 * expected))
        fail_msg("norm %.17g, expected %.17g", norm, expected);
    for (int i = 0; i < N; ++i) {
        if (!used[i])
            continue;
        const dc_tensor *g = dc_tensor_grad(w[i]);
        float *v = tensor_floats(gpu, g, 0);
        const float want = (float)(a[i] * (max_norm / norm));
        int64_t bad = -1;
        for (int64_t e = 0; bad < 0 && e < shape[i][0] * shape[i][1]; ++e)
            if (!(fabsf(v[e] - want) <= 1e-6f * fabsf(want)))
                bad = e;
        const float got = bad >= 0 ? v[bad] : want;
        free(v);
        if (bad >= 0)
            fail_msg("tensor %d element %lld: %.9g after clipping, expected %.9g", i, (long long)bad, (double)got,
                     (double)want);
    }
    dc_tape_free(tape);
    for (int i = 0; i < N; ++i)
        dc_tensor_free(w[i]);
}

/* Float64 gradients whose squares overflow or vanish in a double: the norm
 * is summed again scaled by a power of two from the largest magnitude over
 * every block of every tensor, and the clip scales as for any other norm.
 * The larger tensor spans more blocks than one pass of the grid covers. */
static void test_clip_norm_rescaled(void **state)
{
    (void)state;
    const int64_t shape[2][2] = {{2048, 1024}, {3, 5}};
    const struct {
        const char *what;
        double a[2], max_norm;
    } rescale_cases[] = {
        {"near 1e153", {1e153, -4e153}, 1.0},
        {"near 1e-170", {1e-170, 3e-170}, 1e-168},
        {"subnormal", {1e-320, -4e-320}, 1e-317},
    };
    for (size_t c = 0; c < sizeof rescale_cases / sizeof rescale_cases[0]; ++c) {
        dc_tensor *w[2];
        dc_tape *tape = dc_tape_new(gpu);
        long double squares = 0;
        for (int i = 0; i < 2; ++i) {
            w[i] = new_param(DC_F64, 2, shape[i]);
            give_gradient(tape, w[i], rescale_cases[c].a[i]);
            squares += (long double)rescale_cases[c].a[i] * rescale_cases[c].a[i] * (long double)(shape[i][0] * shape[i][1]);
        }
        const long double expected = sqrtl(squares);
        double norm = 0;
        TEST_OK(gpu, dc_clip_grad_norm(gpu, 2, w, rescale_cases[c].max_norm, &norm));
        /* plus one unit of the subnormals, the spacing of results down there */
        if (!(fabsl((long double)norm - expected) <= 1e-13L * expected + 0x1p-1074L))
            fail_msg("%s: norm %.17g, expected %.17Lg", rescale_cases[c].what, norm, expected);
        for (int i = 0; i < 2; ++i) {
            const double want = (double)(rescale_cases[c].a[i] * (rescale_cases[c].max_norm / expected));
            double got;
            TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(w[i]), 7, &got));
            if (!(fabs(got - want) <= 1e-13 * fabs(want) + 0x1p-1074))
                fail_msg("%s: tensor %d after clipping holds %.17g, expected %.17g", rescale_cases[c].what, i, got, want);
        }
        dc_tape_free(tape);
        for (int i = 0; i < 2; ++i)
            dc_tensor_free(w[i]);
    }
}

/* A thousand float64 gradients of one element each, near 1e306: their
 * squares overflow, and so would a sum of the per-block largest magnitudes
 * (one block each, about 1.5e309 together), while the norm (about 5e307) and
 * the largest magnitude itself are finite. Only the true largest magnitude
 * gives a finite rescaled norm. */
static void test_clip_norm_rescaled_by_the_largest(void **state)
{
    (void)state;
    enum { N = 1000 };
    const int64_t one[1] = {1};
    dc_tensor *w[N];
    double a[N];
    dc_tape *tape = dc_tape_new(gpu);
    long double squares = 0;
    for (int i = 0; i < N; ++i) {
        a[i] = (i % 2 ? -1e306 : 1e306) * (1.0 + i / (double)N);
        squares += (long double)a[i] * a[i];
        w[i] = new_param(DC_F64, 1, one);
        give_gradient(tape, w[i], a[i]);
    }
    const long double expected = sqrtl(squares);
    const double max_norm = 1e300;
    double norm = 0;
    TEST_OK(gpu, dc_clip_grad_norm(gpu, N, w, max_norm, &norm));
    if (!(fabsl((long double)norm - expected) <= 1e-13L * expected))
        fail_msg("norm %.17g, expected %.17Lg", norm, expected);
    for (int i = 0; i < N; ++i) {
        const double want = (double)(a[i] * (max_norm / expected));
        double got;
        TEST_OK(gpu, dc_tensor_get(dc_tensor_grad(w[i]), 0, &got));
        if (!(fabs(got - want) <= 1e-13 * fabs(want)))
            fail_msg("tensor %d after clipping holds %.17g, expected %.17g", i, got, want);
    }
    dc_tape_free(tape);
    for (int i = 0; i < N; ++i)
        dc_tensor_free(w[i]);
}

/* Copies between a CPU and a CUDA context (through host memory) and between
 * two CUDA contexts (on the device); a strided view on the CUDA side of such
 * a copy, and as the destination of a checkpoint load, is refused with
 * nothing written.
 * A checkpoint saved from CUDA tensors loads into CUDA and CPU tensors. */
static void test_copies_between_contexts(void **state)
{
    (void)state;
    const int64_t s[2] = {3, 5}, st[2] = {5, 3};
    double v[15], back[15], zeros[15] = {0};
    for (int i = 0; i < 15; ++i)
        v[i] = 0.5 * i - 2;
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    o.seed = 2;
    dc_ctx *gpu2 = dc_ctx_new(&o, NULL);
    TEST_NONNULL(gpu, gpu2);
    dc_tensor *c = dc_tensor_from_host(cpu, DC_F64, 2, s, v);
    dc_tensor *g = dc_tensor_new(gpu, DC_F64, 2, s), *g2 = dc_tensor_new(gpu2, DC_F64, 2, s);
    dc_tensor *c2 = dc_tensor_new(cpu, DC_F64, 2, s);
    TEST_OK(gpu, dc_tensor_copy(g, c));
    TEST_OK(gpu2, dc_tensor_copy(g2, g));
    TEST_OK(cpu, dc_tensor_copy(c2, g2));
    TEST_OK(cpu, dc_tensor_to_host(c2, back, sizeof back));
    assert_memory_equal(v, back, sizeof v);

    dc_tape *tape = dc_tape_new(gpu);
    dc_tensor *gt = dc_op_transpose(tape, g, 0, 1); /* a strided view of g */
    TEST_NONNULL(gpu, gt);
    dc_tensor *ct = dc_tensor_new(cpu, DC_F64, 2, st);
    TEST_OK(cpu, dc_tensor_fill(ct, 0.0));
    if (dc_tensor_copy(ct, gt) != DC_ERR_UNSUPPORTED)
        fail_msg("a copy from a strided CUDA view to the CPU was not refused");
    TEST_OK(cpu, dc_tensor_to_host(ct, back, sizeof back));
    assert_memory_equal(zeros, back, sizeof zeros);
    if (dc_tensor_copy(gt, ct) != DC_ERR_UNSUPPORTED)
        fail_msg("a copy from the CPU into a strided CUDA view was not refused");
    dc_tensor *g2t = dc_tensor_new(gpu2, DC_F64, 2, st);
    if (dc_tensor_copy(g2t, gt) != DC_ERR_UNSUPPORTED)
        fail_msg("a copy from a strided CUDA view to another CUDA context was not refused");
    dc_tensor_free(g2t);
    TEST_OK(gpu, dc_tensor_to_host(g, back, sizeof back));
    assert_memory_equal(v, back, sizeof v);

    char path[] = "/tmp/dc_test_cuda_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    dc_tensor *h = dc_tensor_new(gpu, DC_F64, 2, st);
    TEST_OK(gpu, dc_tensor_fill_uniform(h, -1, 1));
    const char *names[1] = {"h"};
    TEST_OK(gpu, dc_checkpoint_save(gpu, path, 1, &h, names));
    if (dc_checkpoint_load(gpu, path, 1, &gt, names) != DC_ERR_UNSUPPORTED)
        fail_msg("a checkpoint load into a strided CUDA view was not refused");
    TEST_OK(gpu, dc_tensor_to_host(g, back, sizeof back));
    assert_memory_equal(v, back, sizeof v);
    double want[15], got[15];
    TEST_OK(gpu, dc_tensor_to_host(h, want, sizeof want));
    dc_tensor *h_gpu = dc_tensor_new(gpu2, DC_F64, 2, st), *h_cpu = dc_tensor_new(cpu, DC_F64, 2, st);
    TEST_OK(gpu2, dc_checkpoint_load(gpu2, path, 1, &h_gpu, names));
    TEST_OK(gpu2, dc_tensor_to_host(h_gpu, got, sizeof got));
    assert_memory_equal(want, got, sizeof want);
    TEST_OK(cpu, dc_checkpoint_load(cpu, path, 1, &h_cpu, names));
    TEST_OK(cpu, dc_tensor_to_host(h_cpu, got, sizeof got));
    assert_memory_equal(want, got, sizeof want);
    remove(path);

    dc_tape_free(tape);
    dc_tensor *all[8] = {c, g, g2, c2, ct, h, h_gpu, h_cpu};
    for (int i = 0; i < 8; ++i)
        dc_tensor_free(all[i]);
    dc_ctx_free(gpu2);
}

/* One training step of the demo's HM-LSTM (hmlstm_demo/hmlstm.c) on CUDA
 * against the CPU: the same parameters (copied across the contexts), state
 * and sequence; both cells and both policies in float32, the mixed cell in
 * float64. The loss, the boundary decisions (FLUSH, COPY and UPDATE counts,
 * all three present) and every parameter's gradient, by NMSE. */
static void hm_step(dc_ctx *ctx, hm_model *m, hm_state *s, hm_cell_kind cell, const double *ids_v,
                    const double *targets_v, const int64_t *shape, double *loss, double **grads,
                    int64_t ops[HM_MAX_LAYERS][3])
{
    dc_tensor *ids = test_tensor(ctx, m->cfg.dtype, 2, shape, ids_v);
    dc_tensor *targets = test_tensor(ctx, m->cfg.dtype, 2, shape, targets_v);
    dc_tape *tape = dc_tape_new(ctx);
    for (int i = 0; i < m->n_params; ++i)
        dc_tensor_zero_grad(m->params[i]);
    hm_forward_result r;
    TEST_OK(ctx, hm_forward(tape, m, s, cell, ids, targets, true, NULL, &r));
    TEST_OK(ctx, dc_backward(tape, r.loss));
    TEST_OK(ctx, dc_tensor_item(r.loss, loss));
    memcpy(ops, r.ops, sizeof r.ops);
    for (int i = 0; i < m->n_params; ++i) {
        const dc_tensor *g = dc_tensor_grad(m->params[i]);
        TEST_NONNULL(ctx, g);
        grads[i] = test_values(g);
    }
    dc_tape_free(tape);
    dc_tensor_free(ids);
    dc_tensor_free(targets);
}

static void test_hmlstm_step_matches_cpu(void **state)
{
    (void)state;
    const struct {
        dc_dtype dtype;
        hm_cell_kind cell;
        dc_partials_policy policy;
        double limit;
    } runs[] = {
        {DC_F32, HM_CELL_MIXED, DC_PARTIALS_STORE, 1e-8},
        {DC_F32, HM_CELL_MIXED, DC_PARTIALS_RECOMPUTE, 1e-8},
        {DC_F32, HM_CELL_PURE, DC_PARTIALS_STORE, 1e-8},
        {DC_F64, HM_CELL_MIXED, DC_PARTIALS_STORE, 1e-22},
    };
    enum { LAYERS = 2, HIDDEN = 16, BATCH = 4, STEPS = 12 };
    const int64_t shape[2] = {STEPS, BATCH};
    double ids[STEPS * BATCH], targets[STEPS * BATCH];
    for (int i = 0; i < STEPS * BATCH; ++i) {
        ids[i] = (i * 5 + 3) % 7;
        targets[i] = (i * 3 + 1) % 7;
    }
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; ++k) {
        const hm_config cfg = {LAYERS, HIDDEN, 3, 5, 7, runs[k].dtype, true, runs[k].policy};
        hm_model *mc = hm_model_new(cpu, &cfg, 5), *mg = hm_model_new(gpu, &cfg, 5);
        TEST_NONNULL(cpu, mc);
        TEST_NONNULL(gpu, mg);
        TEST_OK(cpu, hm_model_set_slope(mc, 1.7));
        TEST_OK(gpu, hm_model_set_slope(mg, 1.7));
        hm_state *sc = hm_state_new(cpu, &cfg, BATCH), *sg = hm_state_new(gpu, &cfg, BATCH);
        TEST_NONNULL(cpu, sc);
        TEST_NONNULL(gpu, sg);
        /* boundary biases spread so that detectors fire and stay quiet, and a
         * state that is not all zeros, some boundaries already set */
        for (int l = 0; l < LAYERS; ++l) {
            TEST_OK(cpu, dc_tensor_set(mc->b[l], 4 * HIDDEN, l % 2 ? 0.3 : -0.2));
            TEST_OK(cpu, dc_tensor_fill_uniform(sc->h[l], -0.5, 0.5));
            TEST_OK(cpu, dc_tensor_fill_uniform(sc->c[l], -0.5, 0.5));
            for (int b = 0; b < BATCH; ++b)
                TEST_OK(cpu, dc_tensor_set(sc->z[l], b, (b + l) % 2));
            TEST_OK(gpu, dc_tensor_copy(sg->h[l], sc->h[l]));
            TEST_OK(gpu, dc_tensor_copy(sg->c[l], sc->c[l]));
            TEST_OK(gpu, dc_tensor_copy(sg->z[l], sc->z[l]));
        }
        for (int i = 0; i < mc->n_params; ++i)
            TEST_OK(gpu, dc_tensor_copy(mg->params[i], mc->params[i]));

        double loss_c, loss_g, *gc[4 + 3 * HM_MAX_LAYERS], *gg[4 + 3 * HM_MAX_LAYERS];
        int64_t ops_c[HM_MAX_LAYERS][3], ops_g[HM_MAX_LAYERS][3];
        hm_step(cpu, mc, sc, runs[k].cell, ids, targets, shape, &loss_c, gc, ops_c);
        hm_step(gpu, mg, sg, runs[k].cell, ids, targets, shape, &loss_g, gg, ops_g);
        char what[160];
        const char *name = runs[k].cell == HM_CELL_PURE ? "pure" : runs[k].policy == DC_PARTIALS_STORE ? "store" : "recompute";
        const char *dt = dc_dtype_name(runs[k].dtype);
        if (!(fabs(loss_g - loss_c) <= (runs[k].dtype == DC_F32 ? 1e-6 : 1e-13) * fabs(loss_c)))
            fail_msg("HM-LSTM step (%s, %s): loss %.17g on CUDA, %.17g on the CPU", name, dt, loss_g, loss_c);
        int64_t total[3] = {0, 0, 0};
        for (int l = 0; l < LAYERS; ++l)
            for (int o = 0; o < 3; ++o) {
                if (ops_g[l][o] != ops_c[l][o])
                    fail_msg("HM-LSTM step (%s, %s): layer %d ran operation %d %lld times on CUDA, %lld on the CPU",
                             name, dt, l, o, (long long)ops_g[l][o], (long long)ops_c[l][o]);
                total[o] += ops_c[l][o];
            }
        if (!total[HM_FLUSH] || !total[HM_COPY] || !total[HM_UPDATE])
            fail_msg("HM-LSTM step: the sequence must run FLUSH, COPY and UPDATE");
        for (int i = 0; i < mc->n_params; ++i) {
            snprintf(what, sizeof what, "HM-LSTM step (%s, %s): gradient of %s", name, dt, mc->names[i]);
            const double e = nmse_of(DC_F64, gc[i], gg[i], dc_tensor_numel(mc->params[i]), what);
            if (!(e <= runs[k].limit))
                fail_msg("%s: NMSE %g (limit %g)", what, e, runs[k].limit);
            free(gc[i]);
            free(gg[i]);
        }
        hm_state_free(sc);
        hm_state_free(sg);
        hm_model_free(mc);
        hm_model_free(mg);
    }
}

/* One model's training, cut into stages so that two devices' runs can take
 * turns op by op (see test_two_devices): rows of an embedding table, @ w,
 * tanh, into the c-update with control per column (FLUSH, COPY and UPDATE
 * columns), cross entropy, backward, a wait for the device, the global norm
 * clipped (it is larger than the limit), a step of Adam and then one of SGD;
 * in float64. Each stage is one call of the library (a few in the first). */
enum { TD_ROWS = 6, TD_VOCAB = 7, TD_IN = 5, TD_COLS = 12, TD_STAGES = 12, TD_STEPS = 2, TD_PARAMS = 5 };

typedef struct device_run {
    dc_ctx *ctx;
    dc_tensor *table, *ids, *w, *f, *i, *g, *z, *zb, *targets;
    dc_tensor *params[TD_PARAMS];
    dc_optimizer *adam, *sgd;
    dc_tape *tape;
    dc_tensor *e, *h, *c, *y, *loss;
    double losses[TD_STEPS], norms[TD_STEPS];
} device_run;

static void device_run_setup(device_run *r)
{
    dc_ctx *ctx = r->ctx;
    const int64_t ts[2] = {TD_VOCAB, TD_IN}, ws[2] = {TD_IN, TD_COLS}, gs[2] = {TD_ROWS, TD_COLS},
                  zs[2] = {1, TD_COLS}, rs[1] = {TD_ROWS};
    double v[TD_ROWS * TD_COLS], z[TD_COLS], zb[TD_COLS], ids[TD_ROWS], t[TD_ROWS];
    for (int k = 0; k < TD_ROWS * TD_COLS; ++k)
        v[k] = sin(0.37 * k + 0.2);
    for (int k = 0; k < TD_COLS; ++k) {
        z[k] = k % 3 == 0;  /* FLUSH */
        zb[k] = k % 3 == 2; /* UPDATE where zb, COPY where neither */
    }
    for (int k = 0; k < TD_ROWS; ++k) {
        ids[k] = (k * 3 + 1) % TD_VOCAB;
        t[k] = (k * 5) % TD_COLS;
    }
    r->table = test_tensor(ctx, DC_F64, 2, ts, v);
    r->ids = test_tensor(ctx, DC_F64, 1, rs, ids);
    r->w = test_tensor(ctx, DC_F64, 2, ws, v + 3);
    r->f = test_tensor(ctx, DC_F64, 2, gs, v);
    r->i = test_tensor(ctx, DC_F64, 2, gs, v + 1);
    r->g = test_tensor(ctx, DC_F64, 2, gs, v + 2);
    r->z = test_tensor(ctx, DC_F64, 2, zs, z);
    r->zb = test_tensor(ctx, DC_F64, 2, zs, zb);
    r->targets = test_tensor(ctx, DC_F64, 1, rs, t);
    dc_tensor *p[TD_PARAMS] = {r->table, r->w, r->f, r->i, r->g};
    for (int k = 0; k < TD_PARAMS; ++k) {
        r->params[k] = p[k];
        TEST_OK(ctx, dc_tensor_set_requires_grad(p[k], true));
    }
    dc_adam_options o = dc_adam_options_default();
    o.lr = 0.05;
    r->adam = dc_optimizer_adam(ctx, TD_PARAMS, r->params, &o);
    r->sgd = dc_optimizer_sgd(ctx, TD_PARAMS, r->params, 0.1, 0.9);
    r->tape = dc_tape_new(ctx);
    TEST_NONNULL(ctx, r->adam);
    TEST_NONNULL(ctx, r->sgd);
    TEST_NONNULL(ctx, r->tape);
}

static void device_run_stage(device_run *r, int step, int stage)
{
    dc_ctx *ctx = r->ctx;
    switch (stage) {
    case 0:
        if (step == 0)
            device_run_setup(r);
        break;
    case 1:
        dc_tape_reset(r->tape);
        dc_optimizer_zero_grad(r->adam);
        break;
    case 2:
        TEST_NONNULL(ctx, r->e = dc_op_embedding(r->tape, r->table, r->ids));
        break;
    case 3:
        TEST_NONNULL(ctx, r->h = dc_op_matmul(r->tape, r->e, r->w));
        break;
    case 4:
        TEST_NONNULL(ctx, r->c = dc_op_tanh(r->tape, r->h));
        break;
    case 5: {
        dc_tensor *in[6] = {r->z, r->zb, r->c, r->f, r->i, r->g};
        TEST_OK(ctx, dc_broadcast_policy(r->tape, DC_BFN_REF(hmlstm_update_c), 6, in, 1, &r->y,
                                         step ? DC_PARTIALS_RECOMPUTE : DC_PARTIALS_STORE));
        break;
    }
    case 6:
        TEST_NONNULL(ctx, r->loss = dc_op_cross_entropy(r->tape, r->y, r->targets));
        break;
    case 7:
        TEST_OK(ctx, dc_backward(r->tape, r->loss));
        break;
    case 8:
        TEST_OK(ctx, dc_ctx_synchronize(ctx));
        break;
    case 9:
        TEST_OK(ctx, dc_clip_grad_norm(ctx, TD_PARAMS, r->params, 0.1, &r->norms[step]));
        break;
    case 10:
        TEST_OK(ctx, dc_optimizer_step(step ? r->sgd : r->adam));
        break;
    case 11:
        TEST_OK(ctx, dc_tensor_item(r->loss, &r->losses[step]));
        break;
    }
}

static void device_run_free(device_run *r)
{
    dc_tape_free(r->tape);
    dc_optimizer_free(r->adam);
    dc_optimizer_free(r->sgd);
    dc_tensor *t[9] = {r->table, r->ids, r->w, r->f, r->i, r->g, r->z, r->zb, r->targets};
    for (int k = 0; k < 9; ++k)
        dc_tensor_free(t[k]);
    dc_ctx_free(r->ctx);
}

/* Contexts on devices 0 and 1 used in turn from this thread, the CPU as the
 * reference: every stage of one device's run comes right after the same
 * stage on the other device, so each op starts with the other device
 * current and must make its own current before its first launch, GEMM or
 * allocation (the emulated runtime refuses a launch on a stream of a device
 * that is not current, and a kernel faults on another device's memory).
 * Then copies from a tensor of one device to the other's, both ways.
 * Skipped where there is only one device. */
static void test_two_devices(void **state)
{
    (void)state;
    device_run runs[3];
    memset(runs, 0, sizeof runs);
    for (int d = 0; d < 2; ++d) {
        dc_ctx_options o = dc_ctx_options_default();
        o.backend = DC_BACKEND_CUDA;
        o.cuda_device = d;
        dc_status st;
        runs[d].ctx = dc_ctx_new(&o, &st);
        if (!runs[d].ctx) {
            if (d == 1 && st == DC_ERR_DEVICE) {
                printf("test_two_devices: skipped: %s\n", dc_last_error(NULL));
                dc_ctx_free(runs[0].ctx);
                skip();
            }
            fail_msg("a context on CUDA device %d: %s", d, dc_last_error(NULL));
        }
        char want[16];
        snprintf(want, sizeof want, "cuda:%d", d);
        if (dc_ctx_cuda_device(runs[d].ctx) != d || !strstr(dc_ctx_device_name(runs[d].ctx), want))
            fail_msg("a context asked for device %d runs on %d (%s)", d, dc_ctx_cuda_device(runs[d].ctx),
                     dc_ctx_device_name(runs[d].ctx));
    }
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CPU;
    runs[2].ctx = dc_ctx_new(&o, NULL);
    assert_int_equal(dc_ctx_cuda_device(runs[2].ctx), -1);
    for (int step = 0; step < TD_STEPS; ++step)
        for (int stage = 0; stage < TD_STAGES; ++stage)
            for (int k = 0; k < 3; ++k)
                device_run_stage(&runs[k], step, stage);
    for (int step = 0; step < TD_STEPS; ++step)
        if (!(runs[2].norms[step] > 0.1))
            fail_msg("step %d: the gradient's norm %g does not exceed the clip limit", step, runs[2].norms[step]);
    for (int d = 0; d < 2; ++d) {
        for (int step = 0; step < TD_STEPS; ++step) {
            const double *got = &runs[d].losses[step], *want = &runs[2].losses[step];
            if (!(fabs(*got - *want) <= 1e-12 * fabs(*want)))
                fail_msg("device %d, step %d: loss %.17g, on the CPU %.17g", d, step, *got, *want);
            got = &runs[d].norms[step], want = &runs[2].norms[step];
            if (!(fabs(*got - *want) <= 1e-12 * fabs(*want)))
                fail_msg("device %d, step %d: gradient norm %.17g, on the CPU %.17g", d, step, *got, *want);
        }
        for (int p = 0; p < TD_PARAMS; ++p) {
            double *got = test_values(runs[d].params[p]), *want = test_values(runs[2].params[p]);
            char what[64];
            snprintf(what, sizeof what, "device %d: parameter %d after %d steps", d, p, TD_STEPS);
            const double e = nmse_of(DC_F64, want, got, dc_tensor_numel(runs[2].params[p]), what);
            if (!(e <= 1e-22))
                fail_msg("%s: NMSE %g", what, e);
            free(got);
            free(want);
        }
    }

    /* device to device, both ways: the peer copy */
    for (int d = 0; d < 2; ++d) {
        dc_tensor *to = dc_tensor_new(runs[1 - d].ctx, DC_F64, 2, dc_tensor_shape(runs[d].w));
        TEST_NONNULL(runs[1 - d].ctx, to);
        TEST_OK(runs[1 - d].ctx, dc_tensor_copy(to, runs[d].w));
        double *got = test_values(to), *want = test_values(runs[d].w);
        assert_memory_equal(want, got, (size_t)dc_tensor_numel(to) * sizeof *got);
        free(got);
        free(want);
        dc_tensor_free(to);
    }
    for (int k = 0; k < 3; ++k)
        device_run_free(&runs[k]);
}

/* A device number beyond the devices present is refused and named. */
static void test_device_number_checked(void **state)
{
    (void)state;
    dc_ctx_options o = dc_ctx_options_default();
    o.backend = DC_BACKEND_CUDA;
    o.cuda_device = 4096;
    dc_status st = DC_OK;
    dc_clear_error(NULL);
    dc_ctx *ctx = dc_ctx_new(&o, &st);
    if (ctx) {
        dc_ctx_free(ctx);
        fail_msg("a context on CUDA device 4096 was made");
    }
    assert_int_equal(st, DC_ERR_DEVICE);
    if (!strstr(dc_last_error(NULL), "device 4096") || !strstr(dc_last_error(NULL), "present"))
        fail_msg("device 4096: the message \"%s\" does not name the device and the devices present",
                 dc_last_error(NULL));
}

static void test_host_round_trip(void **state)
{
    (void)state;
    const int64_t s[3] = {3, 5, 7};
    double v[105], back[105];
    for (int i = 0; i < 105; ++i)
        v[i] = i * 0.25 - 3;
    dc_tensor *t = dc_tensor_from_host(gpu, DC_F64, 3, s, v);
    TEST_NONNULL(gpu, t);
    TEST_OK(gpu, dc_tensor_to_host(t, back, sizeof back));
    assert_memory_equal(v, back, sizeof v);
    dc_tensor_free(t);
}

int main(void)
{
    dc_ctx_options o = dc_ctx_options_default();
    /* DC_DEVICE=cuda:N runs the tests' CUDA context on device N */
    const char *device = getenv("DC_DEVICE");
    o.backend = device && strncmp(device, "cuda", 4) == 0 ? DC_BACKEND_AUTO : DC_BACKEND_CUDA;
    o.seed = 1;
    dc_status st = DC_OK;
    gpu = dc_ctx_new(&o, &st);
    if (!gpu && st == DC_ERR_ARG) {
        printf("test_cuda: failed: %s\n", dc_last_error(NULL)); /* a mistyped DC_DEVICE is no skip */
        return 1;
    }
    if (!gpu) {
        /* on a machine that has a GPU, DC_REQUIRE_CUDA=1 turns the skip into
         * a failure, so that a driver too old for the toolkit cannot pass
         * for a run of these tests */
        const char *require = getenv("DC_REQUIRE_CUDA");
        const bool required = require && strcmp(require, "1") == 0;
        printf("test_cuda: %s: no usable CUDA device: %s\n", required ? "failed (DC_REQUIRE_CUDA=1)" : "skipped",
               dc_last_error(NULL));
        return required ? 1 : 77; /* 77: CTest's skip code */
    }
    o.backend = DC_BACKEND_CPU;
    cpu = dc_ctx_new(&o, NULL);
    printf("test_cuda: %s against %s\n", dc_ctx_device_name(gpu), dc_ctx_device_name(cpu));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_match_cpu),
        cmocka_unit_test(test_broadcast_functions_match_cpu),
        cmocka_unit_test(test_backward_is_deterministic),
        cmocka_unit_test(test_steady_state_allocates_nothing),
        cmocka_unit_test(test_training_step_never_waits),
        cmocka_unit_test(test_bad_index_reported_at_the_next_wait),
        cmocka_unit_test(test_concat_launches),
        cmocka_unit_test(test_concat_of_slices_backward),
        cmocka_unit_test(test_row_sums_in_one_launch),
        cmocka_unit_test(test_broadcast_function_gradients_in_place),
        cmocka_unit_test(test_optimizers_match_cpu),
        cmocka_unit_test(test_optimizer_batches),
        cmocka_unit_test(test_clip_norm_of_a_large_gradient),
        cmocka_unit_test(test_clip_norm_of_many_tensors),
        cmocka_unit_test(test_clip_norm_rescaled),
        cmocka_unit_test(test_clip_norm_rescaled_by_the_largest),
        cmocka_unit_test(test_copies_between_contexts),
        cmocka_unit_test(test_hmlstm_step_matches_cpu),
        cmocka_unit_test(test_host_round_trip),
        cmocka_unit_test(test_two_devices),
        cmocka_unit_test(test_device_number_checked),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dc_ctx_free(cpu);
    dc_ctx_free(gpu);
    return failed;
}
