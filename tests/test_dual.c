/* The dual-number layer of dual/: every operation of dual/dual_impl.h in
 * double against analytic derivatives written here with libm, large
 * magnitudes in float and double, the documented conventions at kinks, zero
 * tangents next to infinite local derivatives, 1 and 16 partials, and the
 * float elementary functions of dual/math_f32.h against double libm, measured
 * in float ulps.
 *
 * The table tests check every row and report every mismatch (on stderr)
 * before failing, so that one bug does not hide another. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "support/math_bitwise.h"
#include "support/test_support.h"

#include "dual/dual.h"

/* ---- failure collection and comparison ---- */

typedef struct failures {
    int count;
    char first[512];
} failures;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void failure(failures *fl, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (fl->count == 0)
        memcpy(fl->first, msg, sizeof msg);
    if (fl->count < 60)
        print_error("  %s\n", msg);
    ++fl->count;
}

/* Fails the test (at the caller's line) if any mismatch was recorded. */
#define FINISH(fl, what)                                                                                               \
    do {                                                                                                               \
        if ((fl).count > 0)                                                                                            \
            fail_msg("%s: %d mismatch(es), listed above; the first: %s", what, (fl).count, (fl).first);                \
    } while (0)

/* got agrees with want within rtol * |scale| + atol. A NaN or infinite want
 * must be matched exactly; a finite want needs a finite got. */
static int agrees(double got, double want, double scale, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    if (!isfinite(got))
        return 0;
    return fabs(got - want) <= rtol * fabs(scale) + atol;
}

/* ---- reference functions (libm, written independently of dual/) ---- */

static double two_over_sqrt_pi(void) { return 2.0 / sqrt(acos(-1.0)); }

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* sigmoid'(x) = sigmoid(x) sigmoid(-x), accurate in both tails. */
static double ref_sigmoid_dx(double x)
{
    const double e = exp(-fabs(x));
    return e / ((1.0 + e) * (1.0 + e));
}

