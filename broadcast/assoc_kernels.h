/* The work items of an associative operator's launches (include/dualcast/
 * assoc_abi.h), written once for the CPU and CUDA instantiations: in the
 * primal pass a piece of a scan, in the dual pass an element of a
 * vector-Jacobian product and a row of a scan's adjoint. Each calls the
 * operator's body (dc_assoc_body<pass>) inline.
 *
 * No include guard: included after the body in each pass, with DC_BFN_PASS
 * and the pass's language (bfn_dsl_primal.h or bfn_dsl_dual.h) defined;
 * DC_BFN_DUAL is defined in the dual pass only. */

#define DC_ASSOC_K DC_BFN_ID(dc_assoc_k)
#define DC_ASSOC_BODY DC_BFN_ID(dc_assoc_body)
#define DC_ASSOC_NEUTRAL DC_BFN_ID(dc_assoc_neutral)

#if !defined(DC_BFN_DUAL)

/* One step of a scan at element `at`: c = c (+) x[at] (x[at] (+) c in
 * reverse), y[at] the state before (exclusive) or after. */
#define DC_ASSOC_SCAN_STEP(c, at)                                                                  \
    {                                                                                              \
        dc_var a_[DC_ASSOC_K], o_[DC_ASSOC_K];                                                     \
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)                                             \
            a_[f] = x[f][at];                                                                      \
        if (reverse)                                                                               \
            DC_ASSOC_BODY(a_, c, o_);                                                              \
        else                                                                                       \
            DC_ASSOC_BODY(c, a_, o_);                                                              \
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)                                             \
        {                                                                                          \
            if (write)                                                                             \
                y[f][at] = exclusive ? c[f] : o_[f];                                               \
            c[f] = o_[f];                                                                          \
        }                                                                                          \
    }

/* Lanes [lane0, lane1) of one piece of a scan launch. One lane is walked
 * with its running state in registers; several are walked together, step
 * by step, their states in the carry array, so that each step reads and
 * writes contiguous lanes. Both combine every lane's elements in order. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_scan_piece_as)(const dc_assoc_scan_launch *L, int64_t piece, int64_t lane0,
                                                       int64_t lane1, const int reverse, const int exclusive,
                                                       const int write)
{
    const int from_neutral = (L->flags & DC_ASSOC_FROM_NEUTRAL) != 0;
    const int64_t inner = L->inner;
    const dc_real *x[DC_ASSOC_K];
    dc_real *y[DC_ASSOC_K], *carry[DC_ASSOC_K];
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
    {
        x[f] = (const dc_real *)L->x[f];
        y[f] = (dc_real *)L->y[f];
        carry[f] = (dc_real *)L->carry[f] + piece * inner;
    }
    /* step s of the piece lies at row (first + s) of the rows, or at row
     * seg_rows[first + s] in a segment */
    const int64_t *rows = L->seg_start ? L->seg_rows : 0;
    int64_t first, count;
    if (L->seg_start) {
        first = L->seg_start[piece];
        count = L->seg_start[piece + 1] - first;
    } else {
        const int64_t n_chunks = L->len > 0 ? (L->len + L->chunk - 1) / L->chunk : 1;
        const int64_t o = piece / n_chunks, c = piece % n_chunks;
        first = o * L->len + c * L->chunk;
        count = L->len - c * L->chunk < L->chunk ? L->len - c * L->chunk : L->chunk;
    }
    if (lane1 - lane0 == 1) {
        dc_var c[DC_ASSOC_K];
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            c[f] = from_neutral ? DC_ASSOC_NEUTRAL(f) : carry[f][lane0];
        for (int64_t s = 0; s < count; ++s) {
            const int64_t step = first + (reverse ? count - 1 - s : s);
            const int64_t at = (rows ? rows[step] : step) * inner + lane0;
            DC_ASSOC_SCAN_STEP(c, at)
        }
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            carry[f][lane0] = c[f];
        return;
    }
    if (from_neutral)
        for (int64_t i = lane0; i < lane1; ++i)
            DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
                carry[f][i] = DC_ASSOC_NEUTRAL(f);
    for (int64_t s = 0; s < count; ++s) {
        const int64_t step = first + (reverse ? count - 1 - s : s);
        const int64_t row = (rows ? rows[step] : step) * inner;
        for (int64_t i = lane0; i < lane1; ++i) {
            dc_var c[DC_ASSOC_K];
            DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
                c[f] = carry[f][i];
            DC_ASSOC_SCAN_STEP(c, row + i)
            DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
                carry[f][i] = c[f];
        }
    }
}

/* Calls fn(args..., reverse, exclusive, write) with the launch's flags as
 * constants, one call for each combination of them, so that each inlined
 * copy of fn's loops has no test of them: the loops unswitched by hand.
 * gcc's own unswitching, raised by --param=max-unswitch-insns and
 * max-unswitch-level for the broadcast kernels, did this too, and made an
 * operator's units slow to compile (on a 2-core Xeon, gcc 12 -O3: the
 * 2x2-matrix product's float32 unit 30.8 s, against 11.1 s now; the moving
 * average with resets 27.8 against 5.6; linrec 8.3 against 4.1). Without
 * either, the linear recurrence's primal scan of 10^6 float32 took
 * 1.07-1.38 ms against 0.88-0.98, its reduction of 10^7 3.66-3.71 against
 * 3.26-3.45 (three alternating runs on a 2-core AMD EPYC). */
#if defined(__CUDACC__)
/* (On CUDA one copy: a branch on a flag that every thread takes alike
 * costs little there.) */
#define DC_ASSOC_BY_FLAGS(L, fn, ...)                                                              \
    fn(__VA_ARGS__, ((L)->flags & DC_ASSOC_REVERSE) != 0, ((L)->flags & DC_ASSOC_EXCLUSIVE) != 0, \
       (L)->y[0] != 0)
#else
#define DC_ASSOC_BY_FLAGS(L, fn, ...)                                                              \
    do {                                                                                           \
        const int r_ = ((L)->flags & DC_ASSOC_REVERSE) != 0;                                       \
        const int e_ = ((L)->flags & DC_ASSOC_EXCLUSIVE) != 0;                                     \
        const int w_ = (L)->y[0] != 0;                                                             \
        if (r_ && e_ && w_)                                                                        \
            fn(__VA_ARGS__, 1, 1, 1);                                                              \
        else if (r_ && e_)                                                                         \
            fn(__VA_ARGS__, 1, 1, 0);                                                              \
        else if (r_ && w_)                                                                         \
            fn(__VA_ARGS__, 1, 0, 1);                                                              \
        else if (r_)                                                                               \
            fn(__VA_ARGS__, 1, 0, 0);                                                              \
        else if (e_ && w_)                                                                         \
            fn(__VA_ARGS__, 0, 1, 1);                                                              \
        else if (e_)                                                                               \
            fn(__VA_ARGS__, 0, 1, 0);                                                              \
        else if (w_)                                                                               \
            fn(__VA_ARGS__, 0, 0, 1);                                                              \
        else                                                                                       \
            fn(__VA_ARGS__, 0, 0, 0);                                                              \
    } while (0)
#endif

/* dc_assoc_scan_piece_as with the launch's flags. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_scan_piece)(const dc_assoc_scan_launch *L, int64_t piece, int64_t lane0,
                                                    int64_t lane1)
{
    DC_ASSOC_BY_FLAGS(L, DC_BFN_ID(dc_assoc_scan_piece_as), L, piece, lane0, lane1);
}

/* Pieces that a CPU work item walks together (dc_assoc_scan_group). */
#ifndef DC_ASSOC_GROUP
#define DC_ASSOC_GROUP 8
#endif

