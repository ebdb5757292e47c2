/* One table of op cases shared by the tests: every op of include/dualcast/
 * ops.h, with broadcasting patterns, value ranges and arguments, and a
 * reference computed in double. tests/test_ops.c checks each row on the CPU
 * (values against the reference, gradients against central differences,
 * accumulation, recording off, seeded adjoints); tests/test_cuda.c runs each
 * row on CUDA against the CPU. A new op is tested everywhere from its rows
 * here. */
#ifndef DC_TEST_OP_CASES_H
#define DC_TEST_OP_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dualcast.h>

typedef struct shp {
    int nd;
    int64_t d[DC_MAX_DIMS];
} shp;

#define SC {0, {0}}
#define S1(a) {1, {a}}
#define S2(a, b) {2, {a, b}}
#define S3(a, b, c) {3, {a, b, c}}
#define S4(a, b, c, d) {4, {a, b, c, d}}

typedef enum fill_kind {
    FILL_UNIFORM, /* uniform in [lo, hi) */
    FILL_AWAY0,   /* magnitude uniform in [lo, hi), random sign: away from 0 */
    FILL_COND,    /* 0 or 1 */
    FILL_INDEX,   /* an integer in 0 .. hi - 1 (ids, class indices) */
} fill_kind;

typedef struct range {
    fill_kind kind;
    double lo, hi;
} range;

#define U(lo, hi) {FILL_UNIFORM, lo, hi}
#define AWAY0(lo, hi) {FILL_AWAY0, lo, hi}
#define COND {FILL_COND, 0, 1}
#define INDEX(n) {FILL_INDEX, 0, n}

/* Per-op parameters of a case. */
typedef struct op_arg {
    double s, t; /* affine (s, t); hard_sigmoid (slope s); step_st (threshold s) */
    int n_axes;  /* sum, mean */
    int axes[DC_MAX_DIMS];
    bool keepdims;
    bool trans[2];         /* matmul: operand stored with its last two axes swapped, transposed by the op */
    bool swap02[2];        /* matmul: operand is dc_op_transpose(x, 0, 2), a layout BLAS cannot read */
    bool pre_transpose;    /* reshape: of dc_op_transpose(x, ax0, ax1), not contiguous */
    int ax0, ax1;          /* transpose; reshape with pre_transpose; slice and concat: ax0 */
    int64_t start, len;    /* slice */
    bool straight_through; /* step_st: the gradient is the identity's by definition, not the derivative */
    int nd;                /* reshape target */
    int64_t shape[DC_MAX_DIMS];
    dc_partials_policy policy; /* broadcast functions */
} op_arg;

typedef dc_tensor *(*build_fn)(dc_tape *tape, dc_tensor *const *in, const op_arg *arg);

typedef enum ref_kind {
    REF_EW,
    REF_SUM,
    REF_MEAN,
    REF_MATMUL,
    REF_TRANSPOSE,
    REF_RESHAPE,
    REF_SLICE,
    REF_CONCAT,
    REF_EMBEDDING,
    REF_CROSS_ENTROPY,
    REF_NONE, /* a composition of ops: no reference of its own (checked by
               * central differences, and on CUDA against the CPU) */
} ref_kind;

/* A scalar elementwise function of the op's inputs. */
typedef double (*ew_fn)(const double *v, const op_arg *arg);

typedef struct op_case {
    const char *name;
    build_fn build;
    ref_kind ref;
    ew_fn ew; /* REF_EW */
    int n_in;
    shp shape[3];
    range range[3];
    bool grad[3];
    op_arg arg;
    /* Sizes for the device's paths (16-byte loads, grid limits, long
     * reductions, many rows): compared with the reference and, on CUDA,
     * with the CPU, but too large for central differences. */
    bool large;
} op_case;

/* The reference output of case k for inputs v: values, and per element the
 * sum of the magnitudes of its terms (the scale of its rounding error). */
typedef struct reference {
    shp shape;
    double *y, *mag;
    bool from_library; /* a REF_NONE row: y is the library's own float64 output */
} reference;

/* A case's input tensors and their values. */
typedef struct case_inputs {
    dc_tensor *t[3];
    double *v[3];
} case_inputs;


extern const op_case cases[];
extern const int n_cases;
#define N_CASES n_cases

/* Values of input i of case c (malloc'd, numel doubles): deterministic, and
 * exactly representable in float so that float32 and float64 runs, and both
 * backends, see the same inputs. */
double *case_values(int c, int i);

/* The case's inputs as persistent tensors in dtype on ctx, requiring
 * gradients where the case says (with_grads). */
void make_inputs(dc_ctx *ctx, int c, dc_dtype dtype, bool with_grads, case_inputs *in);
void free_inputs(case_inputs *in);

/* The reference output of case k for input values v. */
void compute_reference(const op_case *k, double *const *v, reference *r);
void free_reference(reference *r);

/* NULL when every op of ops.h has a row, else the name of one that has none. */
const char *op_cases_missing_op(void);

/* The two layouts the table's checks need to be meaningful (see test_ops). */
dc_tensor *build_matmul(dc_tape *t, dc_tensor *const *x, const op_arg *a);
dc_tensor *build_reshape(dc_tape *t, dc_tensor *const *x, const op_arg *a);

/* Shapes. */
int64_t shp_numel(const shp *s);
const char *shp_str(const shp *s, char *buf, size_t size);
shp tensor_shp(const dc_tensor *t);
bool shp_equal(const shp *a, const shp *b);
shp broadcast_of(int n, const shp *in);
void coords_of(const shp *s, int64_t e, int64_t *c);
int64_t flat_of(const shp *s, const int64_t *c);
int norm_axis(int a, int nd);

#endif /* DC_TEST_OP_CASES_H */
