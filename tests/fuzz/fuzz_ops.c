/* fuzz_ops: the input is a small program over the public API. It makes
 * tensors of any shape (ranks 0 to 8, sizes from 0 to past the bound of
 * dc_tensor_new, both dtypes), applies primitive ops and broadcast functions
 * to them on two tapes with arbitrary arguments, runs backward passes and
 * reads every result and gradient back. Every call must succeed or fail with
 * a status and a message; a crash, a sanitizer report, a leak or a broken
 * contract (FZ_FAIL) is a finding.
 *
 * The program is a sequence of instructions, one opcode byte each followed by
 * its operand bytes (see the switch in run_program); missing bytes read as 0.
 *
 * Tensors made by the program are bounded (FZ_MAX_NEW_ELEMENTS) unless they are
 * empty: a size-0 axis next to huge ones costs nothing and is where size
 * arithmetic goes wrong. Ops may still ask for large results (an outer
 * broadcast): allocations above 32 MiB fail instead (see
 * __asan_default_options), which the library must report as DC_ERR_MEMORY. */
/* setenv */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>

#include "fuzz_common.h"

#include "prod_sign_fns.h"


DC_BFN_DECLARE(gated_scale);
DC_BFN_DECLARE(polar_pair);
DC_BFN_DECLARE(hmlstm_update_c);
DC_BFN_DECLARE(hmlstm_cell);

/* Elements of a tensor the program makes (an op's result may be larger). */
#define FZ_MAX_NEW_ELEMENTS ((int64_t)1 << 14)
/* Results and gradients at most this large are read back whole; larger
 * ones element by element at a few places. */
#define FZ_READ_ALL_BYTES ((size_t)1 << 16)
#define FZ_POOL 48
#define FZ_MAX_STEPS 64
#define FZ_MAX_PERSISTENT 32
/* A program stops once its tapes hold this much (results of up to 32 MiB
 * each could otherwise reach the fuzzer's memory limit)... */
#define FZ_MAX_TAPE_BYTES ((size_t)512 << 20)
/* ...and a tape that kept more than this after a program is made again. */
#define FZ_KEEP_TAPE_BYTES ((size_t)64 << 20)
/* The work one program may do, in elements times operands of its calls.
 * A call recorded on a tape is charged three times its forward work, which
 * pays for one backward pass; a tape's further backward passes are charged
 * twice the work recorded on it; a gradient check its loss's evaluations.
 * Size arithmetic goes wrong with small shapes as with large ones; the work
 * of large ones, tenfold under the sanitizers, is what made programs time
 * out: ten-input broadcast functions over 10^6 elements took 17 s under load. */
#define FZ_MAX_WORK ((int64_t)1 << 22)

/* Huge allocations fail instead of stopping the run: the library must turn
 * them into DC_ERR_MEMORY. Read by AddressSanitizer at start-up. The limit
 * applies to libFuzzer's own allocations too, which reach about 20 MiB. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=32:detect_leaks=1";
}

static const dc_bfn *const bfns[] = {
    DC_BFN_REF(gated_scale),     DC_BFN_REF(polar_pair),  DC_BFN_REF(hmlstm_update_c), DC_BFN_REF(hmlstm_cell),
    DC_BFN_REF(prod_sign_1),     DC_BFN_REF(prod_sign_2), DC_BFN_REF(prod_sign_3),     DC_BFN_REF(prod_sign_5),
    DC_BFN_REF(prod_sign_8),     DC_BFN_REF(prod_sign_10),
};
#define FZ_N_BFNS ((int)(sizeof bfns / sizeof bfns[0]))

/* A tensor the program can name: its tape (0 or 1), or -1 when persistent. */
typedef struct slot {
    dc_tensor *t;
    int tape;
    int id; /* its name in the trace */
} slot;

typedef struct program {
    fz_input in;
    dc_ctx *ctx;
    dc_ctx *other_ctx; /* made on first use: tensors of another context */
    dc_tape *tapes[2];
    slot pool[FZ_POOL];
    int n_pool;
    int next_evict;
    dc_tensor *persistent[FZ_MAX_PERSISTENT]; /* owned here, freed at the end */
    int n_persistent;
    int next_id;
    int64_t work;            /* charged so far, against FZ_MAX_WORK */
    int64_t tape_work[2];    /* forward work recorded on each tape */
    bool backward_paid[2];   /* whether a tape's first backward pass has run */
    char args[2048]; /* the tensors picked for the current call, for the trace */
} program;

/* DC_FUZZ_TRACE=1 in the environment prints each call and its result, to
 * turn a crashing input into the sequence of calls that reproduces it. */
static bool tracing;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tracing = fz_tracing_requested();
    /* Half the inputs run on two threads: clang's OpenMP runtime would keep
     * the second one spinning between parallel regions, on a core the
     * fuzzer could use. Read when the runtime starts, after this. */
    setenv("KMP_BLOCKTIME", "0", 0);
    return 0;
}

/* ---- shapes -------------------------------------------------------------- */

/* The number of elements, or -1 when it does not fit in int64_t. */
static int64_t safe_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        if (shape[d] < 0)
            return -1;
    for (int d = 0; d < ndim; ++d)
        if (shape[d] == 0)
            return 0;
    for (int d = 0; d < ndim; ++d) {
        if (n > INT64_MAX / shape[d])
            return -1;
        n *= shape[d];
    }
    return n;
}

/* The product of the sizes with zeros counted as ones (what dc_tensor_new
 * bounds), or -1 past INT64_MAX. */
static int64_t span(int ndim, const int64_t *shape)
{
    int64_t s = 1;
    for (int d = 0; d < ndim; ++d) {
        const int64_t k = shape[d] > 0 ? shape[d] : 1;
        if (s > INT64_MAX / k)
            return -1;
        s *= k;
    }
    return s;
}

/* ---- the pool of tensors ------------------------------------------------- */

static void pool_add(program *p, dc_tensor *t, int tape)
{
    if (!t)
        return;
    int at;
    if (p->n_pool < FZ_POOL) {
        at = p->n_pool++;
    } else {
        at = p->next_evict;
        p->next_evict = (p->next_evict + 1) % FZ_POOL;
    }
    p->pool[at].t = t;
    p->pool[at].tape = tape;
    p->pool[at].id = p->next_id++;
}

/* "t3:f32[2, 0]" for a tensor of the pool. */
static const char *describe(const program *p, const dc_tensor *t, char *buf, size_t size)
{
    if (!t)
        return "NULL";
    int id = -1;
    for (int i = 0; i < p->n_pool; ++i)
        if (p->pool[i].t == t)
            id = p->pool[i].id;
    char shape[200];
    snprintf(buf, size, "t%d:%s%s", id, dc_dtype_name(dc_tensor_dtype(t)), dc_tensor_shape_str(t, shape, sizeof shape));
    return buf;
}

