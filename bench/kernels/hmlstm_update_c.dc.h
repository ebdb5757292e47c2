/* The c-update of the HM-LSTM benchmark (Revels et al. 2018): one row of
 * control values z, zb chooses between FLUSH, COPY and UPDATE. */
DC_BFN(hmlstm_update_c, DC_OUTPUTS(c_next),
       DC_CTRL(z), DC_CTRL(zb), DC_WRT(c), DC_WRT(f), DC_WRT(i), DC_WRT(g))
{
    if (z == 1)                                       /* FLUSH */
        DC_RETURN(dc_mul(dc_sigmoid(i), dc_tanh(g)));
    else if (zb == 0)                                 /* COPY */
        DC_RETURN(c);
    else                                              /* UPDATE */
        DC_RETURN(dc_add(dc_mul(dc_sigmoid(f), c), dc_mul(dc_sigmoid(i), dc_tanh(g))));
}