/* Whether pieces [p0, p0 + DC_ASSOC_GROUP) of a launch suit
 * dc_assoc_scan_group: one lane, rows not segments, and every piece a
 * whole chunk long (a group may span rows: none of its pieces may be a
 * row's short last one). With y written too: the pieces' streams lie a
 * chunk of 1008 elements apart, not 1024, and share no cache sets (at 1024
 * the grouped writes were slower than one piece at a time; at 1008 the
 * linear recurrence's primal scan of 10^6 float32 took 0.74 ms, against
 * 1.08 a piece at a time, on the 2-core Xeon of bench/RESULTS.md). */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_scan_group_fits)(const dc_assoc_scan_launch *L, int64_t p0)
{
    if (L->inner != 1 || L->seg_start || L->len <= 0)
        return 0;
    if (L->len % L->chunk == 0)
        return 1;
    const int64_t n_chunks = (L->len + L->chunk - 1) / L->chunk;
    for (int g = 0; g < DC_ASSOC_GROUP; ++g)
        if ((p0 + g) % n_chunks == n_chunks - 1)
            return 0;
    return 1;
}

/* Pieces [p0, p0 + DC_ASSOC_GROUP) of a launch that suits them
 * (dc_assoc_scan_group_fits), walked together step by step so that their
 * independent chains of operations overlap; each piece combines the same
 * elements in the same order as dc_assoc_scan_piece, to the same bits. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_scan_group_as)(const dc_assoc_scan_launch *L, int64_t p0,
                                                       const int64_t chunk, const int reverse, const int exclusive,
                                                       const int write)
{
    const int from_neutral = (L->flags & DC_ASSOC_FROM_NEUTRAL) != 0;
    const int64_t n_chunks = (L->len + chunk - 1) / chunk;
    /* the group's pieces lie a chunk apart (dc_assoc_scan_group_fits: a
     * group spans rows only where they hold whole chunks), piece g's
     * elements at x[f] + g * chunk: one pointer a field, the pieces at
     * offsets from it */
    const int64_t first = p0 / n_chunks * L->len + p0 % n_chunks * chunk + (reverse ? chunk - 1 : 0);
    const dc_real *x[DC_ASSOC_K];
    dc_real *y[DC_ASSOC_K], *carry[DC_ASSOC_K];
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
    {
        x[f] = (const dc_real *)L->x[f] + first;
        y[f] = write ? (dc_real *)L->y[f] + first : 0;
        carry[f] = (dc_real *)L->carry[f];
    }
    dc_var c[DC_ASSOC_GROUP][DC_ASSOC_K];
    DC_UNROLL for (int g = 0; g < DC_ASSOC_GROUP; ++g)
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            c[g][f] = from_neutral ? DC_ASSOC_NEUTRAL(f) : carry[f][p0 + g];
    const int64_t dir = reverse ? -1 : 1;
    for (int64_t s = 0; s < chunk; ++s)
        DC_UNROLL for (int g = 0; g < DC_ASSOC_GROUP; ++g)
        {
            const int64_t at = g * chunk + dir * s;
            DC_ASSOC_SCAN_STEP(c[g], at)
        }
    DC_UNROLL for (int g = 0; g < DC_ASSOC_GROUP; ++g)
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            carry[f][p0 + g] = c[g][f];
}

/* dc_assoc_scan_group_as with the launch's flags, and its chunk a
 * constant where it is the library's, DC_ASSOC_CHUNK: the pieces' offsets
 * are then constants, where pointers a piece kept in registers spilled to
 * the stack, one field of a group of eight taking eight. The linear
 * recurrence's primal reduction of 10^7 float32, three alternating runs
 * on a 2-core Xeon: 2.61-2.65 ms, against 2.87-3.48 with the chunk a
 * variable and 2.89-3.10 before the loops were unswitched by hand. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_scan_group)(const dc_assoc_scan_launch *L, int64_t p0)
{
    if (L->chunk == DC_ASSOC_CHUNK)
        DC_ASSOC_BY_FLAGS(L, DC_BFN_ID(dc_assoc_scan_group_as), L, p0, (int64_t)DC_ASSOC_CHUNK);
    else
        DC_ASSOC_BY_FLAGS(L, DC_BFN_ID(dc_assoc_scan_group_as), L, p0, L->chunk);
}

#undef DC_ASSOC_BY_FLAGS
#undef DC_ASSOC_SCAN_STEP

#else /* DC_BFN_DUAL */

/* An adjoint times a partial: their product, but 0 where a zero adjoint
 * meets an infinite or NaN partial (p - p is 0 for a finite p only). A zero
 * adjoint times a finite partial keeps the product's signed zero, so that
 * wherever every partial is finite this is the plain product to the bit.
 * Also the product of a carry (an adjoint) and its map's entries where maps
 * carry adjoints across pieces (dc_assoc_map_carry, CUDA's map_apply and
 * map_then). */
DC_INLINE DC_HD dc_real DC_BFN_ID(dc_assoc_adj_mul)(dc_real adj, dc_real partial)
{
    return adj == (dc_real)0 && !(partial - partial == (dc_real)0) ? (dc_real)0 : adj * partial;
}

/* lambda^T J for the partials of out (the body's result on seeded inputs):
 * entry j is the sum over fields f of lambda[f] * d out_f / d input j, each
 * product through dc_assoc_adj_mul. */
#define DC_ASSOC_VJP_TERM(lambda, out, j, g)                                                       \
    {                                                                                              \
        g = DC_BFN_ID(dc_assoc_adj_mul)(lambda[0], DC_BFN_PARTIAL(out[0], j));                       \
        DC_UNROLL for (int dc_q_ = 1; dc_q_ < DC_ASSOC_K; ++dc_q_)                                 \
            g += DC_BFN_ID(dc_assoc_adj_mul)(lambda[dc_q_], DC_BFN_PARTIAL(out[dc_q_], j));          \
    }

/* DC_ASSOC_VJP_TERM with plain products: the same sum, to the bit, wherever
 * every partial is finite; where one is not, the sum is infinite or NaN,
 * which is how dc_assoc_adjoint_group_tile and dc_assoc_reduce_group tell
 * that they need DC_ASSOC_VJP_TERM. */
#define DC_ASSOC_VJP_TERM_PLAIN(lambda, out, j, g)                                                 \
    {                                                                                              \
        g = lambda[0] * DC_BFN_PARTIAL(out[0], j);                                                 \
        DC_UNROLL for (int dc_q_ = 1; dc_q_ < DC_ASSOC_K; ++dc_q_)                                 \
            g += lambda[dc_q_] * DC_BFN_PARTIAL(out[dc_q_], j);                                    \
    }