/* Prints the call about to be made with the tensors picked for it and the
 * other arguments (fmt); flushed, so that a crash shows it. */
static void trace_call(program *p, int tape, const char *call, const char *fmt, ...)
{
    if (!tracing)
        return;
    fprintf(stderr, "[tape %d] %s(%s", tape, call, p->args);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        fputs(p->args[0] ? ", " : "", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputs(")\n", stderr);
    fflush(stderr);
}

/* A tensor of the pool, or NULL (on purpose: every op must refuse it). */
static dc_tensor *pick(program *p)
{
    const uint8_t b = fz_u8(&p->in);
    dc_tensor *t = p->n_pool == 0 || b == 255 ? NULL : p->pool[b % p->n_pool].t;
    if (tracing) {
        char d[256];
        const size_t len = strlen(p->args);
        snprintf(p->args + len, sizeof p->args - len, "%s%s", len ? ", " : "", describe(p, t, d, sizeof d));
    }
    return t;
}

/* Forgets a tensor the program must not use. */
static void pool_drop(program *p, const dc_tensor *t)
{
    int kept = 0;
    for (int i = 0; i < p->n_pool; ++i)
        if (p->pool[i].t != t)
            p->pool[kept++] = p->pool[i];
    p->n_pool = kept;
    p->next_evict = 0;
}

/* Forgets the tensors of a tape that was reset: their pointers are stale. */
static void pool_drop_tape(program *p, int tape)
{
    int kept = 0;
    for (int i = 0; i < p->n_pool; ++i)
        if (p->pool[i].tape != tape)
            p->pool[kept++] = p->pool[i];
    p->n_pool = kept;
    p->next_evict = 0;
}

/* ---- reading results back -------------------------------------------------- */

/* The first result beyond the size bound of the current program, or "". */
static char beyond_bound[512];

/* Reads a tensor the library returned: its shape must be one dc_tensor_new
 * accepts, and every element must be readable (AddressSanitizer checks that
 * the data is as large as the shape says). */
static bool inspect(const dc_tensor *t, const char *what)
{
    const int ndim = dc_tensor_ndim(t);
    if (ndim < 0 || ndim > DC_MAX_DIMS)
        FZ_FAIL("%s: rank %d", what, ndim);
    const dc_dtype dtype = dc_tensor_dtype(t);
    if (dtype != DC_F32 && dtype != DC_F64)
        FZ_FAIL("%s: dtype %d", what, (int)dtype);
    const int64_t *shape = dc_tensor_shape(t);
    char s[256];
    dc_tensor_shape_str(t, s, sizeof s);
    for (int d = 0; d < ndim; ++d)
        if (shape[d] < 0)
            FZ_FAIL("%s: negative size in %s", what, s);
    const int64_t sp = span(ndim, shape);
    if (sp < 0 || sp > FZ_SPAN_BOUND) {
        /* Failed at the end of the program, so that what the tensor does
         * to the calls after (a byte count that wraps) shows first. */
        if (!beyond_bound[0])
            snprintf(beyond_bound, sizeof beyond_bound, "%s returned shape %s", what, s);
        return true;
    }
    const int64_t numel = safe_numel(ndim, shape);
    if (dc_tensor_numel(t) != numel)
        FZ_FAIL("%s: numel %lld for shape %s", what, (long long)dc_tensor_numel(t), s);
    if (numel == 0)
        return true;
    const size_t bytes = (size_t)numel * dc_dtype_size(dtype);
    if (bytes <= FZ_READ_ALL_BYTES) {
        void *host = malloc(bytes);
        if (!host)
            return true;
        const dc_status st = dc_tensor_to_host(t, host, bytes);
        if (st != DC_OK)
            fz_check_error(dc_tensor_ctx(t), "dc_tensor_to_host", st);
        free(host);
        return true;
    }
    const int64_t at[4] = {0, numel - 1, numel / 2, numel / 3};
    for (int i = 0; i < 4; ++i) {
        double v;
        const dc_status st = dc_tensor_get(t, at[i], &v);
        if (st != DC_OK)
            FZ_FAIL("%s: dc_tensor_get(%lld) of %s failed: %s", what, (long long)at[i], s,
                    dc_last_error(dc_tensor_ctx(t)));
    }
    return true;
}

/* Checks an op's result: a tensor to read and keep, or NULL with a reason. */
static void result(program *p, int tape, dc_tensor *y, const char *op)
{
    if (!y) {
        if (tracing)
            fprintf(stderr, "    -> NULL, %s: %s\n", dc_status_name(dc_last_status(p->ctx)), dc_last_error(p->ctx));
        fz_check_error(p->ctx, op, dc_last_status(p->ctx));
        return;
    }
    if (dc_tensor_ctx(y) != p->ctx)
        FZ_FAIL("%s returned a tensor of another context", op);
    pool_add(p, y, tape);
    if (tracing) {
        char d[256];
        fprintf(stderr, "    -> %s\n", describe(p, y, d, sizeof d));
    }
    if (!inspect(y, op))
        pool_drop(p, y);
}

/* Traces a call that returns a status. */
static void trace_status(const program *p, dc_status st)
{
    if (tracing)
        fprintf(stderr, "    -> %s%s%s\n", dc_status_name(st), st != DC_OK ? ": " : "",
                st != DC_OK ? dc_last_error(p->ctx) : "");
}

/* A gradient has its tensor's shape and dtype (tensor.h). */
static void inspect_grads(program *p)
{
    for (int i = 0; i < p->n_pool; ++i) {
        const dc_tensor *t = p->pool[i].t;
        const dc_tensor *g = dc_tensor_grad(t);
        if (!g)
            continue;
        if (dc_tensor_ndim(g) != dc_tensor_ndim(t) || dc_tensor_dtype(g) != dc_tensor_dtype(t))
            FZ_FAIL("a gradient's rank or dtype differs from its tensor's");
        for (int d = 0; d < dc_tensor_ndim(t); ++d)
            if (dc_tensor_shape(g)[d] != dc_tensor_shape(t)[d])
                FZ_FAIL("a gradient's shape differs from its tensor's");
        (void)inspect(g, "gradient");
    }
}

/* ---- making tensors ---------------------------------------------------------- */

/* Values for a new tensor: patterns the ops care about (integers for ids
 * and targets, the special doubles), repeated over the elements. */
static void fill_values(program *p, double *v, int64_t n)
{
    const uint8_t mode = fz_u8(&p->in) % 4;
    double pattern[8];
    const int len = 1 + fz_u8(&p->in) % 8;
    const int classes = 1 + fz_u8(&p->in) % 6;
    for (int i = 0; i < len; ++i)
        pattern[i] = fz_double(&p->in);
    for (int64_t e = 0; e < n; ++e) {
        switch (mode) {
        case 0: v[e] = pattern[e % len]; break;
        case 1: v[e] = (double)(e % classes); break;              /* valid ids and targets */
        case 2: v[e] = (double)((e * 7 + 3) % (classes + 2)) - 1; /* some out of range */ break;
        default: v[e] = sin((double)e * 0.7 + pattern[0]); break;
        }
    }
}

/* The values in the tensor's dtype, as the copy functions take them
 * (malloc'd), or NULL. */
static void *host_values(const double *values, int64_t numel, dc_dtype dtype)
{
    if (!values)
        return NULL;
    void *host = malloc((size_t)numel * dc_dtype_size(dtype));
    for (int64_t e = 0; host && e < numel; ++e) {
        if (dtype == DC_F32)
            ((float *)host)[e] = (float)values[e];
        else
            ((double *)host)[e] = values[e];
    }
    return host;
}

/* The shape as the trace prints it. */
static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "%d, [", ndim);
    for (int d = 0; d < ndim && at < size; ++d)
        at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* Opcode NEW: a tensor of any shape, persistent (owned here) or on a tape,
 * in this context or (persistent only) another. */
