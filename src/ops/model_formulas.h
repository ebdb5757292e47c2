/* The per-element formulas of the model ops and the optimizers, written once
 * for the CPU (cross_entropy.c, src/optim.c) and CUDA (src/cuda/nn.cu), as
 * src/engine/kernel_formulas.h does for the elementwise kernels. Included
 * after dual/scalar_math.h with DC_S (float or double) and DC_SFX (f32 or
 * f64) defined. No include guard: included once per scalar type. */

#define DC_MF(name) DC_PP_CAT(DC_PP_CAT(dc_mf_, name), DC_PP_CAT(_, DC_SFX))
#define DC_MF_MATH(fn) DC_PP_CAT(DC_PP_CAT(dc_, fn), DC_PP_CAT(_, DC_SFX))

/* A term of a softmax row's denominator: exp(l - m), m the row's largest
 * logit (so the exponent is at most 0). */
DC_INLINE DC_HD DC_S DC_MF(softmax_term)(DC_S l, DC_S m) { return DC_MF_MATH(exp)(l - m); }

/* A row's loss, -log softmax at its target's logit lt, from the row's
 * largest logit m and the log of its sum of terms ls: (m - lt) + ls, in
 * double. Not lse - lt with lse = m + ls: where |m| is large against ls,
 * m + ls rounds to m (two logits of 1e30 gave a loss of 0, not log 2). */
DC_INLINE DC_HD double DC_MF(cross_entropy_loss)(DC_S lt, double m, double ls) { return ((double)m - (double)lt) + ls; }

/* d loss / d logit of mean cross entropy: scale * (softmax - [target]),
 * with scale the loss's adjoint over the number of rows, the softmax
 * exp((l - m) - ls) from the row's m and ls as above; l - m in double. */
DC_INLINE DC_HD DC_S DC_MF(cross_entropy_grad)(DC_S l, double m, double ls, bool is_target, DC_S scale)
{
    return scale * (DC_MF_MATH(exp)((DC_S)(((double)l - m) - ls)) - (is_target ? (DC_S)1 : (DC_S)0));
}

/* One Adam step of one element (decoupled weight decay): the moments
 * updated in place, the new weight returned. lr_t and eps_t carry the bias
 * corrections. */
DC_INLINE DC_HD DC_S DC_MF(adam)(DC_S w, DC_S g, DC_S *m, DC_S *v, DC_S lr_t, DC_S b1, DC_S b2, DC_S eps_t,
                                 DC_S decay)
{
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    return w - (lr_t * *m / (DC_MF_MATH(sqrt)(*v) + eps_t) + decay * w);
}

/* One step of SGD with momentum of one element: the momentum updated in
 * place, the new weight returned. */
DC_INLINE DC_HD DC_S DC_MF(sgd)(DC_S w, DC_S g, DC_S *buf, DC_S lr, DC_S mu)
{
    *buf = mu * *buf + g;
    return w - lr * *buf;
}

#undef DC_MF_MATH
