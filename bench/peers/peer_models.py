"""The computations dualcast is compared on, written once for PyTorch and JAX.

Each function takes `ops`, a small namespace of the array operations it needs
(TorchOps or JaxOps below), so both frameworks run the same math. The HM-LSTM
follows hmlstm_demo/hmlstm.c exactly:

  pre = [z_below * h_below, h_prev, z_prev * h_above_prev] @ W + b
  f, i, o, g = sigmoid, sigmoid, sigmoid, tanh of the four H-wide slices
  zt = hard_sigmoid(pre[:, 4H], slope); z = step(zt > 0.5), straight-through
  FLUSH (z_prev == 1): c = i g;  COPY (z_prev == 0, z_below == 0): c, h kept;
  UPDATE: c = f c_prev + i g;  h = o tanh(c) after FLUSH and UPDATE
  output: g_l = sigmoid([h_1..h_L] @ gate_w), logits = relu(sum_l g_l h_l @
  out_w_l) @ head_w + head_b; loss = mean cross entropy in nats.

The input layer's boundary is 1 (no multiplication), the top layer has no
top-down input.
"""


class TorchOps:
    def __init__(self, torch):
        self.t = torch
        self.F = torch.nn.functional

    def cat(self, xs, axis):
        return self.t.cat(xs, dim=axis)

    def sigmoid(self, x):
        return self.t.sigmoid(x)

    def tanh(self, x):
        return self.t.tanh(x)

    def relu(self, x):
        return self.t.relu(x)

    def where(self, cond, a, b):
        return self.t.where(cond, a, b)

    def stop_gradient(self, x):
        return x.detach()

    def step(self, x, threshold):
        return (x > threshold).to(x.dtype)

    def embedding(self, table, ids):
        return table[ids]

    def cross_entropy(self, logits, targets):
        return self.F.cross_entropy(logits, targets)

    def time_loop(self, body, carry, xs):
        """body(carry, x) -> (carry, ys) over xs' first axis; returns, for each
        of the ys, the values of every step joined along axis 0."""
        steps = []
        for t in range(xs.shape[0]):
            carry, ys = body(carry, xs[t])
            steps.append(ys)
        return [self.t.cat([s[k] for s in steps], dim=0) for k in range(len(steps[0]))]


class JaxOps:
    def __init__(self, jax):
        self.jax = jax
        self.np = jax.numpy

    def cat(self, xs, axis):
        return self.np.concatenate(xs, axis=axis)

    def sigmoid(self, x):
        return self.jax.nn.sigmoid(x)

    def tanh(self, x):
        return self.np.tanh(x)

    def relu(self, x):
        return self.jax.nn.relu(x)

    def where(self, cond, a, b):
        return self.np.where(cond, a, b)

    def stop_gradient(self, x):
        return self.jax.lax.stop_gradient(x)

    def step(self, x, threshold):
        return (x > threshold).astype(x.dtype)

    def embedding(self, table, ids):
        return self.np.take(table, ids, axis=0)

    def cross_entropy(self, logits, targets):
        shifted = logits - self.jax.lax.stop_gradient(logits.max(axis=1, keepdims=True))
        logsumexp = self.np.log(self.np.exp(shifted).sum(axis=1))
        picked = self.np.take_along_axis(shifted, targets[:, None], axis=1)[:, 0]
        return (logsumexp - picked).mean()

    def time_loop(self, body, carry, xs):
        """As TorchOps.time_loop, with lax.scan."""
        _, ys = self.jax.lax.scan(body, carry, xs)
        return [y.reshape(-1, y.shape[-1]) for y in ys]


def cupdate(ops, z, zb, c, f, i, g):
    """The paper's c-update: FLUSH if z == 1, COPY elif zb == 0, else UPDATE."""
    flush = ops.sigmoid(i) * ops.tanh(g)
    update = ops.sigmoid(f) * c + flush
    return ops.where(z == 1, flush, ops.where(zb == 0, c, update))


