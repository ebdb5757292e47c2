/* A user's broadcast function: x below the limit, else a soft clip of it. */
DC_BFN(softclip, DC_OUTPUTS(y), DC_WRT(x), DC_CTRL(limit))
{
    if (dc_val(x) < limit)
        DC_RETURN(x);
    DC_RETURN(dc_add(limit, dc_log1p(dc_sub(x, limit))));
}