static void op_new(program *p)
{
    const uint8_t flags = fz_u8(&p->in);
    const dc_dtype dtype = (flags & 1) ? DC_F64 : DC_F32;
    const int kind = (flags >> 1) % 4; /* 0, 1: persistent; 2, 3: tape 0, 1 */
    const bool requires_grad = flags & 8;
    const bool from_host = flags & 0x10;
    const bool other_ctx = (flags & 0xe0) == 0xe0;
    int ndim = fz_u8(&p->in) % (DC_MAX_DIMS + 2); /* DC_MAX_DIMS + 1 must be refused */
    int64_t shape[DC_MAX_DIMS + 1];
    for (int d = 0; d < ndim; ++d)
        shape[d] = fz_dim(&p->in);
    const int64_t numel = safe_numel(ndim, shape);
    const int64_t sp = span(ndim, shape);
    /* Allocate what is small or empty; ask for the rest only where the
     * library must refuse the shape without allocating. */
    const bool valid = ndim <= DC_MAX_DIMS && numel >= 0 && sp >= 0 && sp <= FZ_SPAN_BOUND;
    if (valid && numel > FZ_MAX_NEW_ELEMENTS)
        return;
    double *values = NULL;
    if (valid && numel > 0) {
        values = malloc((size_t)numel * sizeof *values);
        if (!values)
            return;
        fill_values(p, values, numel);
    }
    void *host = host_values(values, numel, dtype);
    free(values);
    char text[256];
    shape_text(ndim, shape, text, sizeof text);

    dc_tensor *t = NULL;
    dc_ctx *ctx = p->ctx;
    int tape = -1;
    const char *call;
    if (kind < 2) {
        if (p->n_persistent == FZ_MAX_PERSISTENT) {
            free(host);
            return;
        }
        if (other_ctx) {
            if (!p->other_ctx) {
                dc_ctx_options o = dc_ctx_options_default();
                o.backend = DC_BACKEND_CPU;
                o.num_threads = 1;
                p->other_ctx = dc_ctx_new(&o, NULL);
                if (!p->other_ctx)
                    FZ_FAIL("dc_ctx_new: %s", dc_last_error(NULL));
            }
            ctx = p->other_ctx;
        }
        if (from_host && host) {
            call = "dc_tensor_from_host";
            trace_call(p, -1, call, "%s%s, %s, data", other_ctx ? "other ctx, " : "", dc_dtype_name(dtype), text);
            t = dc_tensor_from_host(ctx, dtype, ndim, shape, host);
        } else {
            call = "dc_tensor_new";
            trace_call(p, -1, call, "%s%s, %s", other_ctx ? "other ctx, " : "", dc_dtype_name(dtype), text);
            t = dc_tensor_new(ctx, dtype, ndim, shape);
            if (t && host && dc_tensor_from_host_copy(t, host, (size_t)numel * dc_dtype_size(dtype)) != DC_OK)
                FZ_FAIL("dc_tensor_from_host_copy failed: %s", dc_last_error(ctx));
        }
        if (t) {
            p->persistent[p->n_persistent++] = t;
            if (requires_grad && dc_tensor_set_requires_grad(t, true) != DC_OK)
                FZ_FAIL("dc_tensor_set_requires_grad on a new tensor failed: %s", dc_last_error(ctx));
        }
    } else {
        tape = kind - 2;
        call = "dc_tape_tensor_new";
        trace_call(p, tape, call, "%s, %s, %s", dc_dtype_name(dtype), text, host ? "data" : "NULL");
        t = dc_tape_tensor_new(p->tapes[tape], dtype, ndim, shape, host);
    }
    free(host);
    if (!t) {
        if (tracing)
            fprintf(stderr, "    -> NULL, %s: %s\n", dc_status_name(dc_last_status(ctx)), dc_last_error(ctx));
        fz_check_error(ctx, call, dc_last_status(ctx));
        if (valid && dc_last_status(ctx) != DC_ERR_MEMORY)
            FZ_FAIL("%s refused a valid shape: %s", call, dc_last_error(ctx));
        return;
    }
    if (!valid)
        FZ_FAIL("%s accepted an invalid shape", call);
    /* a tensor of another context only ever reaches ops as a bad input */
    pool_add(p, t, tape);
    if (tracing) {
        char d[256];
        fprintf(stderr, "    -> %s%s\n", describe(p, t, d, sizeof d),
                requires_grad && tape < 0 ? " requires grad" : "");
    }
    if (!inspect(t, call))
        pool_drop(p, t);
}

/* ---- ops ------------------------------------------------------------------- */

/* Elements of the NumPy broadcast of the tensors' shapes; 0 when one is NULL
 * or they do not broadcast, INT64_MAX past it. */
static int64_t broadcast_numel(int n, dc_tensor *const *xs)
{
    int ndim = 0;
    int64_t shape[DC_MAX_DIMS];
    for (int i = 0; i < n; ++i) {
        if (!xs[i])
            return 0;
        if (dc_tensor_ndim(xs[i]) > ndim)
            ndim = dc_tensor_ndim(xs[i]);
    }
    for (int d = 0; d < ndim; ++d)
        shape[d] = 1;
    for (int i = 0; i < n; ++i) {
        const int nd = dc_tensor_ndim(xs[i]);
        for (int d = 0; d < nd; ++d) {
            const int64_t size = dc_tensor_shape(xs[i])[d];
            int64_t *out = &shape[ndim - nd + d];
            if (*out == 1)
                *out = size;
            else if (size != 1 && size != *out)
                return 0;
        }
    }
    const int64_t numel = safe_numel(ndim, shape);
    return numel < 0 ? INT64_MAX : numel;
}

/* Charges a call's work (elements times operands) to the program, or says
 * the call is skipped because the program's budget (FZ_MAX_WORK) would not
 * cover it. tape is where the call records (-1: nowhere). */