/* Element e of a vector-Jacobian launch, at index (i0, i1, i2). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_vjp_at)(const dc_assoc_vjp_launch *L, int64_t e, int64_t i0, int64_t i1,
                                                int64_t i2)
{
    const int64_t r1 = L->row_index ? L->row_index[i1] : i1;
    dc_var lr[2 * DC_ASSOC_K];
    DC_UNROLL for (int j = 0; j < 2 * DC_ASSOC_K; ++j)
    {
        const int64_t *s = L->in_strides[j];
        const int64_t at = i0 * s[0] + ((L->indexed >> j) & 1u ? r1 : i1) * s[1] + i2 * s[2];
        lr[j] = DC_BFN_SEED(((const dc_real *)L->in[j])[at], j);
    }
    dc_var o[DC_ASSOC_K];
    DC_ASSOC_BODY(lr, lr + DC_ASSOC_K, o);
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f) if (L->val[f])((dc_real *)L->val[f])[e] = o[f].v;
    if (!L->u[0])
        return;
    dc_real u[DC_ASSOC_K];
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
    {
        const int64_t *s = L->u_strides[f];
        const int64_t at = i0 * s[0] + ((L->indexed >> (2 * DC_ASSOC_K + f)) & 1u ? r1 : i1) * s[1] + i2 * s[2];
        u[f] = ((const dc_real *)L->u[f])[at];
    }
    DC_UNROLL for (int j = 0; j < 2 * DC_ASSOC_K; ++j) if (L->adj[j])
    {
        dc_real g;
        DC_ASSOC_VJP_TERM(u, o, j, g)
        ((dc_real *)L->adj[j])[e] = g;
    }
}

/* One element of a vector-Jacobian launch. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_vjp_element)(const dc_assoc_vjp_launch *L, int64_t e)
{
    const int64_t i2 = e % L->shape[2], t = e / L->shape[2];
    DC_BFN_ID(dc_assoc_vjp_at)(L, e, t / L->shape[1], t % L->shape[1], i2);
}

/* Elements [begin, end) of a vector-Jacobian launch, in order: the index
 * divided out once, then stepped. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_vjp_range)(const dc_assoc_vjp_launch *L, int64_t begin, int64_t end)
{
    if (begin >= end)
        return;
    const int64_t n1 = L->shape[1], n2 = L->shape[2];
    int64_t i2 = begin % n2, t = begin / n2, i1 = t % n1, i0 = t / n1;
    for (int64_t e = begin; e < end; ++e) {
        DC_BFN_ID(dc_assoc_vjp_at)(L, e, i0, i1, i2);
        if (++i2 == n2) {
            i2 = 0;
            if (++i1 == n1) {
                i1 = 0;
                ++i0;
            }
        }
    }
}

/* Steps [s0, s1) of the row and lane at `base` of a scan's adjoint, from
 * the last: one dual pass of the operator per step, for either (or both) of:
 * - carry not NULL: carry enters as the carry from step s1 and leaves as
 *   the carry into step s0 - 1, and gx is written;
 * - M not NULL (the run's affine map, its k columns then v, entering as the
 *   identity and 0): v follows the carry's recurrence from 0, and the
 *   columns the same recurrence without the adjoints g. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_steps)(const dc_assoc_scan_adjoint_launch *L, int64_t base, int64_t s0,
                                                       int64_t s1, dc_real *carry, dc_real *M)
{
    enum { K = DC_ASSOC_K };
    const int64_t inner = L->inner, len = L->len;
    for (int64_t j = s1 - 1; j >= s0; --j) {
        const int64_t at = base + j * inner;
        dc_real lambda[K], lambda_v[K];
        dc_var lr[2 * K];
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            const dc_real *g = (const dc_real *)L->g[f];
            dc_real gj = (dc_real)0;
            if (g && !L->exclusive)
                gj = g[at];
            else if (g && j + 1 < len)
                gj = g[at + inner];
            if (carry)
                lambda[f] = gj + carry[f];
            if (M)
                lambda_v[f] = gj + M[K * K + f];
            const dc_real *y = (const dc_real *)L->y[f];
            const dc_real p = L->exclusive ? y[at] : j > 0 ? y[at - inner] : DC_ASSOC_NEUTRAL(f);
            lr[f] = DC_BFN_SEED(p, f);
            lr[K + f] = DC_BFN_SEED(((const dc_real *)L->x[f])[at], K + f);
        }
        dc_var o[K];
        DC_ASSOC_BODY(lr, lr + K, o);
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            dc_real *gx = (dc_real *)L->gx[f];
            if (carry) {
                DC_ASSOC_VJP_TERM(lambda, o, f, carry[f])
                if (gx) {
                    dc_real t;
                    DC_ASSOC_VJP_TERM(lambda, o, K + f, t)
                    gx[at] = (L->accumulate >> f) & 1u ? gx[at] + t : t;
                }
            }
            if (M)
                DC_ASSOC_VJP_TERM(lambda_v, o, f, M[K * K + f])
        }
        if (M)
            DC_UNROLL for (int q = 0; q < K; ++q)
            {
                dc_real col[K];
                DC_UNROLL for (int f = 0; f < K; ++f)
                    col[f] = M[q * K + f];
                DC_UNROLL for (int f = 0; f < K; ++f)
                    DC_ASSOC_VJP_TERM(col, o, f, M[q * K + f])
            }
    }
}

/* M, k * k + k numbers: the identity map (columns), v 0. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_map_identity)(dc_real *M)
{
    DC_UNROLL for (int q = 0; q < DC_ASSOC_K; ++q)
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            M[q * DC_ASSOC_K + f] = q == f ? (dc_real)1 : (dc_real)0;
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
        M[DC_ASSOC_K * DC_ASSOC_K + f] = (dc_real)0;
}

/* The carry leaving a piece whose map is M, from the carry entering it:
 * M carry + v (next is not carry), a zero carry times an infinite or NaN
 * entry of M giving 0 (dc_assoc_adj_mul). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_map_carry)(const dc_real *M, const dc_real *carry, dc_real *next)
{
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
    {
        next[f] = M[DC_ASSOC_K * DC_ASSOC_K + f];
        DC_UNROLL for (int q = 0; q < DC_ASSOC_K; ++q)
            next[f] += DC_BFN_ID(dc_assoc_adj_mul)(carry[q], M[q * DC_ASSOC_K + f]);
    }
}

/* One work item of a scan-adjoint launch, by its phase. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_scan_adjoint_item)(const dc_assoc_scan_adjoint_launch *L, int64_t item)
{
    enum { K = DC_ASSOC_K, MAP = DC_ASSOC_K * DC_ASSOC_K + DC_ASSOC_K };
    const int64_t inner = L->inner, len = L->len, lane = item % inner;
    const int by_piece = L->phase != DC_ASSOC_ADJ_WHOLE && L->phase != DC_ASSOC_ADJ_CARRIES;
    const int64_t n_chunks = L->phase == DC_ASSOC_ADJ_WHOLE ? 1 : (len + L->chunk - 1) / L->chunk;
    const int64_t row = by_piece ? item / inner / n_chunks : item / inner;
    const int64_t base = row * len * inner + lane;
    dc_real *carries = (dc_real *)L->carry, *maps = (dc_real *)L->maps;
    dc_real carry[K];
    DC_UNROLL for (int f = 0; f < K; ++f)
        carry[f] = (dc_real)0;
    if (L->phase == DC_ASSOC_ADJ_WHOLE) {
        DC_BFN_ID(dc_assoc_adjoint_steps)(L, base, 0, len, carry, 0);
        return;
    }
    if (L->phase == DC_ASSOC_ADJ_CARRIES) {
        /* from the last piece: the carry entering piece c is the one that
         * leaves piece c + 1 */
        for (int64_t c = n_chunks - 1; c >= 0; --c) {
            const int64_t piece = (row * n_chunks + c) * inner + lane;
            dc_real next[K];
            DC_UNROLL for (int f = 0; f < K; ++f)
                carries[piece * K + f] = carry[f];
            DC_BFN_ID(dc_assoc_map_carry)(maps + piece * MAP, carry, next);
            DC_UNROLL for (int f = 0; f < K; ++f)
                carry[f] = next[f];
        }
        return;
    }
    const int64_t c = (item / inner) % n_chunks;
    const int64_t s0 = c * L->chunk, s1 = s0 + L->chunk < len ? s0 + L->chunk : len;
    if (L->phase == DC_ASSOC_ADJ_MAPS) {
        DC_BFN_ID(dc_assoc_map_identity)(maps + item * MAP);
        DC_BFN_ID(dc_assoc_adjoint_steps)(L, base, s0, s1, 0, maps + item * MAP);
        return;
    }
    DC_UNROLL for (int f = 0; f < K; ++f)
        carry[f] = carries[item * K + f];
    DC_BFN_ID(dc_assoc_adjoint_steps)(L, base, s0, s1, carry, 0);
}

