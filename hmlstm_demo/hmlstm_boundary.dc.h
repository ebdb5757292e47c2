/* The boundary detector of one layer: z is 1 where the hard sigmoid of the
 * boundary unit's pre-activation pz passes 0.5, else 0, and its derivative
 * is the hard sigmoid's (the straight-through estimator): the value hs plus
 * a constant that moves it onto the step. Both sums are exact in floating
 * point (1 - hs for hs in [0.5, 1], and hs - hs). The slope is an input, a
 * tensor, so that a step replayed from a CUDA graph reads the slope of its
 * own step. */
DC_BFN(hmlstm_boundary, DC_OUTPUTS(z), DC_CTRL(slope), DC_WRT(pz))
{
    dc_var hs = dc_hard_sigmoid(pz, slope);
    DC_RETURN(dc_add(hs, dc_const((dc_val(hs) > 0.5 ? 1 : 0) - dc_val(hs))));
}