def hard_sigmoid(ops, x, slope):
    """max(0, min(1, (slope x + 1) / 2)); derivative slope / 2 strictly inside
    (0, 1) and 0 elsewhere, as dualcast's dc_op_hard_sigmoid."""
    u = slope * x + 1
    inside = (u > 0) & (u < 2)
    return ops.where(inside, u * 0.5, ops.step(u, 1.0))  # outside: 0 below, 1 above


def step_straight_through(ops, x, threshold):
    """x > threshold ? 1 : 0 forward, identity backward. The forward value is
    exactly the step: (x - stop_gradient(x)) is an exact zero."""
    return ops.stop_gradient(ops.step(x, threshold)) + (x - ops.stop_gradient(x))


def hmlstm_cell(ops, z_prev, z_below, pre, c_prev, h_prev, hidden):
    """z_prev, z_below: [B, 1] boundaries (control: no gradient through the
    cell); z_below None for the input layer, whose boundary is always 1."""
    H = hidden
    f = ops.sigmoid(pre[:, 0:H])
    i = ops.sigmoid(pre[:, H:2 * H])
    o = ops.sigmoid(pre[:, 2 * H:3 * H])
    g = ops.tanh(pre[:, 3 * H:4 * H])
    flush_c = i * g
    update_c = f * c_prev + flush_c
    flush = z_prev == 1
    if z_below is None:
        c = ops.where(flush, flush_c, update_c)
        return c, o * ops.tanh(c)
    copy = z_below == 0
    c = ops.where(flush, flush_c, ops.where(copy, c_prev, update_c))
    h_new = o * ops.tanh(c)
    h = ops.where(flush, h_new, ops.where(copy, h_prev, h_new))
    return c, h


def hmlstm_time_step(ops, params, cfg, carry, x_t):
    """One character for every layer: carry = (h, c, z), tuples over layers;
    x_t: [B, E]. Returns the new carry and the layers' hidden states."""
    L, H, slope = cfg["layers"], cfg["hidden"], cfg["slope"]
    h, c, z = list(carry[0]), list(carry[1]), list(carry[2])
    below, z_below = x_t, None
    for l in range(L):
        parts = [below if z_below is None else z_below * below, h[l]]
        if l < L - 1:
            parts.append(z[l] * h[l + 1])
        pre = ops.cat(parts, 1) @ params[f"w{l + 1}"] + params[f"b{l + 1}"]
        zt = hard_sigmoid(ops, pre[:, 4 * H:4 * H + 1], slope)
        z_new = step_straight_through(ops, zt, 0.5)
        c[l], h[l] = hmlstm_cell(ops, z[l], z_below, pre, c[l], h[l], H)
        z[l] = z_new
        below, z_below = h[l], z_new
    return (tuple(h), tuple(c), tuple(z)), tuple(h)


def hmlstm_loss(ops, params, ids, targets, state, cfg):
    """Mean cross entropy (nats) of one batch; ids, targets: [T, B] integers;
    params: a dict by dualcast's names; state: dict of h1.., c1.., z1... The
    time loop is ops.time_loop: a Python loop (PyTorch) or lax.scan (JAX)."""
    L = cfg["layers"]
    carry = tuple(tuple(state[f"{k}{l + 1}"] for l in range(L)) for k in "hcz")
    x_all = ops.embedding(params["embedding"], ids)  # [T, B, E]
    per_layer = ops.time_loop(lambda cr, x_t: hmlstm_time_step(ops, params, cfg, cr, x_t), carry, x_all)
    # per_layer[l]: [T B, H], every step's hidden states of layer l, t-major
    gates = ops.sigmoid(ops.cat(per_layer, 1) @ params["gate_w"])
    acc = None
    for l in range(L):
        term = gates[:, l:l + 1] * (per_layer[l] @ params[f"out_w{l + 1}"])
        acc = term if acc is None else acc + term
    logits = ops.relu(acc) @ params["head_w"] + params["head_b"]
    return ops.cross_entropy(logits, targets.reshape(-1))


def prim(ops, op, a, b):
    """The primitive ops of the sweep."""
    if op == "add":
        return a + b
    if op == "mul":
        return a * b
    if op == "matmul":
        return a @ b
    return a.sum()