static bool over_budget(program *p, int tape, double work, const char *call)
{
    const double charge = tape >= 0 ? 3 * work : work;
    if ((double)p->work + charge > (double)FZ_MAX_WORK) {
        if (tracing)
            fprintf(stderr, "    skipped %s: work %.3g beyond what is left of the budget\n", call, charge);
        return true;
    }
    p->work += (int64_t)charge;
    if (tape >= 0)
        p->tape_work[tape] += (int64_t)work;
    return false;
}

/* Whether a backward pass of a tape is skipped: the first is paid for. */
static bool backward_over_budget(program *p, int tape, const char *call)
{
    if (!p->backward_paid[tape]) {
        p->backward_paid[tape] = true;
        return false;
    }
    return over_budget(p, -1, 2.0 * (double)p->tape_work[tape], call);
}

/* Whether a call whose result has `result` elements is skipped to keep the
 * program within its budget. Results beyond 2^23 elements are always made:
 * they fail to allocate (see __asan_default_options) before any work, and
 * the library must report DC_ERR_MEMORY. */
static bool too_slow_for(program *p, int tape, double result, double work, const char *call)
{
    return result <= (double)((int64_t)1 << 23) && over_budget(p, tape, work, call);
}

/* too_slow_for an elementwise call of n inputs and n_out outputs. */
static bool too_slow(program *p, int tape, int n, dc_tensor *const *xs, int n_out, const char *call)
{
    const double numel = (double)broadcast_numel(n, xs);
    return too_slow_for(p, tape, numel, numel * (n + n_out), call);
}

static void op_binary(program *p, int tape)
{
    dc_tape *t = p->tapes[tape];
    const uint8_t which = fz_u8(&p->in) % 5;
    dc_tensor *a = pick(p), *b = pick(p);
    dc_tensor *xs[2] = {a, b};
    static const char *const names[] = {"dc_op_add", "dc_op_sub", "dc_op_mul", "dc_op_div", "dc_op_pow"};
    if (too_slow(p, tape, 2, xs, 1, names[which]))
        return;
    trace_call(p, tape, names[which], NULL);
    dc_tensor *y = NULL;
    switch (which) {
    case 0: y = dc_op_add(t, a, b); break;
    case 1: y = dc_op_sub(t, a, b); break;
    case 2: y = dc_op_mul(t, a, b); break;
    case 3: y = dc_op_div(t, a, b); break;
    default: y = dc_op_pow(t, a, b); break;
    }
    result(p, tape, y, names[which]);
}

static void op_unary(program *p, int tape)
{
    dc_tape *t = p->tapes[tape];
    const uint8_t which = fz_u8(&p->in) % 9;
    dc_tensor *x = pick(p);
    static const char *const names[] = {"dc_op_neg",  "dc_op_exp",    "dc_op_log",          "dc_op_tanh",
                                        "dc_op_sigmoid", "dc_op_relu", "dc_op_affine", "dc_op_hard_sigmoid",
                                        "dc_op_step_st"};
    if (too_slow(p, tape, 1, &x, 1, names[which]))
        return;
    dc_tensor *y = NULL;
    switch (which) {
    case 0:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_neg(t, x);
        break;
    case 1:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_exp(t, x);
        break;
    case 2:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_log(t, x);
        break;
    case 3:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_tanh(t, x);
        break;
    case 4:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_sigmoid(t, x);
        break;
    case 5:
        trace_call(p, tape, names[which], NULL);
        y = dc_op_relu(t, x);
        break;
    case 6: {
        const double sc = fz_double(&p->in), sh = fz_double(&p->in);
        trace_call(p, tape, names[which], "%g, %g", sc, sh);
        y = dc_op_affine(t, x, sc, sh);
        break;
    }
    default: {
        const double arg = fz_double(&p->in);
        trace_call(p, tape, names[which], "%g", arg);
        y = which == 7 ? dc_op_hard_sigmoid(t, x, arg) : dc_op_step_st(t, x, arg);
        break;
    }
    }
    result(p, tape, y, names[which]);
}

static void op_select(program *p, int tape)
{
    dc_tensor *xs[3] = {pick(p), pick(p), pick(p)};
    if (too_slow(p, tape, 3, xs, 1, "dc_op_select"))
        return;
    trace_call(p, tape, "dc_op_select", NULL);
    result(p, tape, dc_op_select(p->tapes[tape], xs[0], xs[1], xs[2]), "dc_op_select");
}

/* "3, {0, -1, 2}" for the trace. */
static const char *ints_text(int n, const int *v, bool null, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "%d, %s", n, null ? "NULL" : "{");
    for (int i = 0; !null && i < n && at < size; ++i)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %d" : "%d", v[i]);
    if (!null && at < size)
        snprintf(buf + at, size - at, "}");
    return buf;
}

static void op_reduce(program *p, int tape)
{
    const uint8_t flags = fz_u8(&p->in);
    dc_tensor *x = pick(p);
    int n_axes = (int)(fz_u8(&p->in) % 11) - 1; /* -1 .. 9 */
    int axes[10];
    for (int i = 0; i < n_axes; ++i)
        axes[i] = fz_int(&p->in);
    const bool keepdims = flags & 2;
    /* axes NULL with n_axes > 0 must be refused too */
    const int *ap = (flags & 4) && n_axes > 0 ? NULL : axes;
    /* bit 0 a mean; else bits 3 and up pick a sum or a reduction of reduce.h */
    typedef dc_tensor *(*reduce_fn)(dc_tape *, dc_tensor *, int, const int *, bool);
    static const reduce_fn fns[] = {dc_op_sum, dc_op_prod, dc_op_max, dc_op_min, dc_op_logsumexp};
    static const char *const names[] = {"dc_op_sum", "dc_op_prod", "dc_op_max", "dc_op_min", "dc_op_logsumexp"};
    const int which = (flags >> 3) % 5;
    const char *call = (flags & 1) ? "dc_op_mean" : names[which];
    if (too_slow(p, tape, 1, &x, 0, call))
        return;
    char text[256];
    trace_call(p, tape, call, "%s, %s", ints_text(n_axes, axes, !ap, text, sizeof text), keepdims ? "true" : "false");
    if (flags & 1)
        result(p, tape, dc_op_mean(p->tapes[tape], x, n_axes, ap, keepdims), call);
    else
        result(p, tape, fns[which](p->tapes[tape], x, n_axes, ap, keepdims), call);
}

/* The multiply-adds of a @ b where the shapes match, numel(a) numel(b) / k,
 * and in *result (if not NULL) its elements, that over k. */
static double matmul_work(const dc_tensor *a, const dc_tensor *b, double *result)
{
    const int64_t k = a && b && dc_tensor_ndim(a) > 0 ? dc_tensor_shape(a)[dc_tensor_ndim(a) - 1] : 0;
    const double work = k > 0 ? (double)dc_tensor_numel(a) * (double)dc_tensor_numel(b) / (double)k : 0;
    if (result)
        *result = k > 0 ? work / (double)k : 0;
    return work;
}