/* Pieces that a CPU work item of a scan-adjoint or reduce-adjoint launch
 * walks together (dc_assoc_adjoint_group, dc_assoc_reduce_group:
 * dc_assoc_red_group<pass>, 8 or 4). */
enum { DC_BFN_ID(dc_assoc_red_group) = DC_ASSOC_K <= 2 ? 8 : 4 };
#ifndef DC_ASSOC_IVDEP /* the CPU instance's: a loop over the pieces of a group is to be vectorized */
#define DC_ASSOC_IVDEP
#endif
#define DC_ASSOC_RED_GROUP DC_BFN_ID(dc_assoc_red_group)

/* Whether pieces [p0, p0 + DC_ASSOC_RED_GROUP) of rows of len steps, in
 * pieces of chunk, are all a whole chunk long (a row's last piece is short
 * where chunk does not divide len). */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_group_whole)(int64_t len, int64_t chunk, int64_t p0)
{
    const int64_t n_chunks = (len + chunk - 1) / chunk;
    for (int g = 0; g < DC_ASSOC_RED_GROUP; ++g)
        if ((p0 + g) % n_chunks == n_chunks - 1 && len % chunk != 0)
            return 0;
    return 1;
}

/* Whether pieces [p0, p0 + DC_ASSOC_RED_GROUP) of a scan-adjoint launch in
 * phase DC_ASSOC_ADJ_MAPS or DC_ASSOC_ADJ_PIECES suit
 * dc_assoc_adjoint_group: one lane, each a whole chunk. */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_adjoint_group_fits)(const dc_assoc_scan_adjoint_launch *L, int64_t p0)
{
    return L->inner == 1 && DC_BFN_ID(dc_assoc_group_whole)(L->len, L->chunk, p0);
}

/* Steps of a tile of the group's inputs and outputs (dc_assoc_stage): two
 * of tiles8.h's 8 x 8 tiles, so that a piece's sixteen float32 numbers, a
 * cache line, are written together. */
enum { DC_BFN_ID(dc_assoc_tile) = 16 };

/* to[j * G + g] = x[first[g] + s0 + j] for the count steps j of a tile and
 * the group's pieces g (G of them): where the instance moves float32 tiles
 * in registers (DC_TILES8, tiles8.h) a whole tile of eight pieces
 * goes that way, else number by number. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_stage)(const dc_real *x, const int64_t *first, int64_t s0, int count,
                                               dc_real *to)
{
    enum { G = DC_ASSOC_RED_GROUP };
#if defined(DC_TILES8)
    if (sizeof(dc_real) == sizeof(float) && G == 8 && count == DC_BFN_ID(dc_assoc_tile)) {
        /* the pieces' offsets moved by s0, which may be -1 (the states
         * before a tile's first step): no pointer before x is formed */
        int64_t at[G];
        for (int g = 0; g < G; ++g)
            at[g] = first[g] + s0;
        dc_tile8_gather_f32((const float *)x, at, 0, (float *)to);
        dc_tile8_gather_f32((const float *)x, at, 8, (float *)to + 64);
        return;
    }
#endif
    for (int j = 0; j < count; ++j)
        DC_UNROLL for (int g = 0; g < G; ++g)
            to[j * G + g] = x[first[g] + s0 + j];
}

/* The inverse of dc_assoc_stage, into x (add: added to what it holds; else
 * stream: a whole tile of float32 goes out in streaming stores,
 * tiles8.h's DC_TILE8_STREAM). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_unstage)(dc_real *x, const int64_t *first, int64_t s0, int count, int add,
                                                 int stream, const dc_real *from)
{
    enum { G = DC_ASSOC_RED_GROUP };
#if defined(DC_TILES8)
    if (sizeof(dc_real) == sizeof(float) && G == 8 && count == DC_BFN_ID(dc_assoc_tile)) {
        dc_tile8_scatter2_f32((float *)x, first, s0,
                              add ? DC_TILE8_ADD : stream ? DC_TILE8_STREAM : DC_TILE8_ASSIGN, (const float *)from);
        return;
    }
#else
    (void)stream;
#endif
    for (int j = 0; j < count; ++j)
        DC_UNROLL for (int g = 0; g < G; ++g)
        {
            dc_real *to = x + first[g] + s0 + j;
            *to = add ? *to + from[j * G + g] : from[j * G + g];
        }
}

/* Steps of a piece of a group that a CPU work item walks with the piece's
 * state in local numbers (registers) rather than in the group's arrays,
 * which each step would otherwise read back from memory right after
 * writing them. The linear recurrence's gradient (forward and adjoint) of
 * 10^7 float32, three alternating runs on a 2-core Xeon: reduction
 * 8.4-9.0 ms against 9.1-9.6 a step at a time, scan 31.5-33.1 against
 * 31.5-34.2 (10^6: 2.10-2.27 against 2.23-2.29); the 2x2-matrix
 * operator's float32 unit took 29 s to compile against 25 (then with
 * gcc's raised unswitching, see DC_ASSOC_BY_FLAGS). Sixteen
 * float32 pieces a group instead of eight, for more chains side by side,
 * made the reduction's gradient no faster (10.6-11.8 ms against 11.0) and
 * the scan's slower (36.2-36.7 against 47.3-47.8): twice the streams of
 * the inputs to read at once.
 * DC_ASSOC_RUN divides dc_assoc_tile, so that a run never spans two tiles. */
#ifndef DC_ASSOC_RUN
#define DC_ASSOC_RUN 4
#endif

