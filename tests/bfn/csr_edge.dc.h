/* An edge weight over a sparse matrix's entries, with a branch on a
 * differentiable input: a * u * v where the entry a is positive, else
 * tanh(u) - v * a. */
DC_BFN(csr_edge, DC_OUTPUTS(w), DC_WRT(a), DC_WRT(u), DC_WRT(v))
{
    if (dc_val(a) > 0)
        DC_RETURN(dc_mul(dc_mul(a, u), v));
    DC_RETURN(dc_sub(dc_tanh(u), dc_mul(v, a)));
}
