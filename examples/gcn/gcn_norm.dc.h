/* The symmetric normalization of a graph's adjacency, entry by entry:
 * a_ij / sqrt(d_i d_j), given u_i = 1 / sqrt(d_i) and v_j = 1 / sqrt(d_j). */
DC_BFN(gcn_norm, DC_OUTPUTS(w), DC_WRT(a), DC_WRT(u), DC_WRT(v))
{
    DC_RETURN(dc_mul(dc_mul(a, u), v));
}