/* Piece g's state in a group's arrays (carry or M, as the phase says)
 * copied to (back 0) or from (back 1) the piece's local numbers c and m. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_group_state)(int maps_phase, int back, int g,
                                                     dc_real (*carry)[DC_ASSOC_RED_GROUP],
                                                     dc_real (*M)[DC_ASSOC_RED_GROUP], dc_real *c, dc_real *m)
{
    enum { K = DC_ASSOC_K, MAP = K * K + K };
    if (maps_phase) {
        DC_UNROLL for (int e = 0; e < MAP; ++e)
        {
            if (back)
                M[e][g] = m[e];
            else
                m[e] = M[e][g];
        }
    } else {
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            if (back)
                carry[f][g] = c[f];
            else
                c[f] = carry[f][g];
        }
    }
}

/* A step of one piece of a group (dc_assoc_adjoint_group), from gj, the
 * adjoint given at the step (fields with none: 0), p, the state before it,
 * and a, its element: the maps phase composes the step into the piece's map
 * M (k * k + k numbers, dc_assoc_map_identity's layout); else the adjoint
 * carried in carry (k numbers) goes one step back and t gets the element's
 * adjoint. plain: the products of the adjoints and the partials by
 * DC_ASSOC_VJP_TERM_PLAIN (a constant where this is inlined). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_group_core)(const dc_real *gj, const dc_real *p, const dc_real *a,
                                                            int maps_phase, int plain, dc_real *carry, dc_real *M,
                                                            dc_real *t)
{
    enum { K = DC_ASSOC_K };
    dc_real lambda[K];
    dc_var lr[2 * K], o[K];
    DC_UNROLL for (int f = 0; f < K; ++f)
    {
        lambda[f] = gj[f] + (maps_phase ? M[K * K + f] : carry[f]);
        lr[f] = DC_BFN_SEED(p[f], f);
        lr[K + f] = DC_BFN_SEED(a[f], K + f);
    }
    DC_ASSOC_BODY(lr, lr + K, o);
#define DC_ASSOC_TERM(lambda, out, j, g)                                                           \
    if (plain)                                                                                     \
        DC_ASSOC_VJP_TERM_PLAIN(lambda, out, j, g)                                                 \
    else                                                                                           \
        DC_ASSOC_VJP_TERM(lambda, out, j, g)
    if (maps_phase) {
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            DC_ASSOC_TERM(lambda, o, f, M[K * K + f])
        }
        DC_UNROLL for (int q = 0; q < K; ++q)
        {
            dc_real col[K];
            DC_UNROLL for (int f = 0; f < K; ++f)
                col[f] = M[q * K + f];
            DC_UNROLL for (int f = 0; f < K; ++f)
            {
                DC_ASSOC_TERM(col, o, f, M[q * K + f])
            }
        }
    } else {
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            DC_ASSOC_TERM(lambda, o, f, carry[f])
            DC_ASSOC_TERM(lambda, o, K + f, t[f])
        }
    }
#undef DC_ASSOC_TERM
}

/* Step s of each piece of a group (dc_assoc_adjoint_group), read from and
 * written to memory: at element first[g] + s, step j0[g] + s of its row. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_group_step)(const dc_assoc_scan_adjoint_launch *L,
                                                            const int64_t *first, const int64_t *j0, int64_t s,
                                                            int maps_phase,
                                                            dc_real (*carry)[DC_ASSOC_RED_GROUP],
                                                            dc_real (*M)[DC_ASSOC_RED_GROUP])
{
    enum { K = DC_ASSOC_K, G = DC_ASSOC_RED_GROUP, MAP = K * K + K };
    const int64_t len = L->len;
    DC_ASSOC_IVDEP for (int g = 0; g < G; ++g)
    {
        const int64_t at = first[g] + s, j = j0[g] + s;
        dc_real gj[K], p[K], a[K], t[K];
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            const dc_real *gf = (const dc_real *)L->g[f];
            gj[f] = (dc_real)0;
            if (gf && !L->exclusive)
                gj[f] = gf[at];
            else if (gf && j + 1 < len)
                gj[f] = gf[at + 1];
            const dc_real *y = (const dc_real *)L->y[f];
            p[f] = L->exclusive ? y[at] : j > 0 ? y[at - 1] : DC_ASSOC_NEUTRAL(f);
            a[f] = ((const dc_real *)L->x[f])[at];
        }
        dc_real c[K], m[MAP];
        DC_BFN_ID(dc_assoc_group_state)(maps_phase, 0, g, carry, M, c, m);
        DC_BFN_ID(dc_assoc_adjoint_group_core)(gj, p, a, maps_phase, 0, c, m, t);
        DC_BFN_ID(dc_assoc_group_state)(maps_phase, 1, g, carry, M, c, m);
        if (!maps_phase)
            DC_UNROLL for (int f = 0; f < K; ++f)
            {
                dc_real *gx = (dc_real *)L->gx[f];
                if (gx)
                    gx[at] = (L->accumulate >> f) & 1u ? gx[at] + t[f] : t[f];
            }
    }
}

/* The steps of a tile (dc_assoc_adjoint_group_tile), the last first, from
 * its staged inputs (xs, ys, gs: by field, step, piece, T * G numbers a
 * field; gs zeros for a field without adjoints); vs receives the gradients
 * in the pieces phase. plain: as dc_assoc_adjoint_group_core's. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_tile_steps)(int maps_phase, int plain, const dc_real *xs,
                                                            const dc_real *ys, const dc_real *gs, dc_real *vs,
                                                            dc_real (*carry)[DC_ASSOC_RED_GROUP],
                                                            dc_real (*M)[DC_ASSOC_RED_GROUP])
{
    enum {
        K = DC_ASSOC_K,
        G = DC_ASSOC_RED_GROUP,
        T = DC_BFN_ID(dc_assoc_tile),
        TG = T * G,
        MAP = K * K + K,
        RUN = DC_ASSOC_RUN
    };
    for (int j1 = T; j1 > 0; j1 -= RUN) {
        DC_ASSOC_IVDEP for (int g = 0; g < G; ++g)
        {
            dc_real c[K], m[MAP];
            DC_BFN_ID(dc_assoc_group_state)(maps_phase, 0, g, carry, M, c, m);
            DC_UNROLL for (int i = 1; i <= RUN; ++i)
            {
                const int j = j1 - i;
                dc_real gj[K], p[K], a[K], t[K];
                DC_UNROLL for (int f = 0; f < K; ++f)
                {
                    gj[f] = gs[f * TG + j * G + g];
                    p[f] = ys[f * TG + j * G + g];
                    a[f] = xs[f * TG + j * G + g];
                }
                DC_BFN_ID(dc_assoc_adjoint_group_core)(gj, p, a, maps_phase, plain, c, m, t);
                if (!maps_phase)
                    DC_UNROLL for (int f = 0; f < K; ++f)
                        vs[f * TG + j * G + g] = t[f];
            }
            DC_BFN_ID(dc_assoc_group_state)(maps_phase, 1, g, carry, M, c, m);
        }
    }
}

/* Whether the n numbers at x, a multiple of a group's pieces, are all
 * finite: x - x is 0 for a finite x and NaN for an infinite or NaN one, which
 * compares unequal to 0. A flag per piece of the group, anded over the rows:
 * gcc vectorizes it into compares and ands however wide its vectors (a sum
 * of the differences by piece, which must be added in order, gcc 12 tuned
 * for a CPU with 512-bit vectors transposed and added number by number:
 * 40% of the linear recurrence's reduce adjoint on an AMD EPYC; a flag per
 * number it tested one number at a time). */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_all_finite)(const dc_real *x, int n)
{
    enum { G = DC_ASSOC_RED_GROUP };
    int finite[G], all = 1;
    DC_UNROLL for (int g = 0; g < G; ++g)
        finite[g] = 1;
    for (int i = 0; i < n; i += G)
        DC_UNROLL for (int g = 0; g < G; ++g)
            finite[g] &= x[i + g] - x[i + g] == (dc_real)0;
    DC_UNROLL for (int g = 0; g < G; ++g)
        all &= finite[g];
    return all;
}

