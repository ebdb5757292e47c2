/* The HM-LSTM cell of one layer (Chung, Ahn, Bengio 2017) as ONE broadcast
 * function: gate pre-activations, previous cell and hidden state in, next
 * cell and hidden state out. The boundary values choose the operation:
 *   z_prev (this layer, t-1) | z_below (layer below, t) | operation
 *             1              |          any            | FLUSH
 *             0              |           0             | COPY
 *             0              |           1             | UPDATE          */
DC_BFN(hmlstm_cell, DC_OUTPUTS(c_next, h_next), DC_CTRL(z_prev), DC_CTRL(z_below),
       DC_WRT(pf), DC_WRT(pi), DC_WRT(po), DC_WRT(pg), DC_WRT(c_prev), DC_WRT(h_prev))
{
    if (z_prev == 1) {
        dc_var c = dc_mul(dc_sigmoid(pi), dc_tanh(pg));
        DC_RETURN(c, dc_mul(dc_sigmoid(po), dc_tanh(c)));
    }
    if (z_below == 0)
        DC_RETURN(c_prev, h_prev);
    dc_var c = dc_add(dc_mul(dc_sigmoid(pf), c_prev), dc_mul(dc_sigmoid(pi), dc_tanh(pg)));
    DC_RETURN(c, dc_mul(dc_sigmoid(po), dc_tanh(c)));
}