static void op_matmul(program *p, int tape)
{
    dc_tensor *a = pick(p), *b = pick(p);
    double elements;
    const double work = matmul_work(a, b, &elements);
    if (too_slow_for(p, tape, elements, work, "dc_op_matmul"))
        return;
    trace_call(p, tape, "dc_op_matmul", NULL);
    result(p, tape, dc_op_matmul(p->tapes[tape], a, b), "dc_op_matmul");
}

static void op_transpose(program *p, int tape)
{
    dc_tensor *x = pick(p);
    const int a0 = fz_int(&p->in), a1 = fz_int(&p->in);
    trace_call(p, tape, "dc_op_transpose", "%d, %d", a0, a1);
    result(p, tape, dc_op_transpose(p->tapes[tape], x, a0, a1), "dc_op_transpose");
}

static void op_reshape(program *p, int tape)
{
    dc_tensor *x = pick(p);
    const uint8_t flags = fz_u8(&p->in);
    int ndim = (int)(fz_u8(&p->in) % 11) - 1; /* -1 .. 9 */
    int64_t shape[10];
    for (int d = 0; d < ndim; ++d) {
        /* the sizes of x in another grouping, -1, or any size */
        const uint8_t b = fz_u8(&p->in);
        if (b < 64 && x && dc_tensor_ndim(x) > 0)
            shape[d] = dc_tensor_dim(x, b % dc_tensor_ndim(x));
        else if (b < 96)
            shape[d] = -1;
        else
            shape[d] = fz_dim(&p->in);
    }
    const int64_t *sp = (flags & 1) && ndim > 0 ? NULL : shape;
    char text[256];
    trace_call(p, tape, "dc_op_reshape", "%s", sp ? shape_text(ndim, shape, text, sizeof text) : "NULL");
    result(p, tape, dc_op_reshape(p->tapes[tape], x, ndim, sp), "dc_op_reshape");
}

static void op_slice(program *p, int tape)
{
    dc_tensor *x = pick(p);
    const int axis = fz_int(&p->in);
    const int64_t start = fz_i64(&p->in), length = fz_i64(&p->in);
    trace_call(p, tape, "dc_op_slice", "%d, %lld, %lld", axis, (long long)start, (long long)length);
    result(p, tape, dc_op_slice(p->tapes[tape], x, axis, start, length), "dc_op_slice");
}

static void op_concat(program *p, int tape)
{
    const uint8_t b = fz_u8(&p->in);
    /* up to 64 tensors (the same one many times: concat of many empties) */
    int n = b < 240 ? b % 8 : (int)(b - 240) * 4 + 8;
    if (b == 255)
        n = -1;
    dc_tensor *xs[72];
    const int rep = fz_u8(&p->in) % 4; /* repeat each pick: long runs of one tensor */
    for (int i = 0; i < n;) {
        dc_tensor *x = pick(p);
        for (int r = 0; r <= rep * 8 && i < n; ++r)
            xs[i++] = x;
    }
    const int axis = fz_int(&p->in);
    const bool null_array = n > 0 && (b & 1) && b < 8;
    double work = 0;
    for (int i = 0; i < n; ++i)
        work += xs[i] ? (double)dc_tensor_numel(xs[i]) : 0;
    if (over_budget(p, tape, work, "dc_op_concat"))
        return;
    trace_call(p, tape, "dc_op_concat", "n %d (each pick %d times), %saxis %d", n, rep * 8 + 1,
               null_array ? "xs NULL, " : "", axis);
    result(p, tape, dc_op_concat(p->tapes[tape], n, null_array ? NULL : xs, axis), "dc_op_concat");
}

static void op_embedding(program *p, int tape)
{
    dc_tensor *table = pick(p), *ids = pick(p);
    /* a row of the table per id */
    const int nd = table ? dc_tensor_ndim(table) : 0;
    const double row = nd > 0 ? (double)dc_tensor_shape(table)[nd - 1] : 1;
    const double numel = ids ? (double)dc_tensor_numel(ids) * row : 0;
    if (too_slow_for(p, tape, numel, numel, "dc_op_embedding"))
        return;
    trace_call(p, tape, "dc_op_embedding", NULL);
    result(p, tape, dc_op_embedding(p->tapes[tape], table, ids), "dc_op_embedding");
}

static void op_cross_entropy(program *p, int tape)
{
    dc_tensor *logits = pick(p), *targets = pick(p);
    if (logits && over_budget(p, tape, 2.0 * (double)dc_tensor_numel(logits), "dc_op_cross_entropy"))
        return;
    trace_call(p, tape, "dc_op_cross_entropy", NULL);
    result(p, tape, dc_op_cross_entropy(p->tapes[tape], logits, targets), "dc_op_cross_entropy");
}

/* A broadcast function, through each of its three entry points, with
 * counts that are sometimes wrong and a policy that is sometimes unknown. */
static void op_broadcast(program *p, int tape)
{
    const uint8_t which = fz_u8(&p->in);
    const uint8_t flags = fz_u8(&p->in);
    const dc_bfn *fn = bfns[which % FZ_N_BFNS];
    int n_in = fn->n_inputs, n_out = fn->n_outputs;
    if ((flags & 0x30) == 0x30)
        n_in += (flags & 0x40) ? 1 : -1;
    if ((flags & 0x0c) == 0x0c)
        n_out += (flags & 0x80) ? 1 : -1;
    dc_tensor *in[DC_BFN_MAX_INPUTS + 1];
    for (int i = 0; i < n_in; ++i)
        in[i] = pick(p);
    dc_tensor *out[DC_BFN_MAX_OUTPUTS + 1];
    dc_status st;
    const char *call;
    if (n_in > 0 && too_slow(p, tape, n_in, in, n_out, fn->name))
        return;
    switch (flags & 3) {
    case 0:
        call = "dc_broadcast1";
        trace_call(p, tape, call, "fn %s, n_in %d", fn->name, n_in);
        out[0] = dc_broadcast1(p->tapes[tape], fn, n_in, in);
        st = out[0] ? DC_OK : dc_last_status(p->ctx);
        n_out = 1;
        break;
    case 1:
        call = "dc_broadcast";
        trace_call(p, tape, call, "fn %s, n_in %d, n_out %d", fn->name, n_in, n_out);
        st = dc_broadcast(p->tapes[tape], fn, n_in, in, n_out, out);
        break;
    default: {
        call = "dc_broadcast_policy";
        static const int policies[] = {DC_PARTIALS_STORE, DC_PARTIALS_RECOMPUTE, DC_PARTIALS_RECOMPUTE, 2, -1};
        const int policy = policies[fz_u8(&p->in) % 5];
        trace_call(p, tape, call, "fn %s, n_in %d, n_out %d, policy %s", fn->name, n_in, n_out,
                   policy == DC_PARTIALS_STORE ? "STORE" : policy == DC_PARTIALS_RECOMPUTE ? "RECOMPUTE" : "invalid");
        st = dc_broadcast_policy(p->tapes[tape], fn, n_in, in, n_out, out, (dc_partials_policy)policy);
        break;
    }
    }
    if (st != DC_OK) {
        trace_status(p, st);
        fz_check_error(p->ctx, call, st);
        return;
    }
    for (int k = 0; k < n_out; ++k) {
        if (!out[k])
            FZ_FAIL("%s succeeded with output %d NULL", call, k);
        result(p, tape, out[k], call);
    }
}

