/* The CUDA entry points of a build without CUDA: every request for a device
 * is answered with DC_ERR_UNSUPPORTED, and nothing else is ever called. */
#include "nn_cuda.h"
#include "reduce_cuda.h"
#include "scan_cuda.h"
#include "sparse_cuda.h"

dc_status dc_cuda_init(dc_ctx *ctx)
{
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "dualcast was built without CUDA (DC_CUDA=OFF)");
}

void dc_cuda_shutdown(dc_ctx *ctx) { (void)ctx; }

void *dc_cuda_alloc(dc_ctx *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    return NULL;
}

void dc_cuda_free(dc_ctx *ctx, void *ptr)
{
    (void)ctx;
    (void)ptr;
}

dc_status dc_cuda_memset(dc_ctx *ctx, void *ptr, int value, size_t bytes)
{
    (void)ptr;
    (void)value;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_to_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_from_host(dc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_synchronize(dc_ctx *ctx)
{
    (void)ctx;
    return DC_OK;
}

dc_status dc_cuda_copy_between(dc_ctx *dst_ctx, void *dst, dc_ctx *src_ctx, const void *src, size_t bytes)
{
    (void)dst, (void)src_ctx, (void)src, (void)bytes;
    return dc_error(dst_ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

void *dc_ctx_cuda_stream(const dc_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

dc_device_memory_stats dc_cuda_memory_stats(const dc_ctx *ctx)
{
    (void)ctx;
    dc_device_memory_stats s = {0, 0, 0};
    return s;
}

dc_device_counters dc_cuda_counters(const dc_ctx *ctx)
{
    (void)ctx;
    dc_device_counters c = {0, 0, 0, 0, 0, 0};
    return c;
}

/* Never reached: without CUDA no context has ctx->cuda set. */
dc_status dc_cuda_run_kernel(dc_ctx *ctx, dc_kernel_id id, const void *arg, dc_dtype dtype, int ndim,
                             const int64_t *shape, int n_in, const dc_loop_in *in, int n_out, const dc_loop_out *out)
{
    (void)id, (void)arg, (void)dtype, (void)ndim, (void)shape, (void)n_in, (void)in, (void)n_out, (void)out;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_run_assoc_scan(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_scan_launch *L)
{
    (void)kernels, (void)L;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_run_assoc_vjp(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels, dc_assoc_vjp_launch *L)
{
    (void)kernels, (void)L;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_run_assoc_scan_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                         dc_assoc_scan_adjoint_launch *L)
{
    (void)kernels, (void)L;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_run_assoc_reduce_adjoint(dc_ctx *ctx, const dc_assoc_cuda_kernels *kernels,
                                           dc_assoc_reduce_adjoint_launch *L)
{
    (void)kernels, (void)L;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_run_bfn(dc_ctx *ctx, dc_bfn_cuda_launcher launcher, dc_dtype dtype, int ndim, const int64_t *shape,
                          int n_in, const dc_loop_in *in, int n_adj, const dc_loop_in *adj, int n_out,
                          const dc_loop_out *out)
{
    (void)launcher, (void)dtype, (void)ndim, (void)shape, (void)n_in, (void)in, (void)n_adj, (void)adj, (void)n_out,
        (void)out;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_gemm(dc_ctx *ctx, dc_dtype dtype, bool ta, bool tb, int m, int n, int k, const void *a, int64_t lda,
                       int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, double beta, void *c,
                       int64_t ldc, int64_t stride_c, int batch)
{
    (void)dtype, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)stride_a, (void)b, (void)ldb,
        (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c, (void)batch;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_gather_rows(dc_ctx *ctx, dc_dtype dtype, const void *table, int64_t rs, int64_t cs,
                              const int64_t *rows, int64_t n, int64_t width, void *out)
{
    (void)dtype, (void)table, (void)rs, (void)cs, (void)rows, (void)n, (void)width, (void)out;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_scatter_rows(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs, const int64_t *start,
                               const int64_t *positions, int64_t rows, int64_t width, const void *gy)
{
    (void)dtype, (void)grad, (void)rs, (void)cs, (void)start, (void)positions, (void)rows, (void)width, (void)gy;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_read_indices(dc_ctx *ctx, dc_dtype dtype, const void *values, int64_t n, int64_t limit, int site,
                               int64_t *out, double *parts)
{
    (void)dtype, (void)values, (void)n, (void)limit, (void)site, (void)out, (void)parts;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_group_indices(dc_ctx *ctx, const int64_t *ids, int64_t n, int64_t limit, int64_t *start,
                                int64_t *positions, int64_t *scratch)
{
    (void)ids, (void)n, (void)limit, (void)start, (void)positions, (void)scratch;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_fill(dc_ctx *ctx, dc_dtype dtype, void *x, int64_t n, double value)
{
    (void)dtype, (void)x, (void)n, (void)value;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_clip(dc_ctx *ctx, int n, dc_tensor *const *params, double max_norm, const double **norm)
{
    (void)n, (void)params, (void)max_norm, (void)norm;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_cross_entropy(dc_ctx *ctx, dc_dtype dtype, const void *logits, int64_t n, int64_t c,
                                const int64_t *targets, double *lse, double *loss_rows, void *out)
{
    (void)dtype, (void)logits, (void)n, (void)c, (void)targets, (void)lse, (void)loss_rows, (void)out;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_cross_entropy_grad(dc_ctx *ctx, dc_dtype dtype, void *grad, int64_t rs, int64_t cs,
                                     const void *logits, int64_t n, int64_t c, const int64_t *targets,
                                     const double *lse, const void *gy, bool add)
{
    (void)dtype, (void)grad, (void)rs, (void)cs, (void)logits, (void)n, (void)c, (void)targets, (void)lse, (void)gy,
        (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_adam(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double b1,
                       double b2, double eps, double weight_decay)
{
    (void)dtype, (void)n, (void)u, (void)lr, (void)b1, (void)b2, (void)eps, (void)weight_decay;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_sgd(dc_ctx *ctx, dc_dtype dtype, int n, const dc_cuda_update *u, const double *lr, double mu)
{
    (void)dtype, (void)n, (void)u, (void)lr, (void)mu;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_scan(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, void *y, int64_t outer,
                       int64_t len, int64_t inner, void *parts)
{
    (void)dtype, (void)op, (void)exclusive, (void)x, (void)y, (void)outer, (void)len, (void)inner, (void)parts;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_scan_adjoint(dc_ctx *ctx, dc_dtype dtype, int op, bool exclusive, const void *x, const void *y,
                               const void *gy, void *gx, int64_t outer, int64_t len, int64_t inner, void *parts,
                               bool add)
{
    (void)dtype, (void)op, (void)exclusive, (void)x, (void)y, (void)gy, (void)gx, (void)outer, (void)len, (void)inner,
        (void)parts, (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_scan_zero_safe_outputs(dc_ctx *ctx, dc_dtype dtype, bool exclusive, const void *x, const void *y,
                                         int64_t outer, int64_t len, int64_t inner, void *scratch, void *ys)
{
    (void)dtype, (void)exclusive, (void)x, (void)y, (void)outer, (void)len, (void)inner, (void)scratch, (void)ys;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_copy_parts(dc_ctx *ctx, dc_dtype dtype, int n, const dc_copy_part *parts)
{
    (void)dtype, (void)n, (void)parts;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_capture_begin(dc_ctx *ctx, dc_cuda_graph *reuse)
{
    (void)reuse;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_capture_end(dc_ctx *ctx, bool instantiate, dc_cuda_graph **graph)
{
    (void)instantiate;
    *graph = NULL;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

bool dc_cuda_capture_wanted_memory(const dc_ctx *ctx)
{
    (void)ctx;
    return false;
}

dc_status dc_cuda_graph_launch(dc_ctx *ctx, dc_cuda_graph *graph)
{
    (void)graph;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

void dc_cuda_graph_destroy(dc_ctx *ctx, dc_cuda_graph *graph)
{
    (void)ctx;
    (void)graph;
}

uint64_t dc_cuda_releases(const dc_ctx *ctx)
{
    (void)ctx;
    return 0;
}

dc_status dc_cuda_csr_mm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t out_rows, const void *ptr, const void *idx,
                         const void *perm, const void *vals, int64_t vs, const void *x, int64_t xr, int64_t xc,
                         int64_t n, void *out, int64_t orow, int64_t ocol, bool add)
{
    (void)dtype, (void)wide, (void)out_rows, (void)ptr, (void)idx, (void)perm, (void)vals, (void)vs, (void)x, (void)xr;
    (void)xc, (void)n, (void)out, (void)orow, (void)ocol, (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_csr_sddmm(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t rows, int64_t nnz, const void *row_ptr,
                            const void *col_idx, const void *u, int64_t ur, int64_t uc, const void *v, int64_t vr,
                            int64_t vc, int64_t n, void *out, int64_t os, bool add)
{
    (void)dtype, (void)wide, (void)rows, (void)nnz, (void)row_ptr, (void)col_idx, (void)u, (void)ur, (void)uc;
    (void)v, (void)vr, (void)vc, (void)n, (void)out, (void)os, (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_csr_permute(dc_ctx *ctx, dc_dtype dtype, bool wide, int64_t nnz, const void *perm, bool scatter,
                              const void *in, int64_t is, void *out, int64_t os, bool add)
{
    (void)dtype, (void)wide, (void)nnz, (void)perm, (void)scatter, (void)in, (void)is, (void)out, (void)os, (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_csr_dense(dc_ctx *ctx, dc_dtype dtype, bool wide, bool to_dense, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, void *vals, int64_t vs, void *d,
                            int64_t dr, int64_t dc, bool add)
{
    (void)dtype, (void)wide, (void)to_dense, (void)rows, (void)cols, (void)nnz, (void)row_ptr, (void)col_idx;
    (void)vals, (void)vs, (void)d, (void)dr, (void)dc, (void)add;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

size_t dc_cuda_reduce_scratch(int64_t outer, int64_t len, int64_t inner)
{
    (void)outer, (void)len, (void)inner;
    return 0;
}

dc_status dc_cuda_reduce_block(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                               int64_t inner, void *y, void *nz, int64_t *aux, void *scratch)
{
    (void)kind, (void)dtype, (void)x, (void)outer, (void)len, (void)inner, (void)y, (void)nz, (void)aux, (void)scratch;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_reduce_block_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *x, int64_t outer, int64_t len,
                                    int64_t inner, const void *y, const void *nz, const int64_t *aux, const void *gy,
                                    void *g)
{
    (void)kind, (void)dtype, (void)x, (void)outer, (void)len, (void)inner, (void)y, (void)nz, (void)aux, (void)gy,
        (void)g;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

size_t dc_cuda_segment_scratch(int64_t n, int64_t n_segments, int64_t width, int64_t piece_rows)
{
    (void)n, (void)n_segments, (void)width, (void)piece_rows;
    return 0;
}

dc_status dc_cuda_segment_reduce(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n, int64_t width,
                                 const int64_t *start, const int64_t *positions, int64_t n_segments, int64_t piece_rows,
                                 void *y, void *nz, int64_t *aux, void *scratch)
{
    (void)kind, (void)dtype, (void)values, (void)n, (void)width, (void)start, (void)positions, (void)n_segments,
        (void)piece_rows, (void)y, (void)nz, (void)aux, (void)scratch;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cuda_segment_reduce_grad(dc_ctx *ctx, int kind, dc_dtype dtype, const void *values, int64_t n,
                                      int64_t width, const int64_t *index, const void *y, const void *nz,
                                      const int64_t *aux, const void *gy, void *g)
{
    (void)kind, (void)dtype, (void)values, (void)n, (void)width, (void)index, (void)y, (void)nz, (void)aux, (void)gy,
        (void)g;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cusparse_mm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t out_rows, int64_t in_rows,
                         int64_t nnz, const void *ptr, const void *idx, const void *perm, const void *vals, int64_t vs,
                         const void *x, int64_t xr, int64_t xc, int64_t n, void *out, int64_t orow, int64_t ocol,
                         bool add, bool *taken)
{
    (void)dtype, (void)wide, (void)out_rows, (void)in_rows, (void)nnz, (void)ptr, (void)idx, (void)perm, (void)vals;
    (void)tape, (void)vs, (void)x, (void)xr, (void)xc, (void)n, (void)out, (void)orow, (void)ocol, (void)add;
    *taken = false;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}

dc_status dc_cusparse_sddmm(dc_ctx *ctx, dc_tape *tape, dc_dtype dtype, bool wide, int64_t rows, int64_t cols,
                            int64_t nnz, const void *row_ptr, const void *col_idx, const void *u, int64_t ur,
                            int64_t uc, const void *v, int64_t vr, int64_t vc, int64_t n, void *out, int64_t os,
                            bool add, bool *taken)
{
    (void)dtype, (void)wide, (void)rows, (void)cols, (void)nnz, (void)row_ptr, (void)col_idx, (void)u, (void)ur;
    (void)tape, (void)uc, (void)v, (void)vr, (void)vc, (void)n, (void)out, (void)os, (void)add;
    *taken = false;
    return dc_error(ctx, DC_ERR_UNSUPPORTED, "built without CUDA");
}
