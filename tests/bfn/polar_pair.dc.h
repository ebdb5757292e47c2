/* Two outputs from one body: (r cos t, r sin t), and a data-dependent branch
 * on a differentiable input's value. */
DC_BFN(polar_pair, DC_OUTPUTS(x, y), DC_WRT(r), DC_WRT(t))
{
    if (dc_val(r) < 0)
        DC_RETURN(0, 0);
    DC_RETURN(dc_mul(r, dc_cos(t)), dc_mul(r, dc_sin(t)));
}