/* Opcode BACKWARD: from a tensor summed to a scalar (or as it is), or seeded
 * with an adjoint, possibly on the wrong tape. */
static void op_backward(program *p, int tape)
{
    const uint8_t flags = fz_u8(&p->in);
    dc_tensor *y = pick(p);
    dc_tape *t = p->tapes[tape];
    dc_status st;
    const char *call;
    if (backward_over_budget(p, tape, "a backward pass"))
        return;
    if (flags & 1) {
        call = "dc_backward_with";
        dc_tensor *adj = pick(p);
        if (flags & 2) {
            adj = dc_tensor_grad(adj);
            trace_call(p, tape, call, "(the last one's gradient)");
        } else {
            trace_call(p, tape, call, NULL);
        }
        st = dc_backward_with(t, y, adj);
    } else {
        call = "dc_backward";
        if ((flags & 2) && y && dc_tensor_numel(y) != 1) {
            trace_call(p, tape, "dc_op_sum", "0, NULL, false");
            y = dc_op_sum(t, y, 0, NULL, false);
            result(p, tape, y, "dc_op_sum");
            char d[256];
            snprintf(p->args, sizeof p->args, "%s", describe(p, y, d, sizeof d));
        }
        trace_call(p, tape, call, NULL);
        st = dc_backward(t, y);
    }
    trace_status(p, st);
    if (st != DC_OK)
        fz_check_error(p->ctx, call, st);
    inspect_grads(p);
}

/* Opcode TAPE: reset, recording on or off, regions, timing, statistics. */
static void op_tape(program *p, int tape)
{
    dc_tape *t = p->tapes[tape];
    switch (fz_u8(&p->in) % 5) {
    case 0:
        trace_call(p, tape, "dc_tape_reset", NULL);
        dc_tape_reset(t);
        pool_drop_tape(p, tape);
        p->tape_work[tape] = 0;
        p->backward_paid[tape] = false;
        break;
    case 1: {
        const bool on = fz_bit(&p->in);
        trace_call(p, tape, "dc_tape_set_recording", "%s", on ? "true" : "false");
        dc_tape_set_recording(t, on);
        break;
    }
    case 2: {
        const int region = fz_int(&p->in);
        trace_call(p, tape, "dc_tape_set_region", "%d", region);
        const int was = dc_tape_set_region(t, region);
        if (was < 0 || was >= DC_TAPE_REGIONS)
            FZ_FAIL("dc_tape_set_region returned region %d", was);
        if ((region < 0 || region >= DC_TAPE_REGIONS) && dc_last_error(p->ctx)[0] == '\0')
            FZ_FAIL("dc_tape_set_region(%d) left no message", region);
        break;
    }
    case 3: {
        const bool on = fz_bit(&p->in);
        trace_call(p, tape, "dc_tape_set_timing", "%s", on ? "true" : "false");
        dc_tape_set_timing(t, on);
        break;
    }
    default:
        if (dc_tape_bytes_in_use(t) > dc_tape_reserved_bytes(t) && dc_tape_reserved_bytes(t) > 0)
            FZ_FAIL("a tape uses more bytes than it reserved");
        (void)dc_tape_node_count(t);
        (void)dc_tape_peak_bytes(t);
        (void)dc_tape_region_seconds(t, fz_int(&p->in) & 7);
        if (dc_tape_ctx(t) != p->ctx)
            FZ_FAIL("dc_tape_ctx is not the tape's context");
        (void)dc_tape_is_recording(t);
        dc_tape_clear_timing(t);
        break;
    }
}

/* Opcode TENSOR: the calls on one tensor (values, gradient flag, copies). */
static void op_tensor(program *p)
{
    const uint8_t which = fz_u8(&p->in) % 10;
    dc_tensor *x = pick(p);
    if (!x)
        return;
    dc_ctx *ctx = dc_tensor_ctx(x);
    if (which == 9) {
        /* a name (it labels the tensor in error messages), cut at 31 bytes */
        static const char *const names[] = {"", "x", "a name of more than thirty-one bytes, cut", NULL};
        const char *name = names[fz_u8(&p->in) % 4];
        trace_call(p, -1, "dc_tensor_set_name", "\"%s\"", name ? name : "(NULL)");
        dc_tensor_set_name(x, name);
        if (strlen(dc_tensor_name(x)) > 31)
            FZ_FAIL("dc_tensor_name is longer than 31 bytes");
        if (!dc_tensor_data(x) && dc_tensor_numel(x) > 0)
            FZ_FAIL("a tensor with elements has no data");
        const int64_t *strides = dc_tensor_strides(x);
        for (int d = 0; d < dc_tensor_ndim(x); ++d)
            if (strides[d] < 0)
                FZ_FAIL("negative stride %lld", (long long)strides[d]);
        (void)dc_tensor_is_contiguous(x);
        return;
    }
    dc_status st = DC_OK;
    const char *call = "";
    double v;
    switch (which) {
    case 0: {
        call = "dc_tensor_get";
        const int64_t index = fz_i64(&p->in);
        trace_call(p, -1, call, "%lld", (long long)index);
        st = dc_tensor_get(x, index, &v);
        break;
    }
    case 1:
        call = "dc_tensor_item";
        trace_call(p, -1, call, NULL);
        st = dc_tensor_item(x, &v);
        break;
    case 2: {
        call = "dc_tensor_set";
        const int64_t index = fz_i64(&p->in);
        const double value = fz_double(&p->in);
        trace_call(p, -1, call, "%lld, %g", (long long)index, value);
        st = dc_tensor_set(x, index, value);
        break;
    }
    case 3: {
        call = "dc_tensor_fill";
        const double value = fz_double(&p->in);
        trace_call(p, -1, call, "%g", value);
        st = dc_tensor_fill(x, value);
        break;
    }
    case 4: {
        call = "dc_tensor_fill_uniform";
        const double lo = fz_double(&p->in), hi = fz_double(&p->in);
        trace_call(p, -1, call, "%g, %g", lo, hi);
        st = dc_tensor_fill_uniform(x, lo, hi);
        break;
    }
    case 5: {
        call = "dc_tensor_fill_normal";
        const double mean = fz_double(&p->in), stddev = fz_double(&p->in);
        trace_call(p, -1, call, "%g, %g", mean, stddev);
        st = dc_tensor_fill_normal(x, mean, stddev);
        break;
    }
    case 6: {
        call = "dc_tensor_set_requires_grad";
        const bool on = fz_bit(&p->in);
        trace_call(p, -1, call, "%s", on ? "true" : "false");
        st = dc_tensor_set_requires_grad(x, on);
        break;
    }
    case 7:
        trace_call(p, -1, "dc_tensor_zero_grad", NULL);
        dc_tensor_zero_grad(x);
        break;
    default: {
        call = "dc_tensor_copy";
        dc_tensor *src = pick(p);
        if (!src)
            return;
        trace_call(p, -1, call, NULL);
        st = dc_tensor_copy(x, src);
        break;
    }
    }
    if (tracing && which != 7) {
        if (st != DC_OK)
            fprintf(stderr, "    -> %s: %s\n", dc_status_name(st), dc_last_error(ctx));
        else
            fprintf(stderr, "    -> DC_OK\n");
    }
    if (st != DC_OK)
        fz_check_error(ctx, call, st);
}

