/* The kernels and launchers of one pass of bfn_cuda_instance.cuh: the primal
 * kernel, or (when DC_BFN_DUAL is defined) the dual and adjoint kernels.
 * No include guard: included once per pass, inside the pass's namespace. */

#if !defined(DC_BFN_DUAL)

namespace primal_k
{
DC_BFN_CUDA_PARAMS(DC_BFN_NOUT_)

__global__ void kernel(params p)
{
    DC_BFN_CUDA_LOOP(p, e)
    {
        DC_BFN_CUDA_LOAD(p, e, x)
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
        for (int k = 0; k < DC_BFN_NOUT_; ++k)
            p.out[k][e] = o[k];
    }
}
} // namespace primal_k

static int launch_primal(const dc_bfn_cuda_launch *L) { return primal_k::launch(L, primal_k::kernel); }

#else

namespace dual_k
{
DC_BFN_CUDA_PARAMS(DC_BFN_NOUT_ * (1 + DC_BFN_NWRT_))

/* Outputs, then partial (k, j) at DC_BFN_NOUT_ + k * DC_BFN_NWRT_ + j: one
 * array each, so the stores of a warp are coalesced. */
__global__ void kernel(params p)
{
    DC_BFN_CUDA_LOOP(p, e)
    {
        DC_BFN_CUDA_LOAD(p, e, x)
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
        for (int k = 0; k < DC_BFN_NOUT_; ++k) {
            p.out[k][e] = o[k].v;
            for (int j = 0; j < DC_BFN_NWRT_; ++j)
                p.out[DC_BFN_NOUT_ + k * DC_BFN_NWRT_ + j][e] = o[k].d[j];
        }
    }
}
} // namespace dual_k

namespace adjoint_k
{
DC_BFN_CUDA_PARAMS(DC_BFN_NWRT_ > 0 ? DC_BFN_NWRT_ : 1)

/* Recompute policy: the duals again, times the output adjoints, summed over
 * outputs; one contribution array per differentiable input. */
__global__ void kernel(params p)
{
    DC_BFN_CUDA_LOOP(p, e)
    {
        DC_BFN_CUDA_LOAD(p, e, x)
        dc_var o[DC_BFN_NOUT_];
        DC_BFN_ID(dc_bfn_body)(x, o);
        for (int j = 0; j < DC_BFN_NWRT_; ++j) {
            dc_real g = DC_BFN_P_(adj_mul)(p.adj[0][e], o[0].d[j]);
            for (int k = 1; k < DC_BFN_NOUT_; ++k)
                g += DC_BFN_P_(adj_mul)(p.adj[k][e], o[k].d[j]);
            p.out[j][e] = g;
        }
    }
}
} // namespace adjoint_k

static int launch_dual(const dc_bfn_cuda_launch *L) { return dual_k::launch(L, dual_k::kernel); }
static int launch_adjoint(const dc_bfn_cuda_launch *L) { return adjoint_k::launch(L, adjoint_k::kernel); }

#endif