/* Steps s0 + T - 1 down to s0 of each piece of a group (T =
 * dc_assoc_tile), none of them a row's first step or its last, through
 * tiles of its inputs and of its gradients (dc_assoc_stage): as
 * dc_assoc_adjoint_group_step steps them, to the same bits. First with
 * plain products of the adjoints and the partials, which keep the chain of a
 * step short (DC_ASSOC_VJP_TERM_PLAIN); where that leaves a number that is
 * not finite in the state carried (carry, or M) or in a gradient asked for
 * (a partial was infinite or NaN, and a zero adjoint times it must give
 * zero), the tile is done again from the state it started with, through
 * DC_ASSOC_VJP_TERM. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_group_tile)(const dc_assoc_scan_adjoint_launch *L,
                                                            const int64_t *first, int64_t s0, int maps_phase,
                                                            dc_real (*carry)[DC_ASSOC_RED_GROUP],
                                                            dc_real (*M)[DC_ASSOC_RED_GROUP])
{
    enum { K = DC_ASSOC_K, G = DC_ASSOC_RED_GROUP, T = DC_BFN_ID(dc_assoc_tile), MAP = K * K + K };
    /* the tiles by field, step, piece: x, the states before, the adjoints
     * given, the gradients */
    dc_real xs[K][T * G], ys[K][T * G], gs[K][T * G], vs[K][T * G];
    DC_UNROLL for (int f = 0; f < K; ++f)
    {
        DC_BFN_ID(dc_assoc_stage)((const dc_real *)L->x[f], first, s0, T, xs[f]);
        DC_BFN_ID(dc_assoc_stage)((const dc_real *)L->y[f], first, L->exclusive ? s0 : s0 - 1, T, ys[f]);
        if (L->g[f])
            DC_BFN_ID(dc_assoc_stage)((const dc_real *)L->g[f], first, L->exclusive ? s0 + 1 : s0, T, gs[f]);
        else
            for (int i = 0; i < T * G; ++i)
                gs[f][i] = (dc_real)0;
    }
    /* the state the tile starts from: M in the maps phase, else carry */
    dc_real *state = maps_phase ? &M[0][0] : &carry[0][0];
    const int n_state = (maps_phase ? MAP : K) * G;
    dc_real saved[MAP * G];
    for (int i = 0; i < n_state; ++i)
        saved[i] = state[i];
    DC_BFN_ID(dc_assoc_adjoint_tile_steps)(maps_phase, 1, &xs[0][0], &ys[0][0], &gs[0][0], &vs[0][0], carry, M);
    int finite = DC_BFN_ID(dc_assoc_all_finite)(state, n_state);
    DC_UNROLL for (int f = 0; f < K; ++f)
        finite &= maps_phase || !L->gx[f] || DC_BFN_ID(dc_assoc_all_finite)(vs[f], T * G);
    if (!finite) {
        for (int i = 0; i < n_state; ++i)
            state[i] = saved[i];
        DC_BFN_ID(dc_assoc_adjoint_tile_steps)(maps_phase, 0, &xs[0][0], &ys[0][0], &gs[0][0], &vs[0][0], carry, M);
    }
    if (!maps_phase)
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            if (L->gx[f])
                DC_BFN_ID(dc_assoc_unstage)((dc_real *)L->gx[f], first, s0, T, (L->accumulate >> f) & 1u,
                                            L->streaming, vs[f]);
        }
}

/* Whether the steps s0 .. s0 + T - 1 of each piece of a group (T =
 * dc_assoc_tile) are neither a row's first step nor its last (j0: each
 * piece's first step in its row), so that dc_assoc_adjoint_group_tile may
 * take them. */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_tile_inside)(const dc_assoc_scan_adjoint_launch *L, const int64_t *j0,
                                                    int64_t s0)
{
    for (int g = 0; g < DC_ASSOC_RED_GROUP; ++g)
        if (j0[g] + s0 == 0 || j0[g] + s0 + DC_BFN_ID(dc_assoc_tile) >= L->len)
            return 0;
    return 1;
}