/* Opcode OPTIM: gradient clipping and an optimizer step over some tensors
 * (tape tensors among them must be refused by the optimizers). */
static void op_optim(program *p)
{
    const uint8_t flags = fz_u8(&p->in);
    const int n = fz_u8(&p->in) % 5;
    dc_tensor *params[4];
    for (int i = 0; i < n; ++i) {
        params[i] = pick(p);
        if (!params[i])
            return; /* a NULL parameter has no context to report into */
    }
    if (n == 0)
        return;
    dc_status st;
    if (flags & 1) {
        double norm;
        const double max_norm = fz_double(&p->in);
        trace_call(p, -1, "dc_clip_grad_norm", "%g", max_norm);
        st = dc_clip_grad_norm(p->ctx, n, params, max_norm, (flags & 2) ? &norm : NULL);
        trace_status(p, st);
        if (st != DC_OK)
            fz_check_error(p->ctx, "dc_clip_grad_norm", st);
        return;
    }
    dc_optimizer *opt;
    if (flags & 2) {
        dc_adam_options o = dc_adam_options_default();
        o.lr = fz_double(&p->in);
        o.weight_decay = (flags & 4) ? fz_double(&p->in) : 0.0;
        trace_call(p, -1, "dc_optimizer_adam", "lr %g, weight_decay %g", o.lr, o.weight_decay);
        opt = dc_optimizer_adam(p->ctx, n, params, &o);
    } else {
        const double lr = fz_double(&p->in), momentum = fz_double(&p->in);
        trace_call(p, -1, "dc_optimizer_sgd", "lr %g, momentum %g", lr, momentum);
        opt = dc_optimizer_sgd(p->ctx, n, params, lr, momentum);
    }
    if (!opt) {
        trace_status(p, dc_last_status(p->ctx));
        fz_check_error(p->ctx, "dc_optimizer_adam/sgd", dc_last_status(p->ctx));
        return;
    }
    for (int k = 0; k < 2; ++k) {
        st = dc_optimizer_step(opt);
        trace_status(p, st);
        if (st != DC_OK)
            fz_check_error(p->ctx, "dc_optimizer_step", st);
        /* a schedule's new rate, which may be refused (negative, infinite,
         * NaN) */
        const double was = dc_optimizer_lr(opt), lr = fz_double(&p->in);
        dc_clear_error(p->ctx);
        dc_optimizer_set_lr(opt, lr);
        const bool refused = !(lr >= 0 && lr < INFINITY);
        if (refused && (dc_optimizer_lr(opt) != was || dc_last_error(p->ctx)[0] == '\0'))
            FZ_FAIL("dc_optimizer_set_lr(%g) changed the rate or left no message", lr);
        if (!refused && dc_optimizer_lr(opt) != lr)
            FZ_FAIL("dc_optimizer_set_lr(%g) did not set the rate", lr);
    }
    dc_optimizer_zero_grad(opt);
    dc_optimizer_free(opt);
}

/* The loss dc_gradcheck differentiates: the sum of one op (picked by the
 * input) of the inputs. */
static dc_tensor *gradcheck_loss(dc_tape *tape, dc_tensor *const *inputs, void *user)
{
    dc_tensor *y;
    switch (*(const int *)user) {
    case 0: y = dc_op_tanh(tape, inputs[0]); break;
    case 1: y = dc_op_mul(tape, inputs[0], inputs[1]); break;
    case 2: y = dc_op_matmul(tape, inputs[0], inputs[1]); break;
    default: y = dc_broadcast1(tape, DC_BFN_REF(prod_sign_2), 2, inputs); break;
    }
    return dc_op_sum(tape, y, 0, NULL, false);
}

/* The work of a gradient check of gradcheck_loss: two evaluations of the
 * loss for each element checked (max_per_input per input, 0 all of them,
 * negative refused at once), and one with its backward pass. */
static double gradcheck_work(int which, int n, dc_tensor *const *inputs, int64_t max_per_input)
{
    if (max_per_input < 0)
        return 0;
    double checked = 1;
    for (int i = 0; i < n; ++i) {
        const int64_t numel = dc_tensor_numel(inputs[i]);
        checked += (double)(max_per_input == 0 || numel < max_per_input ? numel : max_per_input);
    }
    double loss = (double)broadcast_numel(n, inputs) * (n + 1);
    if (which == 2)
        loss = matmul_work(inputs[0], inputs[1], NULL);
    return 2 * checked * loss;
}

/* Opcode GRADCHECK: dc_gradcheck on tensors of the pool (tape tensors and
 * float32 ones must be refused), with options that may be out of range. */
static void op_gradcheck(program *p)
{
    int which = fz_u8(&p->in) % 4;
    const int n = which == 0 ? 1 : 2;
    dc_tensor *inputs[2];
    for (int i = 0; i < n; ++i) {
        inputs[i] = pick(p);
        if (!inputs[i])
            return; /* a NULL input is the caller's bug: gradcheck dereferences the array */
    }
    dc_gradcheck_options o = dc_gradcheck_options_default();
    const uint8_t flags = fz_u8(&p->in);
    if (flags & 1)
        o.eps = fz_double(&p->in);
    if (flags & 2)
        o.atol = fz_double(&p->in);
    if (flags & 4)
        o.rtol = fz_double(&p->in);
    /* a few elements per input: each costs two evaluations of the loss */
    o.max_per_input = (flags & 8) ? -1 : 1 + fz_u8(&p->in) % 4;
    if (over_budget(p, -1, gradcheck_work(which, n, inputs, o.max_per_input), "dc_gradcheck"))
        return;
    dc_gradcheck_report report;
    trace_call(p, -1, "dc_gradcheck", "loss %d, eps %g, atol %g, rtol %g, max_per_input %lld", which, o.eps, o.atol,
               o.rtol, (long long)o.max_per_input);
    const dc_status st = dc_gradcheck(p->ctx, gradcheck_loss, &which, n, inputs, &o, (flags & 16) ? NULL : &report);
    trace_status(p, st);
    if (st != DC_OK)
        fz_check_error(p->ctx, "dc_gradcheck", st);
    inspect_grads(p);
}

