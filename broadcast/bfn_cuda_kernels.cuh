/* The per-element operations of one pass of bfn_cuda_instance.cuh: the
 * primal one, or (when DC_BFN_DUAL is defined) the dual and adjoint ones,
 * each run by the loops of bfn_cuda_loops.cuh.
 * No include guard: included once per pass, inside the pass's namespace. */

#if !defined(DC_BFN_DUAL)

/* The outputs' values. */
struct primal_op {
    typedef dc_real real;
    enum { n_in = DC_BFN_NIN_, n_adj = 0, n_arr = DC_BFN_NOUT_, n_placed = 0 };
    static __device__ __forceinline__ void apply(const dc_real *x, const dc_real *, dc_real *r)
    {
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
#pragma unroll
        for (int k = 0; k < DC_BFN_NOUT_; ++k)
            r[k] = o[k];
    }
};

static int launch_primal(const dc_bfn_cuda_launch *L) { return dc_bfn_cuda::launch<primal_op>(L); }

#else

/* Outputs, then partial (k, j) at DC_BFN_NOUT_ + k * DC_BFN_NWRT_ + j: one
 * array each, so the stores of a warp are coalesced. */
struct dual_op {
    typedef dc_real real;
    enum { n_in = DC_BFN_NIN_, n_adj = 0, n_arr = DC_BFN_NOUT_ * (1 + DC_BFN_NWRT_), n_placed = 0 };
    static __device__ __forceinline__ void apply(const dc_real *x, const dc_real *, dc_real *r)
    {
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
#pragma unroll
        for (int k = 0; k < DC_BFN_NOUT_; ++k) {
            r[k] = o[k].v;
#pragma unroll
            for (int j = 0; j < DC_BFN_NWRT_; ++j)
                r[DC_BFN_NOUT_ + k * DC_BFN_NWRT_ + j] = o[k].d[j];
        }
    }
};

/* Recompute policy: the duals again, times the output adjoints, summed over
 * outputs; one contribution per differentiable input, placed into (or added
 * to) its gradient. */
struct adjoint_op {
    typedef dc_real real;
    enum { n_in = DC_BFN_NIN_, n_adj = DC_BFN_NOUT_, n_arr = DC_BFN_NWRT_, n_placed = DC_BFN_NWRT_ };
    static __device__ __forceinline__ void apply(const dc_real *x, const dc_real *adj, dc_real *r)
    {
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
#pragma unroll
        for (int j = 0; j < DC_BFN_NWRT_; ++j) {
            dc_real g = DC_BFN_P_(adj_mul)(adj[0], o[0].d[j]);
#pragma unroll
            for (int k = 1; k < DC_BFN_NOUT_; ++k)
                g += DC_BFN_P_(adj_mul)(adj[k], o[k].d[j]);
            r[j] = g;
        }
    }
};

static int launch_dual(const dc_bfn_cuda_launch *L) { return dc_bfn_cuda::launch<dual_op>(L); }
static int launch_adjoint(const dc_bfn_cuda_launch *L) { return dc_bfn_cuda::launch<adjoint_op>(L); }

#endif
