/* Gradient check: backprop against central differences in float64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

dc_gradcheck_options dc_gradcheck_options_default(void)
{
    dc_gradcheck_options o = {1e-6, 1e-8, 1e-6, 0};
    return o;
}

/* fn's loss on tape, or its failure: the status of the error that made it
 * return NULL (DC_ERR_ARG where it reported none), its message kept. */
static dc_tensor *call_fn(dc_ctx *ctx, dc_tape *tape, dc_gradcheck_fn fn, void *user, dc_tensor *const *inputs,
                          dc_status *st)
{
    dc_clear_error(ctx);
    dc_tensor *l = fn(tape, inputs, user);
    if (l)
        return l;
    const dc_status why = dc_last_status(ctx);
    *st = why != DC_OK ? dc_error(ctx, why, "dc_gradcheck: the function returned NULL: %s", ctx->error)
                       : dc_error(ctx, DC_ERR_ARG, "dc_gradcheck: the function returned NULL and reported no error");
    return NULL;
}

static dc_status eval_loss(dc_ctx *ctx, dc_tape *tape, dc_gradcheck_fn fn, void *user, dc_tensor *const *inputs,
                           double *loss)
{
    dc_tape_reset(tape);
    dc_status st = DC_OK;
    dc_tensor *l = call_fn(ctx, tape, fn, user, inputs, &st);
    return l ? dc_tensor_item(l, loss) : st;
}

dc_status dc_gradcheck(dc_ctx *ctx, dc_gradcheck_fn fn, void *user, int n_inputs, dc_tensor *const *inputs,
                       const dc_gradcheck_options *options, dc_gradcheck_report *report)
{
    if (!ctx)
        return DC_ERR_ARG;
    if (!fn || n_inputs <= 0 || !inputs)
        return dc_error(ctx, DC_ERR_ARG, "dc_gradcheck: needs a function and at least one input");
    for (int i = 0; i < n_inputs; ++i) {
        if (!inputs[i])
            return dc_error(ctx, DC_ERR_ARG, "dc_gradcheck: input %d is NULL", i);
        if (inputs[i]->dtype != DC_F64)
            return dc_error(ctx, DC_ERR_DTYPE, "dc_gradcheck: input %d is %s; central differences need f64", i,
                            dc_dtype_name(inputs[i]->dtype));
        if (inputs[i]->tape)
            return dc_error(ctx, DC_ERR_ARG, "dc_gradcheck: input %d is a tape tensor; give persistent tensors", i);
    }
    const dc_gradcheck_options o = options ? *options : dc_gradcheck_options_default();
    const char *bad_option = !(o.eps > 0 && o.eps < INFINITY) ? "eps"
                             : !(o.atol >= 0)                 ? "atol"
                             : !(o.rtol >= 0)                 ? "rtol"
                             : o.max_per_input < 0            ? "max_per_input"
                                                              : NULL;
    if (bad_option)
        return dc_error(ctx, DC_ERR_ARG,
                        "dc_gradcheck: option %s is out of range (eps %g must be finite and positive, atol %g, "
                        "rtol %g and max_per_input %lld not negative)",
                        bad_option, o.eps, o.atol, o.rtol, (long long)o.max_per_input);
    dc_gradcheck_report r;
    memset(&r, 0, sizeof r);
    r.worst_input = -1;
    r.worst_index = -1;

    dc_tape *tape = dc_tape_new(ctx);
    if (!tape)
        return DC_ERR_MEMORY;
    double **analytic = calloc((size_t)n_inputs, sizeof *analytic);
    dc_status st = analytic ? DC_OK : DC_ERR_MEMORY;
    for (int i = 0; i < n_inputs && st == DC_OK; ++i)
        dc_tensor_zero_grad(inputs[i]);
    dc_tensor *loss = st == DC_OK ? call_fn(ctx, tape, fn, user, inputs, &st) : NULL;
    if (st == DC_OK)
        st = dc_backward(tape, loss);
    for (int i = 0; i < n_inputs && st == DC_OK; ++i) {
        const dc_tensor *t = inputs[i];
        analytic[i] = calloc((size_t)(t->numel ? t->numel : 1), sizeof(double));
        if (!analytic[i]) {
            st = DC_ERR_MEMORY;
            break;
        }
        const dc_tensor *g = dc_tensor_grad(t);
        if (g)
            st = dc_tensor_to_host(g, analytic[i], (size_t)t->numel * sizeof(double));
    }

    double worst_excess = -INFINITY;
    bool was = dc_tape_set_recording(tape, false);
    for (int i = 0; i < n_inputs && st == DC_OK; ++i) {
        dc_tensor *t = inputs[i];
        if (!t->requires_grad)
            continue;
        const int64_t n = t->numel;
        /* element j * n / count for j < count: at most max_per_input, spread evenly */
        const int64_t count = (o.max_per_input > 0 && n > o.max_per_input) ? o.max_per_input : n;
        for (int64_t j = 0; j < count && st == DC_OK; ++j) {
            const int64_t e = j * (n / count) + j * (n % count) / count; /* j * n / count */
            double orig, lp, lm;
            st = dc_tensor_get(t, e, &orig);
            if (st == DC_OK)
                st = dc_tensor_set(t, e, orig + o.eps);
            if (st == DC_OK)
                st = eval_loss(ctx, tape, fn, user, inputs, &lp);
            if (st == DC_OK)
                st = dc_tensor_set(t, e, orig - o.eps);
            if (st == DC_OK)
                st = eval_loss(ctx, tape, fn, user, inputs, &lm);
            dc_tensor_set(t, e, orig);
            if (st != DC_OK)
                break;
            const double num = (lp - lm) / (2.0 * o.eps);
            const double b = analytic[i][e];
            /* the same infinity both ways agrees (inf - inf is NaN) */
            const double err = b == num ? 0.0 : fabs(b - num);
            const double scale = fmax(fabs(b), fabs(num));
            const double excess = err - (o.atol + o.rtol * scale);
            r.checked++;
            if (err > r.max_abs_err || isnan(err))
                r.max_abs_err = err;
            if (scale > 0 && err / scale > r.max_rel_err)
                r.max_rel_err = err / scale;
            /* the first NaN stands as the worst: nothing exceeds it */
            if (excess > worst_excess || (isnan(excess) && worst_excess != INFINITY)) {
                worst_excess = isnan(excess) ? INFINITY : excess;
                r.worst_input = i;
                r.worst_index = e;
                r.worst_backprop = b;
                r.worst_numeric = num;
            }
        }
    }
    dc_tape_set_recording(tape, was);
    if (st == DC_OK && worst_excess > 0)
        st = dc_error(ctx, DC_ERR_MISMATCH,
                      "dc_gradcheck: input %d element %lld: backprop %.17g, central difference %.17g "
                      "(abs error %.3g, tolerance %.3g + %.3g * magnitude)",
                      r.worst_input, (long long)r.worst_index, r.worst_backprop, r.worst_numeric,
                      fabs(r.worst_backprop - r.worst_numeric), o.atol, o.rtol);
    if (report)
        *report = r;
    for (int i = 0; analytic && i < n_inputs; ++i)
        free(analytic[i]);
    free(analytic);
    dc_tape_free(tape);
    return st;
}