/* ---- the program ------------------------------------------------------------ */

static void run_program(program *p)
{
    for (int step = 0; step < FZ_MAX_STEPS && fz_more(&p->in); ++step) {
        if (dc_tape_bytes_in_use(p->tapes[0]) + dc_tape_bytes_in_use(p->tapes[1]) > FZ_MAX_TAPE_BYTES)
            break;
        const uint8_t op = fz_u8(&p->in);
        /* each call's error is its own: a stale message cannot stand in for
         * a missing one */
        dc_clear_error(p->ctx);
        p->args[0] = '\0';
        const int tape = (op >> 7) & 1; /* the top bit picks the tape */
        switch (op & 0x7f) {
        case 0:
        case 1:
        case 2: op_new(p); break;
        case 3: {
            const dc_dtype dtype = fz_bit(&p->in) ? DC_F64 : DC_F32;
            const double value = fz_double(&p->in);
            trace_call(p, tape, "dc_tape_scalar", "%s, %g", dc_dtype_name(dtype), value);
            result(p, tape, dc_tape_scalar(p->tapes[tape], dtype, value), "dc_tape_scalar");
            break;
        }
        case 4: op_binary(p, tape); break;
        case 5: op_unary(p, tape); break;
        case 6: op_select(p, tape); break;
        case 7: op_reduce(p, tape); break;
        case 8: op_matmul(p, tape); break;
        case 9: op_transpose(p, tape); break;
        case 10: op_reshape(p, tape); break;
        case 11: op_slice(p, tape); break;
        case 12: op_concat(p, tape); break;
        case 13: op_embedding(p, tape); break;
        case 14: op_cross_entropy(p, tape); break;
        case 15:
        case 16: op_broadcast(p, tape); break;
        case 17: op_backward(p, tape); break;
        case 18: op_tape(p, tape); break;
        case 19: op_tensor(p); break;
        case 20: op_optim(p); break;
        case 21: op_gradcheck(p); break;
        default: break; /* unused opcodes: a mutation that lands here is a no-op */
        }
    }
    /* Last, the loss of each tape: the newest tensor recorded on it, summed
     * to a scalar. */
    for (int tape = 0; tape < 2; ++tape) {
        for (int i = p->n_pool - 1; i >= 0; --i) {
            if (p->pool[i].tape != tape || !dc_tensor_requires_grad(p->pool[i].t))
                continue;
            if (backward_over_budget(p, tape, "the loss's backward pass"))
                break;
            char d[256];
            snprintf(p->args, sizeof p->args, "%s", describe(p, p->pool[i].t, d, sizeof d));
            trace_call(p, tape, "dc_op_sum", "0, NULL, false");
            dc_tensor *loss = dc_op_sum(p->tapes[tape], p->pool[i].t, 0, NULL, false);
            result(p, tape, loss, "dc_op_sum");
            snprintf(p->args, sizeof p->args, "%s", describe(p, loss, d, sizeof d));
            trace_call(p, tape, "dc_backward", NULL);
            const dc_status st = dc_backward(p->tapes[tape], loss);
            trace_status(p, st);
            if (st != DC_OK)
                fz_check_error(p->ctx, "dc_backward", st);
            break;
        }
    }
    inspect_grads(p);
}

/* The contexts (one thread, two threads) and their two tapes, made once:
 * each input starts from reset tapes. A tape's first data block is 16 MiB,
 * and making it for every input, with its AddressSanitizer shadow, took
 * over half of the run. A reset poisons the blocks again (src/arena.c), so
 * an access beyond a tensor is seen as in a new tape. */
static dc_ctx *contexts[2];
static dc_tape *context_tapes[2][2];

static void free_contexts(void)
{
    for (int c = 0; c < 2; ++c) {
        dc_tape_free(context_tapes[c][0]);
        dc_tape_free(context_tapes[c][1]);
        dc_ctx_free(contexts[c]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    program p;
    memset(&p, 0, sizeof p);
    p.in.p = data;
    p.in.n = size;
    const int c = (int)(size & 1); /* both the serial and the parallel loops */
    if (!contexts[c]) {
        dc_ctx_options o = dc_ctx_options_default();
        o.backend = DC_BACKEND_CPU;
        o.num_threads = 1 + c;
        /* The two-thread context also fills new tape memory and gradients
         * with NaNs (the library's DC_POISON, read here): its paths run too. */
        if (c == 1)
            setenv("DC_POISON", "1", 1);
        else
            unsetenv("DC_POISON");
        contexts[c] = dc_ctx_new(&o, NULL);
        if (!contexts[c])
            FZ_FAIL("dc_ctx_new failed: %s", dc_last_error(NULL));
        context_tapes[c][0] = dc_tape_new(contexts[c]);
        context_tapes[c][1] = dc_tape_new(contexts[c]);
        if (!context_tapes[c][0] || !context_tapes[c][1])
            FZ_FAIL("dc_tape_new failed");
        static bool registered;
        if (!registered)
            atexit(free_contexts);
        registered = true;
    }
    p.ctx = contexts[c];
    dc_ctx_seed(p.ctx, 1);
    dc_clear_error(p.ctx);
    for (int t = 0; t < 2; ++t) {
        p.tapes[t] = context_tapes[c][t];
        dc_tape_reset(p.tapes[t]);
        dc_tape_set_recording(p.tapes[t], true);
        dc_tape_set_region(p.tapes[t], 0);
        dc_tape_set_timing(p.tapes[t], false);
        dc_tape_clear_timing(p.tapes[t]);
    }
    beyond_bound[0] = '\0';
    run_program(&p);
    for (int i = 0; i < p.n_persistent; ++i)
        dc_tensor_free(p.persistent[i]);
    dc_ctx_free(p.other_ctx);
    /* A tape keeps its blocks over resets: one that grew for a large
     * program is made again, so that the run's memory stays bounded. */
    for (int t = 0; t < 2; ++t) {
        if (dc_tape_reserved_bytes(context_tapes[c][t]) <= FZ_KEEP_TAPE_BYTES)
            continue;
        dc_tape_free(context_tapes[c][t]);
        context_tapes[c][t] = dc_tape_new(contexts[c]);
        if (!context_tapes[c][t])
            FZ_FAIL("dc_tape_new failed");
    }
    if (beyond_bound[0])
        FZ_FAIL("%s, beyond the size bound of dc_tensor_new", beyond_bound);
    return 0;
}