/* The steps of a group's pieces (dc_assoc_adjoint_group), the last first:
 * those above the last multiple of dc_assoc_tile one by one, then tile by
 * tile, where a tile holds a row's first or last step one by one. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_group_walk)(const dc_assoc_scan_adjoint_launch *L,
                                                            const int64_t *first, const int64_t *j0, int maps_phase,
                                                            dc_real (*carry)[DC_ASSOC_RED_GROUP],
                                                            dc_real (*M)[DC_ASSOC_RED_GROUP])
{
    enum { T = DC_BFN_ID(dc_assoc_tile) };
    const int64_t chunk = L->chunk, top = chunk - chunk % T;
    for (int64_t s = chunk - 1; s >= top; --s)
        DC_BFN_ID(dc_assoc_adjoint_group_step)(L, first, j0, s, maps_phase, carry, M);
    for (int64_t s0 = top - T; s0 >= 0; s0 -= T) {
        if (DC_BFN_ID(dc_assoc_tile_inside)(L, j0, s0))
            DC_BFN_ID(dc_assoc_adjoint_group_tile)(L, first, s0, maps_phase, carry, M);
        else
            for (int64_t s = s0 + T - 1; s >= s0; --s)
                DC_BFN_ID(dc_assoc_adjoint_group_step)(L, first, j0, s, maps_phase, carry, M);
    }
}

/* Pieces [p0, p0 + DC_ASSOC_RED_GROUP) of a scan-adjoint launch in phase
 * DC_ASSOC_ADJ_MAPS or DC_ASSOC_ADJ_PIECES that suit them
 * (dc_assoc_adjoint_group_fits), walked together step by step, the loop
 * over the pieces vectorized, so that their chains of operations overlap;
 * each piece does what dc_assoc_scan_adjoint_item does, in the same order,
 * to the same bits. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_adjoint_group)(const dc_assoc_scan_adjoint_launch *L, int64_t p0)
{
    enum { K = DC_ASSOC_K, G = DC_ASSOC_RED_GROUP, MAP = DC_ASSOC_K * DC_ASSOC_K + DC_ASSOC_K };
    const int maps_phase = L->phase == DC_ASSOC_ADJ_MAPS;
    const int64_t chunk = L->chunk, n_chunks = (L->len + chunk - 1) / chunk;
    int64_t first[G], j0[G];
    dc_real carry[K][G], M[MAP][G];
    DC_UNROLL for (int g = 0; g < G; ++g)
    {
        const int64_t p = p0 + g;
        j0[g] = p % n_chunks * chunk;
        first[g] = p / n_chunks * L->len + j0[g];
        DC_UNROLL for (int q = 0; q < K; ++q)
            DC_UNROLL for (int f = 0; f < K; ++f)
                M[q * K + f][g] = q == f ? (dc_real)1 : (dc_real)0;
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            M[K * K + f][g] = (dc_real)0;
            carry[f][g] = maps_phase ? (dc_real)0 : ((const dc_real *)L->carry)[p * K + f];
        }
    }
    if (maps_phase)
        DC_BFN_ID(dc_assoc_adjoint_group_walk)(L, first, j0, 1, carry, M);
    else
        DC_BFN_ID(dc_assoc_adjoint_group_walk)(L, first, j0, 0, carry, M);
    if (maps_phase)
        DC_UNROLL for (int g = 0; g < G; ++g)
            DC_UNROLL for (int e = 0; e < MAP; ++e)
                ((dc_real *)L->maps)[(p0 + g) * MAP + e] = M[e][g];
}

/* The reduce-adjoint launch's phase DC_ASSOC_RED_CARRIES for one row and
 * lane: the pieces' totals combined from the left (the state before each
 * piece) and from the right (the state after it), in plain numbers through
 * the primal pass's body (DC_ASSOC_PRIMAL_BODY, named by the instance). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_reduce_carries)(const dc_assoc_reduce_adjoint_launch *L, int64_t item)
{
    const int64_t inner = L->inner, n_chunks = (L->len + L->chunk - 1) / L->chunk;
    const int64_t base = item / inner * n_chunks * inner + item % inner;
    dc_real c[DC_ASSOC_K], t[DC_ASSOC_K], out[DC_ASSOC_K];
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
        c[f] = DC_ASSOC_NEUTRAL(f);
    for (int64_t p = 0; p < n_chunks; ++p) {
        const int64_t at = base + p * inner;
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
        {
            ((dc_real *)L->left[f])[at] = c[f];
            t[f] = ((const dc_real *)L->totals[f])[at];
        }
        DC_ASSOC_PRIMAL_BODY(c, t, out);
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            c[f] = out[f];
    }
    DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
        c[f] = DC_ASSOC_NEUTRAL(f);
    for (int64_t p = n_chunks - 1; p >= 0; --p) {
        const int64_t at = base + p * inner;
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
        {
            ((dc_real *)L->right[f])[at] = c[f];
            t[f] = ((const dc_real *)L->totals[f])[at];
        }
        DC_ASSOC_PRIMAL_BODY(t, c, out);
        DC_UNROLL for (int f = 0; f < DC_ASSOC_K; ++f)
            c[f] = out[f];
    }
}

/* Steps 0 .. count - 1 of a row of a reduce-adjoint launch, at x + base,
 * x + base + inner, ... (gx alike): l the state before the first step, r
 * the state after the last one, ybar the row's adjoint, buf room for
 * count * k numbers. The states after each step (r_j) walk back into buf,
 * then l walks forward, per step one dual pass of t = l (+) a seeded on a
 * and one of t (+) r_j carrying those partials, ybar^T of which is a's
 * adjoint; t's value is the next step's l. gx[f] may be x[f]: a step's
 * elements are all read before its gradients are written, and not read
 * after (CUDA's blocks write the gradients over their staged elements). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_reduce_run)(const dc_assoc_reduce_adjoint_launch *L, int64_t base,
                                                    int64_t count, const dc_real *l, const dc_real *r,
                                                    const dc_real *ybar, dc_real *buf)
{
    enum { K = DC_ASSOC_K };
    const int64_t inner = L->inner;
    const dc_real *x[K];
    dc_real c[K], a[K], out[K];
    DC_UNROLL for (int f = 0; f < K; ++f)
    {
        x[f] = (const dc_real *)L->x[f] + base;
        c[f] = r[f];
    }
    for (int64_t s = count - 1; s >= 0; --s) {
        DC_UNROLL for (int f = 0; f < K; ++f)
            buf[s * K + f] = c[f];
        if (s == 0)
            break;
        DC_UNROLL for (int f = 0; f < K; ++f)
            a[f] = x[f][s * inner];
        DC_ASSOC_PRIMAL_BODY(a, c, out);
        DC_UNROLL for (int f = 0; f < K; ++f)
            c[f] = out[f];
    }
    DC_UNROLL for (int f = 0; f < K; ++f)
        c[f] = l[f];
    for (int64_t s = 0; s < count; ++s) {
        dc_var la[2 * K], tr[2 * K], u[K];
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            la[f] = DC_BFN_CONST(c[f]);
            la[K + f] = DC_BFN_SEED(x[f][s * inner], K + f);
            tr[K + f] = DC_BFN_CONST(buf[s * K + f]);
        }
        DC_ASSOC_BODY(la, la + K, tr);
        DC_ASSOC_BODY(tr, tr + K, u);
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            c[f] = tr[f].v;
            dc_real *gx = (dc_real *)L->gx[f];
            if (gx) {
                dc_real v;
                DC_ASSOC_VJP_TERM(ybar, u, K + f, v)
                const int64_t at = base + s * inner;
                gx[at] = (L->accumulate >> f) & 1u ? gx[at] + v : v;
            }
        }
    }
}

/* The reduce-adjoint launch's phase DC_ASSOC_RED_PIECES for one piece and
 * lane (`item`), with `buf` room for chunk * k numbers: the piece's steps
 * (dc_assoc_reduce_run) between the states before and after it. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_reduce_piece)(const dc_assoc_reduce_adjoint_launch *L, int64_t item,
                                                      dc_real *buf)
{
    enum { K = DC_ASSOC_K };
    const int64_t inner = L->inner, lane = item % inner, piece = item / inner;
    const int64_t n_chunks = (L->len + L->chunk - 1) / L->chunk, o = piece / n_chunks;
    const int64_t s0 = piece % n_chunks * L->chunk, count = L->len - s0 < L->chunk ? L->len - s0 : L->chunk;
    dc_real l[K], r[K], ybar[K];
    DC_UNROLL for (int f = 0; f < K; ++f)
    {
        l[f] = L->left[0] ? ((const dc_real *)L->left[f])[item] : DC_ASSOC_NEUTRAL(f);
        r[f] = L->right[0] ? ((const dc_real *)L->right[f])[item] : DC_ASSOC_NEUTRAL(f);
        ybar[f] = L->g[f] ? ((const dc_real *)L->g[f])[o * inner + lane] : (dc_real)0;
    }
    DC_BFN_ID(dc_assoc_reduce_run)(L, (o * L->len + s0) * inner + lane, count, l, r, ybar, buf);
}

/* The buffer that the pieces of a reduce-adjoint group need:
 * DC_ASSOC_MAX_CHUNK * DC_ASSOC_RED_BUF numbers, at most 16 per step. */
#ifndef DC_ASSOC_RED_BUF
#define DC_ASSOC_RED_BUF 16
#endif

/* Whether pieces [p0, p0 + DC_ASSOC_RED_GROUP) of a reduce-adjoint launch
 * suit dc_assoc_reduce_group: one lane, each a whole chunk long, the chunk
 * the library's (DC_ASSOC_CHUNK, which the group takes as a constant; the
 * CPU's buffer holds it). */
DC_INLINE DC_HD int DC_BFN_ID(dc_assoc_reduce_group_fits)(const dc_assoc_reduce_adjoint_launch *L, int64_t p0)
{
    return L->inner == 1 && L->chunk == DC_ASSOC_CHUNK && DC_BFN_ID(dc_assoc_group_whole)(L->len, L->chunk, p0);
}

/* Steps s0 .. s0 + count - 1 of a group's pieces in dc_assoc_reduce_group's
 * walk from the left: from the tile of their elements xs and the states
 * after each step in buf (dc_assoc_reduce_group's layouts), c (the states
 * before, by field and piece) walks on and vs (by field, step and piece, a
 * tile's T * G numbers a field) receives the gradients. plain: the
 * products of the adjoints and the partials by DC_ASSOC_VJP_TERM_PLAIN
 * (a constant where this is inlined). */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_reduce_tile_steps)(int plain, int64_t s0, int count, const dc_real *xs,
                                                           const dc_real *buf, dc_real (*c)[DC_ASSOC_RED_GROUP],
                                                           dc_real (*ybar)[DC_ASSOC_RED_GROUP], dc_real *vs)
{
    enum { K = DC_ASSOC_K, G = DC_ASSOC_RED_GROUP, TG = DC_BFN_ID(dc_assoc_tile) * DC_ASSOC_RED_GROUP };
    for (int j = 0; j < count; ++j) {
        DC_ASSOC_IVDEP for (int g = 0; g < G; ++g)
        {
            dc_var la[2 * K], tr[2 * K], u[K];
            dc_real yb[K];
            DC_UNROLL for (int f = 0; f < K; ++f)
            {
                la[f] = DC_BFN_CONST(c[f][g]);
                la[K + f] = DC_BFN_SEED(xs[f * TG + j * G + g], K + f);
                tr[K + f] = DC_BFN_CONST(buf[((s0 + j) * K + f) * G + g]);
                yb[f] = ybar[f][g];
            }
            DC_ASSOC_BODY(la, la + K, tr);
            DC_ASSOC_BODY(tr, tr + K, u);
            DC_UNROLL for (int f = 0; f < K; ++f)
            {
                c[f][g] = tr[f].v;
                if (plain)
                    DC_ASSOC_VJP_TERM_PLAIN(yb, u, K + f, vs[f * TG + j * G + g])
                else
                    DC_ASSOC_VJP_TERM(yb, u, K + f, vs[f * TG + j * G + g])
            }
        }
    }
}