static double ref_softplus(double x) { return x > 30.0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

/* 1 - tanh^2 = 1 / cosh^2, without the cancellation. */
static double ref_tanh_dx(double x)
{
    const double c = cosh(x);
    return 1.0 / (c * c);
}

/* Value and derivative of each unary operation at x, with parameter p where
 * the operation has one. */
static double r_neg_v(double x, double p) { (void)p; return -x; }
static double r_neg_d(double x, double p) { (void)x; (void)p; return -1.0; }
static double r_exp_v(double x, double p) { (void)p; return exp(x); }
static double r_exp_d(double x, double p) { (void)p; return exp(x); }
static double r_log_v(double x, double p) { (void)p; return log(x); }
static double r_log_d(double x, double p) { (void)p; return 1.0 / x; }
static double r_log1p_v(double x, double p) { (void)p; return log1p(x); }
static double r_log1p_d(double x, double p) { (void)p; return 1.0 / (1.0 + x); }
static double r_expm1_v(double x, double p) { (void)p; return expm1(x); }
static double r_expm1_d(double x, double p) { (void)p; return exp(x); }
static double r_sqrt_v(double x, double p) { (void)p; return sqrt(x); }
static double r_sqrt_d(double x, double p) { (void)p; return 0.5 / sqrt(x); }
static double r_sin_v(double x, double p) { (void)p; return sin(x); }
static double r_sin_d(double x, double p) { (void)p; return cos(x); }
static double r_cos_v(double x, double p) { (void)p; return cos(x); }
static double r_cos_d(double x, double p) { (void)p; return -sin(x); }
static double r_tanh_v(double x, double p) { (void)p; return tanh(x); }
static double r_tanh_d(double x, double p) { (void)p; return ref_tanh_dx(x); }
static double r_sigmoid_v(double x, double p) { (void)p; return ref_sigmoid(x); }
static double r_sigmoid_d(double x, double p) { (void)p; return ref_sigmoid_dx(x); }
static double r_softplus_v(double x, double p) { (void)p; return ref_softplus(x); }
static double r_softplus_d(double x, double p) { (void)p; return ref_sigmoid(x); }
static double r_relu_v(double x, double p) { (void)p; return x > 0.0 ? x : 0.0; }
static double r_relu_d(double x, double p) { (void)p; return x > 0.0 ? 1.0 : 0.0; }
static double r_abs_v(double x, double p) { (void)p; return fabs(x); }
static double r_abs_d(double x, double p) { (void)p; return x > 0.0 ? 1.0 : -1.0; }
static double r_erf_v(double x, double p) { (void)p; return erf(x); }
static double r_erf_d(double x, double p) { (void)p; return two_over_sqrt_pi() * exp(-x * x); }
static double r_hsig_v(double x, double p) { return fmin(1.0, fmax(0.0, (p * x + 1.0) / 2.0)); }
static double r_hsig_d(double x, double p) { return (p * x + 1.0 > 0.0 && p * x + 1.0 < 2.0) ? p / 2.0 : 0.0; }
static double r_adds_v(double x, double p) { return x + p; }
static double r_subs_v(double x, double p) { return x - p; }
static double r_ssub_v(double x, double p) { return p - x; }
static double r_one(double x, double p) { (void)x; (void)p; return 1.0; }
static double r_minus_one(double x, double p) { (void)x; (void)p; return -1.0; }
static double r_muls_v(double x, double p) { return x * p; }
static double r_muls_d(double x, double p) { (void)x; return p; }
static double r_divs_v(double x, double p) { return x / p; }
static double r_divs_d(double x, double p) { (void)x; return 1.0 / p; }
static double r_sdiv_v(double x, double p) { return p / x; }
static double r_sdiv_d(double x, double p) { return -p / (x * x); }
static double r_pows_v(double x, double p) { return pow(x, p); }
static double r_pows_d(double x, double p) { return p == 0.0 ? 0.0 : p * pow(x, p) / x; }
static double r_spow_v(double x, double p) { return pow(p, x); }
static double r_spow_d(double x, double p) { return pow(p, x) * log(p); }
static double r_mins_v(double x, double p) { return x <= p ? x : p; }
static double r_mins_d(double x, double p) { return x <= p ? 1.0 : 0.0; }
static double r_maxs_v(double x, double p) { return x >= p ? x : p; }
static double r_maxs_d(double x, double p) { return x >= p ? 1.0 : 0.0; }

static int dom_pos(double x, double p) { (void)p; return x > 0.0; }
static int dom_gt_m1(double x, double p) { (void)p; return x > -1.0; }
static int dom_pows(double x, double p) { return x > 0.0 || p == floor(p); }

/* ---- 1. every operation in double, against the analytic derivative ---- */

typedef dc_dual3d d3;
#define NPART 3

/* Points of both signs and large magnitude. */
static const double PTS[] = {-50.0, -3.7, -0.4, 0.3, 2.1, 40.0};
#define NPTS ((int)(sizeof PTS / sizeof PTS[0]))

/* The first operand varies along slots 0 and 2, the second along 1 and 2,
 * with non-unit tangents: slot 2 needs the chain rule through both. */
static const double TAN_A[NPART] = {1.25, 0.0, -0.7};
static const double TAN_B[NPART] = {0.0, -1.9, 0.45};
#define RTOL_D 1e-12

static d3 d3_make(double v, const double *t)
{
    d3 r;
    r.v = v;
    for (int k = 0; k < NPART; ++k)
        r.d[k] = t[k];
    return r;
}

typedef d3 (*unary_op)(d3 a, double p);
typedef double (*ref1)(double x, double p);
typedef int (*domain1)(double x, double p);

typedef struct unary_case {
    const char *name;
    unary_op op;
    ref1 value, deriv; /* f(x; p) and df/dx */
    domain1 domain;    /* NULL: every point */
    int nparams;       /* 0: the operation takes no parameter */
    double params[4];
} unary_case;

#define WRAP_UNARY(op)                                                                                                 \
    static d3 w_##op(d3 a, double p)                                                                                   \
    {                                                                                                                  \
        (void)p;                                                                                                       \
        return dc_dual3d_##op(a);                                                                                      \
    }
#define WRAP_PARAM(op)                                                                                                 \
    static d3 w_##op(d3 a, double p) { return dc_dual3d_##op(a, p); }

WRAP_UNARY(neg)
WRAP_UNARY(exp)
WRAP_UNARY(log)
WRAP_UNARY(log1p)
WRAP_UNARY(expm1)
WRAP_UNARY(sqrt)
WRAP_UNARY(sin)
WRAP_UNARY(cos)
WRAP_UNARY(tanh)
WRAP_UNARY(sigmoid)
WRAP_UNARY(softplus)
WRAP_UNARY(relu)
WRAP_UNARY(abs)
WRAP_UNARY(erf)
WRAP_PARAM(adds)
WRAP_PARAM(subs)
WRAP_PARAM(muls)
WRAP_PARAM(divs)
WRAP_PARAM(pows)
WRAP_PARAM(hard_sigmoid)
WRAP_PARAM(mins)
WRAP_PARAM(maxs)
static d3 w_ssub(d3 a, double p) { return dc_dual3d_ssub(p, a); }
static d3 w_sdiv(d3 a, double p) { return dc_dual3d_sdiv(p, a); }
static d3 w_spow(d3 a, double p) { return dc_dual3d_spow(p, a); }

static const unary_case UNARY_CASES[] = {
    {"neg", w_neg, r_neg_v, r_neg_d, NULL, 0, {0}},
    {"exp", w_exp, r_exp_v, r_exp_d, NULL, 0, {0}},
    {"log", w_log, r_log_v, r_log_d, dom_pos, 0, {0}},
    {"log1p", w_log1p, r_log1p_v, r_log1p_d, dom_gt_m1, 0, {0}},
    {"expm1", w_expm1, r_expm1_v, r_expm1_d, NULL, 0, {0}},
    {"sqrt", w_sqrt, r_sqrt_v, r_sqrt_d, dom_pos, 0, {0}},
    {"sin", w_sin, r_sin_v, r_sin_d, NULL, 0, {0}},
    {"cos", w_cos, r_cos_v, r_cos_d, NULL, 0, {0}},
    {"tanh", w_tanh, r_tanh_v, r_tanh_d, NULL, 0, {0}},
    {"sigmoid", w_sigmoid, r_sigmoid_v, r_sigmoid_d, NULL, 0, {0}},
    {"softplus", w_softplus, r_softplus_v, r_softplus_d, NULL, 0, {0}},
    {"relu", w_relu, r_relu_v, r_relu_d, NULL, 0, {0}},
    {"abs", w_abs, r_abs_v, r_abs_d, NULL, 0, {0}},
    {"erf", w_erf, r_erf_v, r_erf_d, NULL, 0, {0}},
    {"hard_sigmoid", w_hard_sigmoid, r_hsig_v, r_hsig_d, NULL, 3, {0.5, 2.0, -1.0}},
    {"adds", w_adds, r_adds_v, r_one, NULL, 2, {2.5, -40.0}},
    {"subs", w_subs, r_subs_v, r_one, NULL, 2, {2.5, -40.0}},
    {"ssub", w_ssub, r_ssub_v, r_minus_one, NULL, 2, {2.5, -40.0}},
    {"muls", w_muls, r_muls_v, r_muls_d, NULL, 3, {-3.0, 0.125, 0.0}},
    {"divs", w_divs, r_divs_v, r_divs_d, NULL, 2, {-3.0, 0.125}},
    {"sdiv", w_sdiv, r_sdiv_v, r_sdiv_d, NULL, 2, {-3.0, 0.125}},
    {"pows", w_pows, r_pows_v, r_pows_d, dom_pows, 4, {2.0, 3.0, -1.0, 0.5}},
    {"pows", w_pows, r_pows_v, r_pows_d, dom_pows, 2, {-2.5, 0.0}},
    {"spow", w_spow, r_spow_v, r_spow_d, NULL, 3, {2.0, 0.5, 10.0}},
    {"mins", w_mins, r_mins_v, r_mins_d, NULL, 2, {0.3, -1.0}},
    {"maxs", w_maxs, r_maxs_v, r_maxs_d, NULL, 2, {0.3, -1.0}},
};

/* Value and partials of got against want_v and want_d[k] (each within
 * RTOL_D of scale_d[k], the sum of the magnitudes of its terms). */
static void check_d3(failures *fl, const char *name, const char *where, d3 got, double want_v, const double *want_d,
                     const double *scale_d)
{
    if (!agrees(got.v, want_v, want_v, RTOL_D, 0.0))
        failure(fl, "%s(%s): value %.17g, want %.17g", name, where, got.v, want_v);
    for (int k = 0; k < NPART; ++k)
        if (!agrees(got.d[k], want_d[k], scale_d[k], RTOL_D, 0.0))
            failure(fl, "%s(%s): partial %d = %.17g, want %.17g", name, where, k, got.d[k], want_d[k]);
}

static void test_unary_ops_f64(void **state)
{
    (void)state;
    failures fl = {0};
    int checked = 0;
    for (size_t c = 0; c < sizeof UNARY_CASES / sizeof UNARY_CASES[0]; ++c) {
        const unary_case *u = &UNARY_CASES[c];
        const int np = u->nparams > 0 ? u->nparams : 1;
        for (int ip = 0; ip < np; ++ip) {
            const double p = u->params[ip];
            for (int i = 0; i < NPTS; ++i) {
                const double x = PTS[i];
                if (u->domain && !u->domain(x, p))
                    continue;
                char where[96];
                if (u->nparams > 0)
                    snprintf(where, sizeof where, "x=%g, p=%g", x, p);
                else
                    snprintf(where, sizeof where, "x=%g", x);
                const d3 got = u->op(d3_make(x, TAN_A), p);
                const double fv = u->value(x, p), fd = u->deriv(x, p);
                double want_d[NPART], scale_d[NPART];
                for (int k = 0; k < NPART; ++k)
                    want_d[k] = scale_d[k] = fd * TAN_A[k];
                check_d3(&fl, u->name, where, got, fv, want_d, scale_d);
                ++checked;
            }
        }
    }
    assert_true(checked > 100);
    FINISH(fl, "unary dual operations (double)");
}

typedef d3 (*binary_op)(d3 a, d3 b);
typedef double (*ref2)(double x, double y);

typedef struct binary_case {
    const char *name;
    binary_op op;
    ref2 value, dx, dy;
    int positive_x; /* only points with x > 0 */
} binary_case;

static d3 w_add(d3 a, d3 b) { return dc_dual3d_add(a, b); }
static d3 w_sub(d3 a, d3 b) { return dc_dual3d_sub(a, b); }
static d3 w_mul(d3 a, d3 b) { return dc_dual3d_mul(a, b); }
static d3 w_div(d3 a, d3 b) { return dc_dual3d_div(a, b); }
static d3 w_pow(d3 a, d3 b) { return dc_dual3d_pow(a, b); }
static d3 w_min(d3 a, d3 b) { return dc_dual3d_min(a, b); }
static d3 w_max(d3 a, d3 b) { return dc_dual3d_max(a, b); }

static double b_add_v(double x, double y) { return x + y; }
static double b_sub_v(double x, double y) { return x - y; }
static double b_one(double x, double y) { (void)x; (void)y; return 1.0; }
static double b_minus_one(double x, double y) { (void)x; (void)y; return -1.0; }
static double b_mul_v(double x, double y) { return x * y; }
static double b_mul_dx(double x, double y) { (void)x; return y; }
static double b_mul_dy(double x, double y) { (void)y; return x; }
static double b_div_v(double x, double y) { return x / y; }
static double b_div_dx(double x, double y) { (void)x; return 1.0 / y; }
static double b_div_dy(double x, double y) { return -x / (y * y); }
static double b_pow_v(double x, double y) { return pow(x, y); }
static double b_pow_dx(double x, double y) { return y * pow(x, y) / x; }
static double b_pow_dy(double x, double y) { return pow(x, y) * log(x); }
/* min and max: a tie takes the first operand. */
static double b_min_v(double x, double y) { return x <= y ? x : y; }
static double b_min_dx(double x, double y) { return x <= y ? 1.0 : 0.0; }
static double b_min_dy(double x, double y) { return x <= y ? 0.0 : 1.0; }
static double b_max_v(double x, double y) { return x >= y ? x : y; }
static double b_max_dx(double x, double y) { return x >= y ? 1.0 : 0.0; }
static double b_max_dy(double x, double y) { return x >= y ? 0.0 : 1.0; }

static const binary_case BINARY_CASES[] = {
    {"add", w_add, b_add_v, b_one, b_one, 0},
    {"sub", w_sub, b_sub_v, b_one, b_minus_one, 0},
    {"mul", w_mul, b_mul_v, b_mul_dx, b_mul_dy, 0},
    {"div", w_div, b_div_v, b_div_dx, b_div_dy, 0},
    {"pow", w_pow, b_pow_v, b_pow_dx, b_pow_dy, 1},
    {"min", w_min, b_min_v, b_min_dx, b_min_dy, 0},
    {"max", w_max, b_max_v, b_max_dx, b_max_dy, 0},
};

static void test_binary_ops_f64(void **state)
{
    (void)state;
    failures fl = {0};
    int checked = 0;
    for (size_t c = 0; c < sizeof BINARY_CASES / sizeof BINARY_CASES[0]; ++c) {
        const binary_case *bc = &BINARY_CASES[c];
        for (int i = 0; i < NPTS; ++i) {
            for (int j = 0; j < NPTS; ++j) {
                const double x = PTS[i], y = PTS[j];
                if (bc->positive_x && !(x > 0.0))
                    continue;
                char where[96];
                snprintf(where, sizeof where, "x=%g, y=%g", x, y);
                const d3 got = bc->op(d3_make(x, TAN_A), d3_make(y, TAN_B));
                const double fx = bc->dx(x, y), fy = bc->dy(x, y);
                double want_d[NPART], scale_d[NPART];
                for (int k = 0; k < NPART; ++k) {
                    want_d[k] = fx * TAN_A[k] + fy * TAN_B[k];
                    scale_d[k] = fabs(fx * TAN_A[k]) + fabs(fy * TAN_B[k]);
                }
                check_d3(&fl, bc->name, where, got, bc->value(x, y), want_d, scale_d);
                ++checked;
            }
        }
    }
    assert_true(checked > 200);
    FINISH(fl, "binary dual operations (double)");
}

/* const, seed and val, in float and double. */
static void test_const_seed(void **state)
{
    (void)state;
    const d3 c = dc_dual3d_const(2.5);
    if (c.v != 2.5 || dc_dual3d_val(c) != 2.5)
        fail_msg("dc_dual3d_const(2.5): value %g", c.v);
    for (int k = 0; k < NPART; ++k)
        if (c.d[k] != 0.0)
            fail_msg("dc_dual3d_const(2.5): partial %d = %g, want 0", k, c.d[k]);
    const dc_dual3f cf = dc_dual3f_const(-0.75f);
    if (cf.v != -0.75f || dc_dual3f_val(cf) != -0.75f)
        fail_msg("dc_dual3f_const(-0.75): value %g", (double)cf.v);
    for (int k = 0; k < NPART; ++k)
        if (cf.d[k] != 0.0f)
            fail_msg("dc_dual3f_const(-0.75): partial %d = %g, want 0", k, (double)cf.d[k]);
    for (int s = 0; s < NPART; ++s) {
        const d3 x = dc_dual3d_seed(-1.25, s);
        const dc_dual3f xf = dc_dual3f_seed(-1.25f, s);
        if (x.v != -1.25 || xf.v != -1.25f)
            fail_msg("seed(-1.25, %d): value %g (double), %g (float)", s, x.v, (double)xf.v);
        for (int k = 0; k < NPART; ++k) {
            const double want = k == s ? 1.0 : 0.0;
            if (x.d[k] != want || xf.d[k] != (float)want)
                fail_msg("seed(-1.25, %d): partial %d = %g (double), %g (float), want %g", s, k, x.d[k],
                         (double)xf.d[k], want);
        }
    }
}

/* A composite of many operations: the chain rule through nested calls.
 * f(x, y) = sigmoid(x y) log(x) - y^3 / x + exp(sin(x) - y). */
static void test_composite_f64(void **state)
{
    (void)state;
    const double x = 1.7, y = -0.6;
    const d3 a = d3_make(x, TAN_A), b = d3_make(y, TAN_B);
    const d3 s = dc_dual3d_sigmoid(dc_dual3d_mul(a, b));
    const d3 t1 = dc_dual3d_mul(s, dc_dual3d_log(a));
    const d3 t2 = dc_dual3d_div(dc_dual3d_pows(b, 3.0), a);
    const d3 t3 = dc_dual3d_exp(dc_dual3d_sub(dc_dual3d_sin(a), b));
    const d3 f = dc_dual3d_add(dc_dual3d_sub(t1, t2), t3);

    const double sv = ref_sigmoid(x * y), ds = sv * (1.0 - sv), e = exp(sin(x) - y);
    const double want_v = sv * log(x) - y * y * y / x + e;
    const double fx = ds * y * log(x) + sv / x + y * y * y / (x * x) + e * cos(x);
    const double fy = ds * x * log(x) - 3.0 * y * y / x - e;
    double want_d[NPART], scale_d[NPART];
    for (int k = 0; k < NPART; ++k) {
        want_d[k] = fx * TAN_A[k] + fy * TAN_B[k];
        scale_d[k] = fabs(fx * TAN_A[k]) + fabs(fy * TAN_B[k]) + 1.0; /* the terms of fx, fy are O(1) */
    }
    failures fl = {0};
    check_d3(&fl, "composite", "x=1.7, y=-0.6", f, want_v, want_d, scale_d);
    FINISH(fl, "composite");
}

/* ---- operations on 2-partial duals in float and double, through doubles ---- */

typedef enum op_id {
    OP_EXP,
    OP_EXPM1,
    OP_TANH,
    OP_SIGMOID,
    OP_SOFTPLUS,
    OP_ERF,
    OP_RELU,
    OP_ABS,
    OP_HARD_SIGMOID,
    OP_MIN,
    OP_MAX,
    OP_MINS,
    OP_MAXS,
} op_id;

static const char *const OP_NAMES[] = {
    [OP_EXP] = "exp",   [OP_EXPM1] = "expm1", [OP_TANH] = "tanh", [OP_SIGMOID] = "sigmoid", [OP_SOFTPLUS] = "softplus",
    [OP_ERF] = "erf",   [OP_RELU] = "relu",   [OP_ABS] = "abs",   [OP_HARD_SIGMOID] = "hard_sigmoid",
    [OP_MIN] = "min",   [OP_MAX] = "max",     [OP_MINS] = "mins", [OP_MAXS] = "maxs",
};

typedef struct gdual {
    double v;
    double d[2];
} gdual;

/* apply_f64 / apply_f32: op on a and b (or a and the scalar p), in the
 * dc_dual2d / dc_dual2f type. */
#define DEFINE_APPLY(fname, T, S)                                                                                      \
    static gdual fname(op_id op, gdual ga, gdual gb, double p)                                                         \
    {                                                                                                                  \
        T a, b, r;                                                                                                     \
        a.v = (S)ga.v;                                                                                                 \
        b.v = (S)gb.v;                                                                                                 \
        for (int k = 0; k < 2; ++k) {                                                                                  \
            a.d[k] = (S)ga.d[k];                                                                                       \
            b.d[k] = (S)gb.d[k];                                                                                       \
        }                                                                                                              \
        switch (op) {                                                                                                  \
        case OP_EXP: r = T##_exp(a); break;                                                                            \
        case OP_EXPM1: r = T##_expm1(a); break;                                                                        \
        case OP_TANH: r = T##_tanh(a); break;                                                                          \
        case OP_SIGMOID: r = T##_sigmoid(a); break;                                                                    \
        case OP_SOFTPLUS: r = T##_softplus(a); break;                                                                  \
        case OP_ERF: r = T##_erf(a); break;                                                                            \
        case OP_RELU: r = T##_relu(a); break;                                                                          \
        case OP_ABS: r = T##_abs(a); break;                                                                            \
        case OP_HARD_SIGMOID: r = T##_hard_sigmoid(a, (S)p); break;                                                    \
        case OP_MIN: r = T##_min(a, b); break;                                                                         \
        case OP_MAX: r = T##_max(a, b); break;                                                                         \
        case OP_MINS: r = T##_mins(a, (S)p); break;                                                                    \
        case OP_MAXS: r = T##_maxs(a, (S)p); break;                                                                    \
        default: r = T##_const((S)NAN); break;                                                                         \
        }                                                                                                              \
        gdual g;                                                                                                       \
        g.v = r.v;                                                                                                     \
        for (int k = 0; k < 2; ++k)                                                                                    \
            g.d[k] = r.d[k];                                                                                           \
        return g;                                                                                                      \
    }

DEFINE_APPLY(apply_f64, dc_dual2d, double)
DEFINE_APPLY(apply_f32, dc_dual2f, float)

static const double TAN2_A[2] = {1.5, 0.25};
static const double TAN2_B[2] = {-0.5, -2.0};

static gdual gmake(double v, const double *t)
{
    gdual g;
    g.v = v;
    g.d[0] = t[0];
    g.d[1] = t[1];
    return g;
}

/* ---- 2. large magnitudes, float and double ---- */

typedef struct big_case {
    op_id op;
    double x;
} big_case;

static const big_case BIG_CASES[] = {
    {OP_SIGMOID, -100.0}, {OP_SIGMOID, 100.0}, {OP_SIGMOID, -20.0}, {OP_SIGMOID, 20.0},  {OP_TANH, 50.0},
    {OP_TANH, -50.0},     {OP_TANH, 10.0},     {OP_TANH, -10.0},    {OP_SOFTPLUS, 100.0}, {OP_SOFTPLUS, -100.0},
    {OP_SOFTPLUS, 20.0},  {OP_SOFTPLUS, -20.0}, {OP_EXP, -200.0},   {OP_EXP, -100.0},    {OP_ERF, 10.0},
    {OP_ERF, -10.0},      {OP_EXPM1, -100.0},  {OP_EXPM1, -20.0},
};

static void big_reference(op_id op, double x, double *v, double *d)
{
    switch (op) {
    case OP_SIGMOID: *v = ref_sigmoid(x); *d = ref_sigmoid_dx(x); break;
    case OP_TANH: *v = tanh(x); *d = ref_tanh_dx(x); break;
    case OP_SOFTPLUS: *v = ref_softplus(x); *d = ref_sigmoid(x); break;
    case OP_EXP: *v = exp(x); *d = exp(x); break;
    case OP_EXPM1: *v = expm1(x); *d = exp(x); break;
    case OP_ERF: *v = erf(x); *d = two_over_sqrt_pi() * exp(-x * x); break;
    default: *v = *d = NAN; break;
    }
}

/* Value and partials finite and right: relative 1e-12 in double; in float
 * relative 1e-6, where anything below FLT_MIN counts as zero (a float
 * partial of 3.7e-44 may come out 0 or a coarse subnormal). */
static void test_large_magnitude(void **state)
{
    (void)state;
    failures fl = {0};
    for (size_t c = 0; c < sizeof BIG_CASES / sizeof BIG_CASES[0]; ++c) {
        const big_case *bc = &BIG_CASES[c];
        double v, d;
        big_reference(bc->op, bc->x, &v, &d);
        for (int prec = 0; prec < 2; ++prec) {
            const gdual a = gmake(bc->x, TAN2_A);
            const gdual r = prec == 0 ? apply_f64(bc->op, a, a, 0.0) : apply_f32(bc->op, a, a, 0.0);
            const double rtol = prec == 0 ? 1e-12 : 1e-6, atol = prec == 0 ? 0.0 : (double)FLT_MIN;
            const char *type = prec == 0 ? "double" : "float";
            if (!agrees(r.v, v, v, rtol, atol))
                failure(&fl, "%s(%g) in %s: value %.17g, want %.17g", OP_NAMES[bc->op], bc->x, type, r.v, v);
            for (int k = 0; k < 2; ++k) {
                const double want = d * TAN2_A[k];
                if (!agrees(r.d[k], want, want, rtol, atol))
                    failure(&fl, "%s(%g) in %s: partial %d = %.17g, want %.17g", OP_NAMES[bc->op], bc->x, type, k,
                            r.d[k], want);
            }
        }
    }
    FINISH(fl, "large magnitudes");
}

/* ---- 4. kinks, ties and NaN ---- */

typedef struct kink_case {
    op_id op;
    double x, y;            /* y: the second operand, or the scalar (slope, s) */
    double want_v;          /* NAN: want a NaN value, partials unchecked */
    double want_da, want_db; /* partials = want_da * a.d + want_db * b.d */
} kink_case;

static const kink_case KINK_CASES[] = {
    /* relu'(0) = 0 and abs'(0) = 0 */
    {OP_RELU, 0.0, 0, 0.0, 0.0, 0},
    {OP_RELU, -0.0, 0, 0.0, 0.0, 0},
    {OP_RELU, -1.0, 0, 0.0, 0.0, 0},
    {OP_RELU, 0.5, 0, 0.5, 1.0, 0},
    {OP_ABS, 0.0, 0, 0.0, 0.0, 0},
    {OP_ABS, -0.0, 0, 0.0, 0.0, 0},
    {OP_ABS, -2.0, 0, 2.0, -1.0, 0},
    {OP_ABS, 3.0, 0, 3.0, 1.0, 0},
    /* hard_sigmoid: slope/2 strictly inside the linear region, 0 at its ends
     * and outside */
    {OP_HARD_SIGMOID, -2.0, 0.5, 0.0, 0.0, 0},
    {OP_HARD_SIGMOID, 2.0, 0.5, 1.0, 0.0, 0},
    {OP_HARD_SIGMOID, -1.5, 0.5, 0.125, 0.25, 0},
    {OP_HARD_SIGMOID, 0.0, 0.5, 0.5, 0.25, 0},
    {OP_HARD_SIGMOID, 1.5, 0.5, 0.875, 0.25, 0},
    {OP_HARD_SIGMOID, 2.5, 0.5, 1.0, 0.0, 0},
    {OP_HARD_SIGMOID, -40.0, 0.5, 0.0, 0.0, 0},
    {OP_HARD_SIGMOID, 1.0, -0.5, 0.25, -0.25, 0},
    {OP_HARD_SIGMOID, 2.0, -0.5, 0.0, 0.0, 0},
    {OP_HARD_SIGMOID, -2.0, -0.5, 1.0, 0.0, 0},
    {OP_HARD_SIGMOID, 3.875, 0.25, 0.984375, 0.125, 0},
    {OP_HARD_SIGMOID, 4.0, 0.25, 1.0, 0.0, 0},
    /* min and max: a tie takes the first operand, value and partials */
    {OP_MIN, 1.5, 1.5, 1.5, 1.0, 0.0},
    {OP_MAX, 1.5, 1.5, 1.5, 1.0, 0.0},
    {OP_MIN, 1.0, 2.0, 1.0, 1.0, 0.0},
    {OP_MIN, 2.0, 1.0, 1.0, 0.0, 1.0},
    {OP_MAX, 1.0, 2.0, 2.0, 0.0, 1.0},
    {OP_MAX, 2.0, 1.0, 2.0, 1.0, 0.0},
    {OP_MINS, 1.5, 1.5, 1.5, 1.0, 0.0},
    {OP_MAXS, 1.5, 1.5, 1.5, 1.0, 0.0},
    {OP_MINS, 1.0, 2.0, 1.0, 1.0, 0.0},
    {OP_MINS, 3.0, 2.0, 2.0, 0.0, 0.0},
    {OP_MAXS, 3.0, 2.0, 3.0, 1.0, 0.0},
    {OP_MAXS, 1.0, 2.0, 2.0, 0.0, 0.0},
    /* a NaN in either operand is propagated */
    {OP_MIN, NAN, 1.0, NAN, 0, 0},
    {OP_MIN, 1.0, NAN, NAN, 0, 0},
    {OP_MAX, NAN, 1.0, NAN, 0, 0},
    {OP_MAX, 1.0, NAN, NAN, 0, 0},
    {OP_MINS, NAN, 1.0, NAN, 0, 0},
    {OP_MINS, 1.0, NAN, NAN, 0, 0},
    {OP_MAXS, NAN, 1.0, NAN, 0, 0},
    {OP_MAXS, 1.0, NAN, NAN, 0, 0},
};

static void test_kinks(void **state)
{
    (void)state;
    failures fl = {0};
    for (size_t c = 0; c < sizeof KINK_CASES / sizeof KINK_CASES[0]; ++c) {
        const kink_case *kc = &KINK_CASES[c];
        for (int prec = 0; prec < 2; ++prec) {
            const gdual a = gmake(kc->x, TAN2_A), b = gmake(kc->y, TAN2_B);
            const gdual r = prec == 0 ? apply_f64(kc->op, a, b, kc->y) : apply_f32(kc->op, a, b, kc->y);
            const char *type = prec == 0 ? "double" : "float";
            if (!agrees(r.v, kc->want_v, kc->want_v, 1e-15, 0.0))
                failure(&fl, "%s(%g, %g) in %s: value %.17g, want %.17g", OP_NAMES[kc->op], kc->x, kc->y, type, r.v,
                        kc->want_v);
            if (isnan(kc->want_v))
                continue;
            for (int k = 0; k < 2; ++k) {
                const double want = kc->want_da * TAN2_A[k] + kc->want_db * TAN2_B[k];
                if (!agrees(r.d[k], want, want, 1e-15, 0.0))
                    failure(&fl, "%s(%g, %g) in %s: partial %d = %.17g, want %.17g", OP_NAMES[kc->op], kc->x, kc->y,
                            type, k, r.d[k], want);
            }
        }
    }
    /* The scalar min and max the reverse mode uses follow the same rules. */
    if (!isnan(dc_min_f64(NAN, 1.0)) || !isnan(dc_min_f64(1.0, NAN)) || !isnan(dc_max_f64(NAN, 1.0)) ||
        !isnan(dc_max_f64(1.0, NAN)))
        failure(&fl, "dc_min_f64/dc_max_f64 drop a NaN");
    if (!isnan(dc_min_f32(NAN, 1.0f)) || !isnan(dc_min_f32(1.0f, NAN)) || !isnan(dc_max_f32(NAN, 1.0f)) ||
        !isnan(dc_max_f32(1.0f, NAN)))
        failure(&fl, "dc_min_f32/dc_max_f32 drop a NaN");
    if (!dc_min_takes_first_f64(2.0, 2.0) || !dc_max_takes_first_f64(2.0, 2.0) || !dc_min_takes_first_f32(2.0f, 2.0f) ||
        !dc_max_takes_first_f32(2.0f, 2.0f))
        failure(&fl, "min/max_takes_first: a tie does not take the first argument");
    if (!signbit(dc_min_f64(-0.0, 0.0)) || signbit(dc_min_f64(0.0, -0.0)) || !signbit(dc_max_f32(-0.0f, 0.0f)))
        failure(&fl, "dc_min/dc_max on the tie -0 == +0 do not return the first argument");
    FINISH(fl, "kinks");
}

/* ---- 5. adjoint times partial ---- */

static void test_adj_mul(void **state)
{
    (void)state;
    const double cases[][3] = {
        {0.0, INFINITY, 0.0}, {0.0, -INFINITY, 0.0}, {0.0, NAN, 0.0},          {-0.0, INFINITY, 0.0},
        {2.0, 3.0, 6.0},      {-1.5, 4.0, -6.0},     {1.0, INFINITY, INFINITY}, {1.0, NAN, NAN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const double adj = cases[i][0], partial = cases[i][1], want = cases[i][2];
        const double gd = dc_adj_mul_f64(adj, partial);
        const float gf = dc_adj_mul_f32((float)adj, (float)partial);
        if (!agrees(gd, want, 0.0, 0.0, 0.0))
            fail_msg("dc_adj_mul_f64(%g, %g) = %g, want %g", adj, partial, gd, want);
        if (!agrees(gf, want, 0.0, 0.0, 0.0))
            fail_msg("dc_adj_mul_f32(%g, %g) = %g, want %g", adj, partial, (double)gf, want);
    }
}

/* ---- zero tangents stay zero next to an infinite local derivative ---- */

/* At x = 0, sqrt and x^0.5 have a finite value and an infinite derivative
 * (log an infinite one); exp overflows with its derivative.
 * A partial whose tangent is zero (the value does not depend on that input)
 * must stay 0, not become inf * 0 = NaN; the same for the exponent's partial
 * of 0^b (0 for b > 0, as dual_impl.h documents for pow) and for the base's
 * partial of (-3)^b at b = 2, which is defined (b (-3)^(b-1) = -6). */
/* A negative base to a non-integer exponent has no real power: the value
 * and the base's partial are NaN, also where the exponent is so close to an
 * integer that exponent - 1 rounds to one (1e-17 in double, 1e-8 in float:
 * the partial had come out -5e-18 and -5e-9), in pows, pow and dc_op_pow. */
static void test_pow_of_negative_base(void **state)
{
    (void)state;
    const double pd[3] = {1e-17, 0.5, 2.0 + 1e-15};
    for (int i = 0; i < 3; ++i) {
        const d3 s = dc_dual3d_pows(dc_dual3d_seed(-2.0, 0), pd[i]);
        const d3 t = dc_dual3d_pow(dc_dual3d_seed(-2.0, 0), dc_dual3d_seed(pd[i], 1));
        if (!isnan(s.v) || !isnan(s.d[0]) || !isnan(t.v) || !isnan(t.d[0]))
            fail_msg("(-2)^%g in double: pows %g, partial %g; pow %g, partial %g (want NaN)", pd[i], s.v, s.d[0], t.v,
                     t.d[0]);
    }
    const dc_dual3f sf = dc_dual3f_pows(dc_dual3f_seed(-2.0f, 0), 1e-8f);
    if (!isnan(sf.v) || !isnan(sf.d[0]))
        fail_msg("(-2)^1e-8 in float: %g, partial %g (want NaN)", (double)sf.v, (double)sf.d[0]);
    /* an integer exponent keeps its derivative: (-2)^3, 3 (-2)^2 */
    const d3 c = dc_dual3d_pows(dc_dual3d_seed(-2.0, 0), 3.0);
    assert_true(c.v == -8.0 && c.d[0] == 12.0);
    /* the op */
    dc_ctx *ctx = test_cpu_ctx();
    for (int dt = 0; dt < 2; ++dt) {
        const dc_dtype dtype = dt ? DC_F32 : DC_F64;
        const int64_t two = 2;
        const double av[2] = {-2.0, -2.0}, bv[2] = {dt ? 1e-8 : 1e-17, 3.0};
        dc_tensor *a = test_tensor(ctx, dtype, 1, &two, av), *b = test_tensor(ctx, dtype, 1, &two, bv);
        TEST_OK(ctx, dc_tensor_set_requires_grad(a, true));
        dc_tape *tape = dc_tape_new(ctx);
        TEST_OK(ctx, dc_backward(tape, dc_op_sum(tape, dc_op_pow(tape, a, b), 0, NULL, false)));
        double g[2];
        TEST_OK(ctx, dc_tensor_get(dc_tensor_grad(a), 0, &g[0]));
        TEST_OK(ctx, dc_tensor_get(dc_tensor_grad(a), 1, &g[1]));
        if (!isnan(g[0]) || g[1] != 12.0)
            fail_msg("dc_op_pow %s: d/da of (-2)^%g is %g (want NaN), of (-2)^3 %g (want 12)", dc_dtype_name(dtype),
                     bv[0], g[0], g[1]);
        dc_tape_free(tape);
        dc_tensor_free(a);
        dc_tensor_free(b);
    }
    dc_ctx_free(ctx);
}

static void test_zero_tangent(void **state)
{
    (void)state;
    failures fl = {0};
    const d3 z0 = dc_dual3d_seed(0.0, 0);
    const struct {
        const char *what;
        d3 r;
        double want_v;
        double want_d[NPART];
        int check[NPART];
    } cases[] = {
        {"sqrt(x = 0 seeded in slot 0)", dc_dual3d_sqrt(z0), 0.0, {INFINITY, 0.0, 0.0}, {1, 1, 1}},
        {"log(x = 0 seeded in slot 0)", dc_dual3d_log(z0), -INFINITY, {INFINITY, 0.0, 0.0}, {1, 1, 1}},
        {"pows(x = 0 seeded in slot 0, 0.5)", dc_dual3d_pows(z0, 0.5), 0.0, {INFINITY, 0.0, 0.0}, {1, 1, 1}},
        {"pow(a = 0 in slot 0, b = 0.5 in slot 1)", dc_dual3d_pow(z0, dc_dual3d_seed(0.5, 1)), 0.0,
         {INFINITY, 0.0, 0.0}, {1, 1, 1}},
        {"spow(0, b = 2 in slot 0)", dc_dual3d_spow(0.0, dc_dual3d_seed(2.0, 0)), 0.0, {0.0, 0.0, 0.0}, {1, 1, 1}},
        {"pow(a = -3 in slot 0, b = 2 in slot 1)", dc_dual3d_pow(dc_dual3d_seed(-3.0, 0), dc_dual3d_seed(2.0, 1)),
         9.0, {-6.0, 0.0, 0.0}, {1, 0, 1}},
        {"pow(a = -3 in slot 0, b = const 3)", dc_dual3d_pow(dc_dual3d_seed(-3.0, 0), dc_dual3d_const(3.0)), -27.0,
         {27.0, 0.0, 0.0}, {1, 1, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        if (!agrees(cases[i].r.v, cases[i].want_v, cases[i].want_v, 1e-15, 0.0))
            failure(&fl, "%s: value %.17g, want %.17g", cases[i].what, cases[i].r.v, cases[i].want_v);
        for (int k = 0; k < NPART; ++k)
            if (cases[i].check[k] && !agrees(cases[i].r.d[k], cases[i].want_d[k], cases[i].want_d[k], 1e-15, 0.0))
                failure(&fl, "%s: partial %d = %.17g, want %.17g", cases[i].what, k, cases[i].r.d[k],
                        cases[i].want_d[k]);
    }
    /* exp and expm1 overflow with their derivative: x = 1000 + 0 * w, the
     * zero known only at run time, keeps w's partial at 0 */
    volatile double runtime_zero = 0.0;
    const d3 big = dc_dual3d_add(dc_dual3d_seed(1000.0, 0), dc_dual3d_muls(dc_dual3d_seed(1.0, 1), runtime_zero));
    const struct {
        const char *what;
        d3 r;
    } overflowing[] = {{"exp(1000 + 0 * w)", dc_dual3d_exp(big)}, {"expm1(1000 + 0 * w)", dc_dual3d_expm1(big)}};
    for (size_t i = 0; i < sizeof overflowing / sizeof overflowing[0]; ++i) {
        const d3 r = overflowing[i].r;
        if (!(r.v == INFINITY && r.d[0] == INFINITY && r.d[1] == 0.0 && r.d[2] == 0.0))
            failure(&fl, "%s: value %g, partials %g %g %g; want inf, inf 0 0", overflowing[i].what, r.v, r.d[0], r.d[1],
                    r.d[2]);
    }
    FINISH(fl, "zero tangents");
}

/* ---- 6. one and sixteen partials ---- */

static void test_one_and_sixteen_partials(void **state)
{
    (void)state;
    /* N = 1: sin(x) * x, d = cos(x) x + sin(x). */
    {
        const double x = 0.8125;
        const dc_dual1d a = dc_dual1d_seed(x, 0);
        const dc_dual1d r = dc_dual1d_mul(dc_dual1d_sin(a), a);
        const dc_dual1f af = dc_dual1f_seed((float)x, 0);
        const dc_dual1f rf = dc_dual1f_mul(dc_dual1f_sin(af), af);
        const double want_v = sin(x) * x, want_d = cos(x) * x + sin(x);
        if (!agrees(r.v, want_v, want_v, 1e-15, 0.0) || !agrees(r.d[0], want_d, want_d, 1e-15, 0.0))
            fail_msg("dc_dual1d sin(x)*x at %g: %.17g, %.17g; want %.17g, %.17g", x, r.v, r.d[0], want_v, want_d);
        if (!agrees(rf.v, want_v, want_v, 1e-6, 0.0) || !agrees(rf.d[0], want_d, want_d, 1e-6, 0.0))
            fail_msg("dc_dual1f sin(x)*x at %g: %.9g, %.9g; want %.9g, %.9g", x, (double)rf.v, (double)rf.d[0], want_v,
                     want_d);
    }
    /* N = 16: the product of 16 inputs, each seeded in its own slot; partial
     * k is the product of the others. Then exp of their sum: every partial is
     * the value. */
    double v[16], prod = 1.0, sum = 0.0;
    for (int k = 0; k < 16; ++k) {
        v[k] = (k % 2 ? -1.0 : 1.0) * (0.75 + 0.0625 * k);
        prod *= v[k];
        sum += v[k];
    }
    dc_dual16d p = dc_dual16d_seed(v[0], 0), s = dc_dual16d_seed(v[0], 0);
    dc_dual16f pf = dc_dual16f_seed((float)v[0], 0), sf = dc_dual16f_seed((float)v[0], 0);
    for (int k = 1; k < 16; ++k) {
        p = dc_dual16d_mul(p, dc_dual16d_seed(v[k], k));
        s = dc_dual16d_add(s, dc_dual16d_seed(v[k], k));
        pf = dc_dual16f_mul(pf, dc_dual16f_seed((float)v[k], k));
        sf = dc_dual16f_add(sf, dc_dual16f_seed((float)v[k], k));
    }
    const dc_dual16d e = dc_dual16d_exp(s);
    const dc_dual16f ef = dc_dual16f_exp(sf);
    if (!agrees(p.v, prod, prod, 1e-14, 0.0) || !agrees(pf.v, prod, prod, 4e-6, 0.0))
        fail_msg("16 partials: product %.17g (double), %.9g (float), want %.17g", p.v, (double)pf.v, prod);
    for (int k = 0; k < 16; ++k) {
        double others = 1.0;
        for (int j = 0; j < 16; ++j)
            if (j != k)
                others *= v[j];
        if (!agrees(p.d[k], others, others, 1e-14, 0.0) || !agrees(pf.d[k], others, others, 4e-6, 0.0))
            fail_msg("16 partials, product: partial %d = %.17g (double), %.9g (float), want %.17g", k, p.d[k],
                     (double)pf.d[k], others);
        if (!agrees(e.d[k], exp(sum), exp(sum), 1e-14, 0.0) || !agrees(ef.d[k], exp(sum), exp(sum), 4e-6, 0.0))
            fail_msg("16 partials, exp of the sum: partial %d = %.17g (double), %.9g (float), want %.17g", k, e.d[k],
                     (double)ef.d[k], exp(sum));
    }
}

/* ---- 3. float elementary functions against double libm, in ulps ---- */

/* The unit in the last place of the float f (2^-149 below FLT_MIN). */
static double float_ulp(float f)
{
    const float a = fabsf(f);
    if (a < FLT_MIN)
        return 0x1p-149;
    int e;
    frexpf(a, &e);
    return ldexp(1.0, e - 24);
}

/* |got - ref| in ulps of the float nearest to ref: 0 when both are NaN or the
 * same infinity, infinity for any other mismatch of NaN or infinity. */
static double ulp_error(float got, double ref)
{
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got) ? 0.0 : (double)INFINITY;
    /* FLT_MAX plus half an ulp and beyond round to infinity. */
    const float rf = fabs(ref) >= 0x1.ffffffp127 ? (float)copysign(INFINITY, ref) : (float)ref;
    if (isinf(rf) || isinf(got))
        return got == rf ? 0.0 : (double)INFINITY;
    return fabs((double)got - ref) / float_ulp(rf);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

/* Floats ordered as integers: consecutive floats have consecutive keys. */
static int64_t float_key(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i >= 0 ? (int64_t)i : -(int64_t)(i & 0x7fffffff);
}

static float key_float(int64_t k)
{
    const int32_t i = k >= 0 ? (int32_t)k : (int32_t)((uint32_t)(-k) | 0x80000000u);
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

static float s_exp(float x) { return dc_exp_f32(x); }
/* exp_nonpos of -x, so that a sweep over positive x covers its domain */
static float s_exp_nonpos_neg(float x) { return dc_exp_nonpos_f32(-x); }
static double ref_exp_neg(double x) { return exp(-x); }
static float s_exp_nonpos(float x) { return dc_exp_nonpos_f32(x); }
static float s_log(float x) { return dc_log_f32(x); }
static float s_expm1(float x) { return dc_expm1_f32(x); }
static float s_log1p(float x) { return dc_log1p_f32(x); }
static float s_tanh(float x) { return dc_tanh_f32(x); }
static float s_erf(float x) { return dc_erf_f32(x); }
static float s_sin(float x) { return dc_sin_f32(x); }
static float s_cos(float x) { return dc_cos_f32(x); }
static float s_sigmoid(float x) { return dc_sigmoid_f32(x); }
static float s_softplus(float x) { return dc_softplus_f32(x); }

typedef enum sweep_kind {
    SW_LINEAR, /* x in [lo, hi] */
    SW_LOG,    /* x in [lo, hi], lo > 0, uniform in log(x) */
    SW_LOG_PM, /* |x| in [lo, hi], uniform in log|x|, both signs */
} sweep_kind;

typedef struct f32_case {
    const char *name;
    float (*f)(float);
    double (*ref)(double);
    sweep_kind kind;
    double lo, hi;
    double bound; /* ulps */
    float hard[3]; /* extra points: the worst cases of an exhaustive search */
} f32_case;

#define PI_D 3.14159265358979
/* Bounds: the maximum measured exhaustively over all floats of the range,
 * plus a margin; where the code does worse than the design target of
 * dual/math_f32.h ("a few ulp", 4 here), that target. The hard points are
 * the worst cases of that exhaustive search. */
static const f32_case F32_CASES[] = {
    /* exhaustive max 1.046 ulp (with FMA) */
    {"dc_exp_f32", s_exp, exp, SW_LINEAR, -110.0, 90.0, 1.5, {-5.83807802f, 88.7228f, -103.9f}},
    {"dc_exp_f32", s_exp, exp, SW_LOG_PM, 1e-45, 1.0, 1.5, {0}},
    /* exhaustive max 1.046 ulp over [-110, 0] */
    {"dc_exp_nonpos_f32", s_exp_nonpos_neg, ref_exp_neg, SW_LINEAR, 0.0, 110.0, 1.5, {5.83807802f, 103.9f, 87.3f}},
    {"dc_exp_nonpos_f32", s_exp_nonpos_neg, ref_exp_neg, SW_LOG, 1e-45, 1.0, 1.5, {0}},
    /* 0.827 ulp */
    {"dc_log_f32", s_log, log, SW_LOG, 1e-45, 3.4e38, 1.5, {1.41364205f, 0.699976802f, 1e-45f}},
    {"dc_log_f32", s_log, log, SW_LINEAR, 0.5, 2.0, 1.5, {0}},
    /* exhaustive max 1.595 ulp over all floats (1.569 without FMA) */
    {"dc_expm1_f32", s_expm1, expm1, SW_LINEAR, -20.0, 90.0, 2.0, {0.388851583f, 0.352921635f, -0.5f}},
    {"dc_expm1_f32", s_expm1, expm1, SW_LOG_PM, 1e-45, 1.0, 2.0, {0}},
    /* 2.469 ulp */
    {"dc_log1p_f32", s_log1p, log1p, SW_LOG, 1e-45, 3.4e38, 3.0, {0.0156249395f}},
    {"dc_log1p_f32", s_log1p, log1p, SW_LINEAR, -0.9999999, 1.0, 3.0, {0}},
    {"dc_log1p_f32", s_log1p, log1p, SW_LOG_PM, 1e-45, 0.5, 3.0, {0}},
    /* exhaustive max 2.498 ulp */
    {"dc_tanh_f32", s_tanh, tanh, SW_LINEAR, -12.0, 12.0, 3.0, {4.50509071f, 0.117044955f}},
    {"dc_tanh_f32", s_tanh, tanh, SW_LOG_PM, 1e-45, 1e38, 3.0, {0}},
    /* exhaustive max 3.239 ulp */
    {"dc_erf_f32", s_erf, erf, SW_LINEAR, -6.0, 6.0, 4.0, {0.503089786f, 0.50232017f}},
    {"dc_erf_f32", s_erf, erf, SW_LOG_PM, 1e-45, 1e38, 4.0, {0}},
    /* |x| <= pi: 1.383 ulp (sin), 1.482 ulp (cos); |x| < 1e4: 1.562 and
     * 1.548 ulp with the FMA range reduction, 477.8 and 974.5 ulp next to
     * the zeros with the three-constant one (no FMA) */
    {"dc_sin_f32", s_sin, sin, SW_LINEAR, -PI_D, PI_D, 2.0, {3.11033916f}},
    {"dc_sin_f32", s_sin, sin, SW_LOG_PM, 1e-45, 1.0, 2.0, {0}},
    {"dc_sin_f32", s_sin, sin, SW_LINEAR, -1e4, 1e4, 4.0, {505.796417f, 9.42477798f}},
    {"dc_cos_f32", s_cos, cos, SW_LINEAR, -PI_D, PI_D, 2.0, {1.31881642f}},
    {"dc_cos_f32", s_cos, cos, SW_LOG_PM, 1e-45, 1.0, 2.0, {0}},
    {"dc_cos_f32", s_cos, cos, SW_LINEAR, -1e4, 1e4, 4.0, {6715.1543f, 4.71238899f}},
    /* exhaustive max 2.825 ulp */
    {"dc_sigmoid_f32", s_sigmoid, ref_sigmoid, SW_LINEAR, -110.0, 110.0, 3.5, {-1.95424449f, -2.7091918f}},
    {"dc_sigmoid_f32", s_sigmoid, ref_sigmoid, SW_LOG_PM, 1e-45, 1e38, 3.5, {0}},
    /* exhaustive max 2.811 ulp */
    {"dc_softplus_f32", s_softplus, ref_softplus, SW_LINEAR, -110.0, 110.0, 3.5, {-3.46696711f, -3.67114139f}},
    {"dc_softplus_f32", s_softplus, ref_softplus, SW_LOG_PM, 1e-45, 1e38, 3.5, {0}},
};

#define SWEEP_RANDOM 100000
#define SWEEP_STRIDED 200000

typedef struct worst {
    double err;
    float x;
} worst;

static void measure(const f32_case *c, float x, worst *w)
{
    const double e = ulp_error(c->f(x), c->ref((double)x));
    if (e > w->err) {
        w->err = e;
        w->x = x;
    }
}

/* Every SWEEP_STRIDED-th float between lo and hi (both included). */
static void measure_strided(const f32_case *c, float lo, float hi, worst *w)
{
    const int64_t k0 = float_key(lo), k1 = float_key(hi);
    const int64_t step = (k1 - k0) / SWEEP_STRIDED > 1 ? (k1 - k0) / SWEEP_STRIDED : 1;
    for (int64_t k = k0; k < k1; k += step)
        measure(c, key_float(k), w);
    measure(c, hi, w);
}

/* Measures every row of a table (random points, every n-th float of the
 * range, the hard points), prints the maximum error and records the rows
 * over their bound. */
static void sweep_table(const f32_case *cases, size_t ncases, failures *fl)
{
    for (size_t i = 0; i < ncases; ++i) {
        const f32_case *c = &cases[i];
        worst w = {0.0, 0.0f};
        uint64_t seed = 0x9e3779b97f4a7c15ull + i;
        const double llo = c->kind == SW_LINEAR ? 0.0 : log(c->lo), lhi = c->kind == SW_LINEAR ? 0.0 : log(c->hi);
        for (int n = 0; n < SWEEP_RANDOM; ++n) {
            const double u = rng_unit(&seed);
            double x = c->kind == SW_LINEAR ? c->lo + (c->hi - c->lo) * u : exp(llo + (lhi - llo) * u);
            if (c->kind == SW_LOG_PM && (rng_next(&seed) & 1))
                x = -x;
            measure(c, (float)x, &w);
        }
        measure_strided(c, (float)c->lo, (float)c->hi, &w);
        if (c->kind == SW_LOG_PM)
            measure_strided(c, -(float)c->hi, -(float)c->lo, &w);
        for (int h = 0; h < 3; ++h)
            measure(c, c->hard[h], &w);
        const double ref = c->ref((double)w.x);
        print_message("%-16s %s [%g, %g]: max error %.3f ulp at x = %.9g (got %.9g, want %.9g); bound %g\n", c->name,
                      c->kind == SW_LINEAR ? "x in" : "|x| in", c->lo, c->hi, w.err, (double)w.x, (double)c->f(w.x),
                      ref, c->bound);
        if (!(w.err <= c->bound))
            failure(fl, "%s over %s[%g, %g]: %.3f ulp at x = %.9g (got %.9g, want %.9g), bound %g", c->name,
                    c->kind == SW_LINEAR ? "" : "+-", c->lo, c->hi, w.err, (double)w.x, (double)c->f(w.x), ref,
                    c->bound);
    }
}

static void test_f32_accuracy(void **state)
{
    (void)state;
    failures fl = {0};
    sweep_table(F32_CASES, sizeof F32_CASES / sizeof F32_CASES[0], &fl);
    FINISH(fl, "float elementary functions");
}

/* The partials of the float duals, in ulps of the derivative computed in
 * double: each operation on a dc_dual1f seeded with tangent 1. */
#define DUAL1F_DERIV(op)                                                                                               \
    static float dd_##op(float x) { return dc_dual1f_##op(dc_dual1f_seed(x, 0)).d[0]; }
DUAL1F_DERIV(exp)
DUAL1F_DERIV(expm1)
DUAL1F_DERIV(log)
DUAL1F_DERIV(log1p)
DUAL1F_DERIV(sqrt)
DUAL1F_DERIV(sin)
DUAL1F_DERIV(cos)
DUAL1F_DERIV(tanh)
DUAL1F_DERIV(sigmoid)
DUAL1F_DERIV(softplus)
DUAL1F_DERIV(erf)

static double ref_recip(double x) { return 1.0 / x; }
static double ref_log1p_dx(double x) { return 1.0 / (1.0 + x); }
static double ref_sqrt_dx(double x) { return 0.5 / sqrt(x); }
static double ref_neg_sin(double x) { return -sin(x); }
static double ref_erf_dx(double x) { return two_over_sqrt_pi() * exp(-x * x); }

/* Exhaustive maxima, measured before the polynomials used FMA (the sampled
 * maxima this test prints with FMA stay within 0.05 ulp of them; exp' 1.006,
 * expm1' 1.040): exp' and expm1' 0.99 ulp, log' 0.5, log1p' 1.5, sqrt'
 * 1.49, sin' 1.48, cos' 1.38, softplus' 2.83, tanh' and sigmoid' 4.98 (both
 * 1.7e7, i.e. 0 for a nonzero derivative, with the derivative taken from the
 * output as 1 - y^2 and y (1 - y)); erf' 65.3, from exp(-x*x), which
 * magnifies the rounding error of x*x by x^2. */
static const f32_case F32_DERIV_CASES[] = {
    {"exp'", dd_exp, exp, SW_LINEAR, -110.0, 88.7, 1.5, {0}},
    {"expm1'", dd_expm1, exp, SW_LINEAR, -110.0, 88.7, 1.5, {-60.0f, -20.0f}},
    {"log'", dd_log, ref_recip, SW_LOG, 1e-45, 3.4e38, 1.0, {0}},
    {"log1p'", dd_log1p, ref_log1p_dx, SW_LINEAR, -0.9999, 1.0, 2.0, {0}},
    {"log1p'", dd_log1p, ref_log1p_dx, SW_LOG, 1e-45, 3.4e38, 2.0, {0}},
    {"sqrt'", dd_sqrt, ref_sqrt_dx, SW_LOG, 1e-45, 3.4e38, 2.0, {0}},
    {"sin'", dd_sin, cos, SW_LINEAR, -PI_D, PI_D, 2.0, {0}},
    {"cos'", dd_cos, ref_neg_sin, SW_LINEAR, -PI_D, PI_D, 2.0, {0}},
    {"tanh'", dd_tanh, ref_tanh_dx, SW_LINEAR, -100.0, 100.0, 6.0, {1.70808184f, 10.0f, -40.0f}},
    {"sigmoid'", dd_sigmoid, ref_sigmoid_dx, SW_LINEAR, -110.0, 110.0, 6.0, {3.41616368f, 20.0f, 80.0f}},
    {"softplus'", dd_softplus, ref_sigmoid, SW_LINEAR, -110.0, 110.0, 3.5, {0}},
    {"erf'", dd_erf, ref_erf_dx, SW_LINEAR, -10.0, 10.0, 4.0, {8.07993507f, 8.49804688f}},
};

static void test_f32_dual_derivatives(void **state)
{
    (void)state;
    failures fl = {0};
    sweep_table(F32_DERIV_CASES, sizeof F32_DERIV_CASES / sizeof F32_DERIV_CASES[0], &fl);
    FINISH(fl, "float dual derivatives");
}

/* dc_pow_f32 on a = +-e^[-7, 7] (a negative base with integer exponents),
 * b in [-12, 12]: results from 1e-37 to overflow. Measured over all samples
 * and over those with |b log|a|| <= 2 (results in [0.13, 7.4]), where even
 * exp(b log|a|) evaluated in float is accurate: an error there is not the
 * magnified rounding of b log|a|. */
static void test_f32_pow_accuracy(void **state)
{
    (void)state;
    const char *const ranges[2] = {"|b log|a|| <= 2", "all samples"};
    const double bounds[2] = {4.0, 4.0}; /* 3.48 ulp seen in 6e7 samples of the first range */
    worst w[2] = {{0.0, 0.0f}, {0.0, 0.0f}};
    float wb[2] = {0.0f, 0.0f};
    uint64_t seed = 12345;
    for (int n = 0; n < 4 * SWEEP_RANDOM; ++n) {
        float a = (float)exp(-7.0 + 14.0 * rng_unit(&seed));
        float b = (float)(-12.0 + 24.0 * rng_unit(&seed));
        if (n & 1) {
            a = -a;
            b = (float)floor(b + 0.5);
        }
        const double e = ulp_error(dc_pow_f32(a, b), pow((double)a, (double)b));
        for (int r = 0; r < 2; ++r) {
            if (r == 0 && fabs((double)b * log(fabs((double)a))) > 2.0)
                continue;
            if (e > w[r].err) {
                w[r].err = e;
                w[r].x = a;
                wb[r] = b;
            }
        }
    }
    failures fl = {0};
    for (int r = 0; r < 2; ++r) {
        const float got = dc_pow_f32(w[r].x, wb[r]);
        const double want = pow((double)w[r].x, (double)wb[r]);
        print_message("dc_pow_f32       %s: max error %.3f ulp at (%.9g, %.9g) (got %.9g, want %.9g); bound %g\n",
                      ranges[r], w[r].err, (double)w[r].x, (double)wb[r], (double)got, want, bounds[r]);
        if (!(w[r].err <= bounds[r]))
            failure(&fl, "dc_pow_f32 over %s: %.3f ulp at (%.9g, %.9g) (got %.9g, want %.9g), bound %g", ranges[r],
                    w[r].err, (double)w[r].x, (double)wb[r], (double)got, want, bounds[r]);
    }
    FINISH(fl, "dc_pow_f32 accuracy");
}

/* Special values: NaN in, NaN out; infinities, zeros (with their sign) and
 * the special cases of C's powf. */
typedef struct special_case {
    const char *name;
    float (*f)(float);
    float x, y; /* y: the exponent of pow (f == NULL) */
    float want;
} special_case;

static const special_case SPECIAL_CASES[] = {
    {"exp", s_exp, NAN, 0, NAN},
    {"exp", s_exp, INFINITY, 0, INFINITY},
    {"exp", s_exp, -INFINITY, 0, 0.0f},
    {"exp", s_exp, 0.0f, 0, 1.0f},
    {"exp", s_exp, -0.0f, 0, 1.0f},
    {"exp", s_exp, 89.0f, 0, INFINITY},
    {"exp", s_exp, -110.0f, 0, 0.0f},
    {"exp_nonpos", s_exp_nonpos, NAN, 0, NAN},
    {"exp_nonpos", s_exp_nonpos, -INFINITY, 0, 0.0f},
    {"exp_nonpos", s_exp_nonpos, 0.0f, 0, 1.0f},
    {"exp_nonpos", s_exp_nonpos, -0.0f, 0, 1.0f},
    {"exp_nonpos", s_exp_nonpos, -110.0f, 0, 0.0f},
    {"exp_nonpos", s_exp_nonpos, -103.5f, 0, 1e-45f}, /* 0.80 of the smallest subnormal: rounds up to it */
    {"log", s_log, NAN, 0, NAN},
    {"log", s_log, 0.0f, 0, -INFINITY},
    {"log", s_log, -0.0f, 0, -INFINITY},
    {"log", s_log, -1.0f, 0, NAN},
    {"log", s_log, -INFINITY, 0, NAN},
    {"log", s_log, INFINITY, 0, INFINITY},
    {"log", s_log, 1.0f, 0, 0.0f},
    {"expm1", s_expm1, NAN, 0, NAN},
    {"expm1", s_expm1, INFINITY, 0, INFINITY},
    {"expm1", s_expm1, -INFINITY, 0, -1.0f},
    {"expm1", s_expm1, 0.0f, 0, 0.0f},
    {"expm1", s_expm1, -0.0f, 0, -0.0f},
    {"expm1", s_expm1, 1e-30f, 0, 1e-30f},
    {"expm1", s_expm1, -1e-30f, 0, -1e-30f},
    {"expm1", s_expm1, 1e-45f, 0, 1e-45f},
    {"log1p", s_log1p, NAN, 0, NAN},
    {"log1p", s_log1p, -1.0f, 0, -INFINITY},
    {"log1p", s_log1p, -2.0f, 0, NAN},
    {"log1p", s_log1p, INFINITY, 0, INFINITY},
    {"log1p", s_log1p, 0.0f, 0, 0.0f},
    {"log1p", s_log1p, -0.0f, 0, -0.0f},
    {"log1p", s_log1p, 1e-30f, 0, 1e-30f},
    {"log1p", s_log1p, -1e-30f, 0, -1e-30f},
    {"log1p", s_log1p, 1e-45f, 0, 1e-45f},
    {"tanh", s_tanh, NAN, 0, NAN},
    {"tanh", s_tanh, INFINITY, 0, 1.0f},
    {"tanh", s_tanh, -INFINITY, 0, -1.0f},
    {"tanh", s_tanh, 0.0f, 0, 0.0f},
    {"tanh", s_tanh, -0.0f, 0, -0.0f},
    {"tanh", s_tanh, 1e-30f, 0, 1e-30f},
    {"tanh", s_tanh, -1e-45f, 0, -1e-45f},
    {"tanh", s_tanh, 20.0f, 0, 1.0f},
    {"tanh", s_tanh, -20.0f, 0, -1.0f},
    {"erf", s_erf, NAN, 0, NAN},
    {"erf", s_erf, INFINITY, 0, 1.0f},
    {"erf", s_erf, -INFINITY, 0, -1.0f},
    {"erf", s_erf, 0.0f, 0, 0.0f},
    {"erf", s_erf, -0.0f, 0, -0.0f},
    {"erf", s_erf, 10.0f, 0, 1.0f},
    {"erf", s_erf, -10.0f, 0, -1.0f},
    {"sin", s_sin, NAN, 0, NAN},
    {"sin", s_sin, INFINITY, 0, NAN},
    {"sin", s_sin, -INFINITY, 0, NAN},
    {"sin", s_sin, 0.0f, 0, 0.0f},
    {"sin", s_sin, -0.0f, 0, -0.0f},
    {"sin", s_sin, 1e-30f, 0, 1e-30f},
    {"cos", s_cos, NAN, 0, NAN},
    {"cos", s_cos, INFINITY, 0, NAN},
    {"cos", s_cos, -INFINITY, 0, NAN},
    {"cos", s_cos, 0.0f, 0, 1.0f},
    {"cos", s_cos, -0.0f, 0, 1.0f},
    {"sigmoid", s_sigmoid, NAN, 0, NAN},
    {"sigmoid", s_sigmoid, INFINITY, 0, 1.0f},
    {"sigmoid", s_sigmoid, -INFINITY, 0, 0.0f},
    {"sigmoid", s_sigmoid, 0.0f, 0, 0.5f},
    {"softplus", s_softplus, NAN, 0, NAN},
    {"softplus", s_softplus, INFINITY, 0, INFINITY},
    {"softplus", s_softplus, -INFINITY, 0, 0.0f},
    {"softplus", s_softplus, 100.0f, 0, 100.0f},
    {"pow", NULL, -2.0f, 3.0f, -8.0f},
    {"pow", NULL, -2.0f, 0.5f, NAN},
    {"pow", NULL, 0.0f, -1.0f, INFINITY},
    {"pow", NULL, -0.0f, -1.0f, -INFINITY},
    {"pow", NULL, 0.0f, -2.0f, INFINITY},
    {"pow", NULL, -0.0f, -0.5f, INFINITY},
    {"pow", NULL, 0.0f, 2.0f, 0.0f},
    {"pow", NULL, -0.0f, 3.0f, -0.0f},
    {"pow", NULL, -0.0f, 2.0f, 0.0f},
    {"pow", NULL, 1.0f, NAN, 1.0f},
    {"pow", NULL, 1.0f, INFINITY, 1.0f},
    {"pow", NULL, NAN, 0.0f, 1.0f},
    {"pow", NULL, 2.0f, 0.0f, 1.0f},
    {"pow", NULL, -3.5f, -0.0f, 1.0f},
    {"pow", NULL, INFINITY, 0.0f, 1.0f},
    {"pow", NULL, 2.0f, NAN, NAN},
    {"pow", NULL, NAN, 2.0f, NAN},
    {"pow", NULL, -1.0f, INFINITY, 1.0f},
    {"pow", NULL, -1.0f, -INFINITY, 1.0f},
    {"pow", NULL, 0.5f, -INFINITY, INFINITY},
    {"pow", NULL, 2.0f, -INFINITY, 0.0f},
    {"pow", NULL, -0.5f, INFINITY, 0.0f},
    {"pow", NULL, -2.0f, INFINITY, INFINITY},
    {"pow", NULL, -INFINITY, 3.0f, -INFINITY},
    {"pow", NULL, -INFINITY, -3.0f, -0.0f},
    {"pow", NULL, -INFINITY, 2.0f, INFINITY},
    {"pow", NULL, INFINITY, -1.0f, 0.0f},
    {"pow", NULL, -8.0f, 1.0f / 3.0f, NAN},
    {"pow", NULL, 2.0f, 10.0f, 1024.0f},
    {"pow", NULL, 4.0f, 0.5f, 2.0f},
    {"pow", NULL, -2.0f, -1.0f, -0.5f},
};

static void test_f32_special_values(void **state)
{
    (void)state;
    failures fl = {0};
    for (size_t i = 0; i < sizeof SPECIAL_CASES / sizeof SPECIAL_CASES[0]; ++i) {
        const special_case *c = &SPECIAL_CASES[i];
        const float got = c->f ? c->f(c->x) : dc_pow_f32(c->x, c->y);
        const int ok = isnan(c->want) ? isnan(got) : got == c->want && !signbit(got) == !signbit(c->want);
        if (ok)
            continue;
        if (c->f)
            failure(&fl, "dc_%s_f32(%g) = %g, want %g", c->name, (double)c->x, (double)got, (double)c->want);
        else
            failure(&fl, "dc_pow_f32(%g, %g) = %g, want %g", (double)c->x, (double)c->y, (double)got,
                    (double)c->want);
    }
    FINISH(fl, "float special values");
}

/* The broadcast kernels for per-element control compile the float math with
 * DC_SELECT_BITWISE (choices as bit operations instead of conditionals). The
 * two builds must agree bit for bit on every input, NaN and the signs of
 * zeros included. */
static void test_f32_select_modes_agree(void **state)
{
    (void)state;
    failures fl = {0};
    static const float special[] = {0.0f,    1e-45f, 1e-38f, 1e-7f,  0.3f,   0.5f,   0.625f,   1.0f,   3.0f,
                                    10.0f,   50.0f,  88.7f,  88.8f,  89.0f,  104.9f, 105.0f,   110.0f, 1e4f,
                                    4.1e6f,  1e38f,  INFINITY};
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    uint64_t seed = 0x5e1ec7ull;
    for (int fn = 0; fn < BW_COUNT; ++fn) {
        for (int k = 0; k < 2 * nspecial + 1 + 20000; ++k) {
            float x;
            if (k < 2 * nspecial)
                x = k % 2 ? -special[k / 2] : special[k / 2];
            else if (k == 2 * nspecial)
                x = NAN;
            else {
                x = (float)exp(-100.0 + 190.0 * rng_unit(&seed)); /* |x| from 4e-44 to 3e38 */
                x = rng_next(&seed) & 1 ? -x : x;
            }
            const float a = dc_test_bitwise_f32((bitwise_fn)fn, x), b = dc_test_default_f32((bitwise_fn)fn, x);
            if (isnan(a) && isnan(b))
                continue;
            if (memcmp(&a, &b, sizeof a) != 0) {
                failure(&fl, "%s(%.9g): bitwise select gives %.9g, conditional %.9g", dc_test_bitwise_name(fn),
                        (double)x, (double)a, (double)b);
                break;
            }
        }
    }
    FINISH(fl, "select modes");
}

/* dc_tanh_f32 divides; dc_tanh_vd_f32 takes the same quotient from the
 * reciprocal it needs for the derivative, with one correction step. The two
 * must give the same value bit for bit (checked over every float once; here
 * on a sample), so that a broadcast function's primal and dual kernels agree. */
static void test_f32_tanh_value_matches_dual(void **state)
{
    (void)state;
    failures fl = {0};
    uint64_t seed = 0x7a4ull;
    for (int k = 0; k < 400000; ++k) {
        float x;
        if (k % 2)
            x = (float)(-12.0 + 24.0 * rng_unit(&seed));
        else
            x = (float)exp(-100.0 + 190.0 * rng_unit(&seed)) * (rng_next(&seed) & 1 ? -1.0f : 1.0f);
        float dx;
        const float a = dc_tanh_f32(x), b = dc_tanh_vd_f32(x, &dx);
        if (memcmp(&a, &b, sizeof a) != 0) {
            failure(&fl, "tanh(%.9g): dc_tanh_f32 gives %.9g, dc_tanh_vd_f32 %.9g", (double)x, (double)a, (double)b);
            break;
        }
    }
    FINISH(fl, "tanh value and dual value");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_const_seed),
        cmocka_unit_test(test_pow_of_negative_base),
        cmocka_unit_test(test_unary_ops_f64),
        cmocka_unit_test(test_binary_ops_f64),
        cmocka_unit_test(test_composite_f64),
        cmocka_unit_test(test_large_magnitude),
        cmocka_unit_test(test_kinks),
        cmocka_unit_test(test_adj_mul),
        cmocka_unit_test(test_zero_tangent),
        cmocka_unit_test(test_one_and_sixteen_partials),
        cmocka_unit_test(test_f32_special_values),
        cmocka_unit_test(test_f32_accuracy),
        cmocka_unit_test(test_f32_dual_derivatives),
        cmocka_unit_test(test_f32_pow_accuracy),
        cmocka_unit_test(test_f32_select_modes_agree),
        cmocka_unit_test(test_f32_tanh_value_matches_dual),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
