/* A control input between differentiable ones, used in arithmetic and in a
 * branch: gate ? a * scale : exp(a) - b. */
DC_BFN(gated_scale, DC_OUTPUTS(out), DC_WRT(a), DC_CTRL(gate), DC_WRT(b))
{
    if (gate != 0)
        DC_RETURN(dc_mul(a, dc_add(gate, b)));
    DC_RETURN(dc_sub(dc_exp(a), b));
}