/* Pieces [p0, p0 + DC_ASSOC_RED_GROUP) of a launch that suits them, walked
 * together step by step so that their chains of operations overlap (buf:
 * chunk * DC_ASSOC_RED_BUF numbers, the r_j as [chunk][k][group]); each
 * piece does what dc_assoc_reduce_piece does, in the same order, to the
 * same bits. The inputs are read, and the gradients written, a tile of
 * steps at a time (dc_assoc_stage), tiles starting at multiples of
 * dc_assoc_tile steps. */
DC_INLINE DC_HD void DC_BFN_ID(dc_assoc_reduce_group)(const dc_assoc_reduce_adjoint_launch *L, int64_t p0,
                                                      dc_real *buf)
{
    enum { K = DC_ASSOC_K, G = DC_ASSOC_RED_GROUP, T = DC_BFN_ID(dc_assoc_tile), RUN = DC_ASSOC_RUN };
    /* a constant chunk: the pieces lie a chunk apart (the group spans rows
     * only where they hold whole chunks), so the tiles' offsets from the
     * first piece are constants too. The linear recurrence's gradient of
     * 10^7 float32, three alternating runs on a 2-core Xeon: 7.95-8.76 ms
     * against 8.78-9.29 with the chunk a variable */
    const int64_t chunk = DC_ASSOC_CHUNK, n_chunks = (L->len + chunk - 1) / chunk;
    const int64_t first0 = p0 / n_chunks * L->len + p0 % n_chunks * chunk;
    /* the pieces' states and adjoints by field, then piece */
    int64_t first[G];
    dc_real c[K][G], ybar[K][G];
    /* a tile of the inputs and of the gradients, by field, step, piece */
    dc_real xs[K][T * G], vs[K][T * G];
    DC_UNROLL for (int g = 0; g < G; ++g)
    {
        const int64_t p = p0 + g, o = p / n_chunks;
        first[g] = first0 + g * chunk;
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            c[f][g] = L->right[0] ? ((const dc_real *)L->right[f])[p] : DC_ASSOC_NEUTRAL(f);
            ybar[f][g] = L->g[f] ? ((const dc_real *)L->g[f])[o] : (dc_real)0;
        }
    }
    /* the walk from the right: each step's state from the one after it,
     * read from and written to buf. Carried in c instead, gcc 12 keeps the
     * pieces' states in scalar registers and walks them one by one (the
     * linear recurrence's gradient at 10^6 float32: 0.95 ms against 0.82-0.87
     * through buf; 1.09-1.12 with both) */
    DC_UNROLL for (int f = 0; f < K; ++f)
        DC_UNROLL for (int g = 0; g < G; ++g)
            buf[((chunk - 1) * K + f) * G + g] = c[f][g];
    for (int64_t s = chunk - 1; s > 0;) {
        const int64_t s0 = s - s % T;
        if (s == chunk - 1 || s % T == T - 1) {
            DC_UNROLL for (int f = 0; f < K; ++f)
                DC_BFN_ID(dc_assoc_stage)((const dc_real *)L->x[f], first, s0,
                                          (int)(chunk - s0 < (int64_t)T ? chunk - s0 : (int64_t)T), xs[f]);
        }
        /* RUN steps s .. s - RUN + 1 (a run never spans two tiles), the
         * states between them in registers: only the run's first state is
         * read back from buf */
        const int run = s % RUN == RUN - 1 && s >= RUN ? RUN : 1;
        DC_ASSOC_IVDEP for (int g = 0; g < G; ++g)
        {
            dc_real a[K], r[K], out[K];
            DC_UNROLL for (int f = 0; f < K; ++f)
                r[f] = buf[(s * K + f) * G + g];
            DC_UNROLL for (int j = 0; j < RUN; ++j)
            {
                if (j < run) {
                    DC_UNROLL for (int f = 0; f < K; ++f)
                        a[f] = xs[f][(s - j - s0) * G + g];
                    DC_ASSOC_PRIMAL_BODY(a, r, out);
                    DC_UNROLL for (int f = 0; f < K; ++f)
                    {
                        buf[((s - j - 1) * K + f) * G + g] = out[f];
                        r[f] = out[f];
                    }
                }
            }
        }
        s -= run;
    }
    DC_UNROLL for (int f = 0; f < K; ++f)
        DC_UNROLL for (int g = 0; g < G; ++g)
            c[f][g] = L->left[0] ? ((const dc_real *)L->left[f])[p0 + g] : DC_ASSOC_NEUTRAL(f);
    for (int64_t s0 = 0; s0 < chunk; s0 += T) {
        const int count = (int)(chunk - s0 < (int64_t)T ? chunk - s0 : (int64_t)T);
        DC_UNROLL for (int f = 0; f < K; ++f)
            DC_BFN_ID(dc_assoc_stage)((const dc_real *)L->x[f], first, s0, count, xs[f]);
        /* plain products first; again through the guarded ones where that
         * leaves a gradient that is not finite (as dc_assoc_adjoint_group_tile) */
        dc_real c0[K][G];
        DC_UNROLL for (int f = 0; f < K; ++f)
            DC_UNROLL for (int g = 0; g < G; ++g)
                c0[f][g] = c[f][g];
        DC_BFN_ID(dc_assoc_reduce_tile_steps)(1, s0, count, &xs[0][0], buf, c, ybar, &vs[0][0]);
        int finite = 1;
        DC_UNROLL for (int f = 0; f < K; ++f)
            finite &= !L->gx[f] || DC_BFN_ID(dc_assoc_all_finite)(vs[f], count * G);
        if (!finite) {
            DC_UNROLL for (int f = 0; f < K; ++f)
                DC_UNROLL for (int g = 0; g < G; ++g)
                    c[f][g] = c0[f][g];
            DC_BFN_ID(dc_assoc_reduce_tile_steps)(0, s0, count, &xs[0][0], buf, c, ybar, &vs[0][0]);
        }
        DC_UNROLL for (int f = 0; f < K; ++f)
        {
            if (L->gx[f])
                DC_BFN_ID(dc_assoc_unstage)((dc_real *)L->gx[f], first, s0, count, (L->accumulate >> f) & 1u,
                                            L->streaming, vs[f]);
        }
    }
}

#undef DC_ASSOC_VJP_TERM
#undef DC_ASSOC_VJP_TERM_PLAIN
#undef DC_ASSOC_RED_GROUP

#endif /* DC_BFN_DUAL */

#undef DC_ASSOC_K
#undef DC_ASSOC_BODY
#undef DC_ASSOC_NEUTRAL
