#!/usr/bin/env python3
"""Writes fuzz_ops inputs from readable programs: the seed corpus
(corpus/fuzz_ops/) and the hand-written reproducers of known bugs (known/).

The byte encoding is the one fuzz_ops.c reads (see run_program and the op_*
functions there); this file is its only other description, so change both
together. Run it from anywhere: python3 tests/fuzz/ops_programs.py. Check a
program with DC_FUZZ_TRACE=1 build-fuzz/tests/fuzz/fuzz_ops FILE, which prints
every call it makes."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

BOUND = (2**63 - 1) // 16
# fz_dim: bytes below 160 give 0..5, the others index this table
DIM_SPECIAL = [0, 1, 2, 3, 4, 5, 7, 8, 16, 31, 64, 255, 1000, 4096, 2**16, 2**31 - 1, 2**31, 2**32, 2**34,
               2**40, 2**58, BOUND, BOUND + 1, 2**62, 2**63 - 1, -1, -2**63, 2**30]
# fz_double's table
DOUBLES = [0.0, 1.0, -1.0, 0.5, 2.0, "-0", 3.0, -2.5, 0.25, 1e-3, 100.0, 1e30, -1e30, 1e300, -1e300, 4.9e-324,
           1e-310, "inf", "-inf", "nan", 7.0, -7.0, 0.75, 1e-45]
BFNS = ["gated_scale", "polar_pair", "hmlstm_update_c", "hmlstm_cell", "prod_sign_1", "prod_sign_2",
        "prod_sign_3", "prod_sign_5", "prod_sign_8", "prod_sign_10"]
BFN_INPUTS = {"gated_scale": 3, "polar_pair": 2, "hmlstm_update_c": 6, "hmlstm_cell": 8, "prod_sign_1": 1,
              "prod_sign_2": 2, "prod_sign_3": 3, "prod_sign_5": 5, "prod_sign_8": 8, "prod_sign_10": 10}
BFN_OUTPUTS = {"polar_pair": 2, "hmlstm_cell": 2}


def dim(v):
    if 0 <= v <= 5:
        return [v]
    return [160 + DIM_SPECIAL.index(v)]


def dbl(v):
    return DOUBLES.index(v)


def int_arg(v):
    """fz_int: -10..13 directly."""
    assert -10 <= v <= 13
    return v + 10


def i64(v):
    """fz_i64: -4..15 directly, else through the size table (or negated)."""
    if -4 <= v <= 15:
        return [v + 4]
    if v in DIM_SPECIAL:
        return [128] + dim(v)
    if -v in DIM_SPECIAL:
        return [192] + dim(-v)
    return [224] + list((v & (2**64 - 1)).to_bytes(8, "little"))


class Program:
    """Builds one input; each method appends one instruction and returns the
    pool index of the tensor it adds (tensors are numbered in the order they
    are made, as long as no tape is reset and no result is dropped)."""

    def __init__(self):
        self.b = []
        self.n = 0

    def _new_index(self):
        self.n += 1
        return self.n - 1

    def new(self, shape, f64=True, where="persistent", grad=False, fill=(3, [0]), from_host=False,
            other_ctx=False):
        kind = {"persistent": 0, "tape0": 2, "tape1": 3}[where]
        flags = (1 if f64 else 0) | kind << 1 | (8 if grad else 0) | (16 if from_host else 0)
        if other_ctx:
            flags |= 0xE0
        self.b += [0, flags, len(shape)]
        for s in shape:
            self.b += dim(s)
        numel = 1
        for s in shape:
            numel *= s
        if 0 < numel <= 2**14 and all(0 <= s for s in shape):
            mode, pattern = fill  # mode 0: pattern, 1: ids 0..classes-1, 2: some out of range, 3: sin
            classes = pattern[0] if mode in (1, 2) else 1
            values = [0] if mode in (1, 2) else pattern
            self.b += [mode, len(values) - 1, classes - 1] + [dbl(v) for v in values]
        return self._new_index()

    def ids(self, shape, classes, where="persistent", f64=True):
        return self.new(shape, f64=f64, where=where, fill=(1, [classes]))

    def scalar(self, value, f64=True, tape=0):
        self.b += [3 | tape << 7, 1 if f64 else 0, dbl(value)]
        return self._new_index()

    def binary(self, op, a, b, tape=0):
        self.b += [4 | tape << 7, ["add", "sub", "mul", "div", "pow"].index(op), a, b]
        return self._new_index()

    def unary(self, op, x, *args, tape=0):
        names = ["neg", "exp", "log", "tanh", "sigmoid", "relu", "affine", "hard_sigmoid", "step_st"]
        self.b += [5 | tape << 7, names.index(op), x] + [dbl(a) for a in args]
        return self._new_index()

    def select(self, c, a, b, tape=0):
        self.b += [6 | tape << 7, c, a, b]
        return self._new_index()

    def reduce(self, x, axes=None, mean=False, keepdims=False, tape=0):
        flags = (1 if mean else 0) | (2 if keepdims else 0)
        axes = axes or []
        self.b += [7 | tape << 7, flags, x, len(axes) + 1] + [int_arg(a) for a in axes]
        return self._new_index()

    def matmul(self, a, b, tape=0):
        self.b += [8 | tape << 7, a, b]
        return self._new_index()

    def transpose(self, x, a0, a1, tape=0):
        self.b += [9 | tape << 7, x, int_arg(a0), int_arg(a1)]
        return self._new_index()

    def reshape(self, x, shape, tape=0):
        self.b += [10 | tape << 7, x, 0, len(shape) + 1]
        for s in shape:
            self.b += [64] if s == -1 else [96] + dim(s)
        return self._new_index()

    def slice(self, x, axis, start, length, tape=0):
        self.b += [11 | tape << 7, x, int_arg(axis)] + i64(start) + i64(length)
        return self._new_index()

    def concat(self, xs, axis, n=None, repeat=1, tape=0):
        """n tensors: each pick of xs (cycled) is used `repeat` times in a row
        (1, 9, 17 or 25), as many picks as n needs."""
        n = len(xs) * repeat if n is None else n
        if n < 8:
            head = n + 8
        else:
            assert n % 4 == 0 and 8 <= n <= 64
            head = 240 + (n - 8) // 4
        assert repeat in (1, 9, 17, 25)
        picks = [xs[i % len(xs)] for i in range(-(-n // repeat))]
        self.b += [12 | tape << 7, head, (repeat - 1) // 8] + picks + [int_arg(axis)]
        return self._new_index()

    def embedding(self, table, ids, tape=0):
        self.b += [13 | tape << 7, table, ids]
        return self._new_index()

    def cross_entropy(self, logits, targets, tape=0):
        self.b += [14 | tape << 7, logits, targets]
        return self._new_index()

    def broadcast(self, fn, inputs, entry="policy", policy="store", tape=0):
        assert len(inputs) == BFN_INPUTS[fn]
        flags = {"broadcast1": 0, "broadcast": 1, "policy": 2}[entry]
        self.b += [15 | tape << 7, BFNS.index(fn), flags] + list(inputs)
        if entry == "policy":
            self.b += [{"store": 0, "recompute": 1, "invalid": 3}[policy]]
        outs = 1 if entry == "broadcast1" else BFN_OUTPUTS.get(fn, 1)
        return [self._new_index() for _ in range(outs)]

    def backward(self, y, sum_first=True, tape=0):
        self.b += [17 | tape << 7, 2 if sum_first else 0, y]
        if sum_first:
            return self._new_index()  # the sum, when y has more than one element
        return None

    def backward_with(self, y, adjoint, tape=0):
        self.b += [17 | tape << 7, 1, y, adjoint]

    def reset(self, tape=0):
        self.b += [18 | tape << 7, 0]

    def recording(self, on, tape=0):
        self.b += [18 | tape << 7, 1, 1 if on else 0]

    def tensor_call(self, which, x, *rest):
        names = ["get", "item", "set", "fill", "fill_uniform", "fill_normal", "requires_grad", "zero_grad", "copy",
                 "set_name"]
        self.b += [19, names.index(which), x] + list(rest)

    def optim(self, params, kind="sgd", lr=0.5, other=0.5, new_lrs=(0.25, -1.0)):
        """clip (lr is max_norm), or two steps of sgd or adam, each followed
        by a new learning rate (a negative one is refused)."""
        flags = {"clip": 1, "sgd": 0, "adam": 2}[kind]
        self.b += [20, flags, len(params)] + list(params) + [dbl(lr)]
        if kind == "sgd":
            self.b += [dbl(other)]
        if kind != "clip":
            self.b += [dbl(v) for v in new_lrs]

    def gradcheck(self, loss, inputs, max_per_input=2):
        """loss: 0 tanh(a), 1 a * b, 2 a @ b, 3 prod_sign_2(a, b); summed."""
        self.b += [21, loss] + list(inputs) + [0, max_per_input - 1]

    def bytes(self):
        return bytes(self.b)


def seeds():
    out = {}

    p = Program()  # a layer: tanh(x @ w + b), mean, backward
    x = p.new([4, 3], grad=True)
    w = p.new([3, 2], grad=True, fill=(0, [0.5, -1.0, 2.0]))
    b = p.new([2], grad=True, fill=(0, [0.25]))
    y = p.matmul(x, w)
    y = p.binary("add", y, b)
    y = p.unary("tanh", y)
    p.reduce(y, mean=True)
    out["layer"] = p

    p = Program()  # every elementwise op on broadcast operands, float32
    a = p.new([2, 1, 3], f64=False, grad=True)
    b = p.new([1, 4, 1], f64=False, grad=True, fill=(0, [0.5, 2.0, 3.0]))
    y = p.binary("add", a, b)
    for op in ["sub", "mul", "div", "pow"]:
        y = p.binary(op, y, b)
    for op in ["neg", "exp", "log", "tanh", "sigmoid", "relu"]:
        y = p.unary(op, y)
    y = p.unary("affine", y, 2.0, -1.0)
    y = p.unary("hard_sigmoid", y, 0.5)
    y = p.unary("step_st", y, 0.25)
    p.reduce(y)
    out["elementwise_f32"] = p

    p = Program()  # select, and a scalar operand
    c = p.new([3, 1], fill=(0, [0.0, 1.0]))
    a = p.new([3, 4], grad=True)
    s = p.scalar(2.0)
    y = p.select(c, a, s)
    p.backward(y)
    out["select"] = p

    p = Program()  # reductions over axes, keepdims, negative axes
    x = p.new([2, 3, 4], grad=True)
    y = p.reduce(x, axes=[1], keepdims=True)
    z = p.reduce(x, axes=[-1, 0], mean=True)
    w = p.binary("mul", y, z)
    p.reduce(w, axes=[0, 1, 2])
    out["reduce"] = p

    p = Program()  # views: transpose, reshape, slice, concat
    x = p.new([2, 3, 4], grad=True)
    t = p.transpose(x, 0, 2)
    r = p.reshape(t, [4, -1])
    s = p.slice(r, 1, 1, 3)
    c = p.concat([s, s], 1)
    p.backward(c)
    out["layout"] = p

    p = Program()  # embedding and cross entropy
    table = p.new([5, 3], grad=True)
    ids = p.ids([2, 2], 5)
    e = p.embedding(table, ids)
    logits = p.reshape(e, [4, 3])
    targets = p.ids([4], 3)
    p.cross_entropy(logits, targets)
    out["embedding_cross_entropy"] = p

    for fn in BFNS:
        for policy in ["store", "recompute"]:
            p = Program()
            xs = [p.new([2, 3], grad=True), p.new([1, 3], grad=True, fill=(0, [1.0, 0.0])), p.new([2, 1], grad=True)]
            ins = [xs[i % 3] for i in range(BFN_INPUTS[fn])]
            p.broadcast(fn, ins, policy=policy)
            out["bfn_%s_%s" % (fn, policy)] = p

    p = Program()  # empty tensors with huge sizes that the ops take
    e = p.new([0, 2**58], grad=True)
    p.unary("exp", e)
    p.reduce(e, axes=[1])
    f = p.new([2**40, 0], grad=True)
    p.transpose(f, 0, 1)
    p.reshape(f, [0, -1])
    out["empty_huge"] = p

    p = Program()  # two tapes, a reset, a second backward, backward_with
    x = p.new([3], grad=True)
    y = p.unary("exp", x, tape=1)
    p.backward_with(y, x, tape=1)
    p.backward(y, tape=1)
    p.reset(tape=1)
    y = p.unary("tanh", x, tape=0)
    out["tapes"] = p

    p = Program()  # optimizers and clipping after a backward pass
    w = p.new([2, 2], grad=True)
    y = p.unary("sigmoid", w)
    p.backward(y)
    p.optim([w], "clip", 1.0)
    p.optim([w], "sgd", 0.5, 0.5)
    p.optim([w], "adam", 0.25)
    out["optim"] = p

    p = Program()  # the single-tensor calls
    x = p.new([2, 3])
    p.tensor_call("fill_uniform", x, dbl(-1.0), dbl(2.0))
    p.tensor_call("fill_normal", x, dbl(0.0), dbl(1.0))
    p.tensor_call("set", x, 5, dbl(3.0))
    p.tensor_call("get", x, 9)
    y = p.new([2, 3], grad=True)
    p.tensor_call("copy", y, x)
    p.tensor_call("set_name", y, 2)
    p.binary("add", x, p.new([4]))  # a shape error that names y
    out["tensor_calls"] = p

    p = Program()  # gradient checks, float64 and float32
    a = p.new([2, 3], grad=True)
    b = p.new([3, 2], grad=True)
    p.gradcheck(2, [a, b])
    p.gradcheck(0, [a])
    p.gradcheck(3, [a, a])
    c = p.new([2, 3], f64=False, grad=True)
    p.gradcheck(1, [a, c])
    out["gradcheck"] = p
    return out


def known():
    """Reproducers of the bugs in known/README.md, written by hand."""
    out = {}
    p = Program()  # [2^31, 0, 1] + [1, 0, 2^31] is [2^31, 0, 2^31], beyond the size bound; summed over
    a = p.new([2**31, 0, 1], grad=True)  # its empty axis it is [2^31, 1, 2^31]: 2^62 elements, 2^65
    b = p.new([1, 0, 2**31], grad=True)  # bytes, which wrap to 0
    y = p.binary("add", a, b)
    p.reduce(y, axes=[1], keepdims=True)
    out["bound-add-sum"] = p

    p = Program()  # concat of 64 [0, 2^58] along axis 1: the sizes' sum overflows
    x = p.new([0, 2**58], grad=True)
    p.concat([x], 1, n=64, repeat=25)
    out["bound-concat"] = p

    p = Program()  # embedding of ids [0, 2^58] in a table [0, 2^58]: a [0, 2^58, 2^58] result
    x = p.new([0, 2**58], grad=True)
    p.embedding(x, x)
    out["bound-embedding"] = p

    p = Program()  # [2^34, 1, 0] @ [0, 2^30]: a [2^34, 1, 2^30] result of 2^64 elements
    a = p.new([2**34, 1, 0], grad=True)
    b = p.new([0, 2**30], grad=True)
    p.matmul(a, b)
    out["bound-matmul"] = p

    p = Program()  # [2^40, 0, 0] @ [2^40, 0, 0]: 2^40 empty products, one by one
    a = p.new([2**40, 0, 0], where="tape0")
    p.matmul(a, a)
    out["matmul-empty-batch-timeout"] = p

    p = Program()  # [65536, 16, 0, 2] @ [2, 4], then backward: a's gradient has no slices
    a = p.new([2**16, 16, 0, 2], grad=True)
    b = p.new([2, 4], grad=True)
    y = p.matmul(a, b)
    p.backward(y)
    out["matmul-backward-empty-oob"] = p

    p = Program()  # a broadcast function of [1, 0, 2^58] and [64, 1, 1]: its result [64, 0, 2^58] is
    a = p.new([1, 0, 2**58], grad=True)  # beyond the bound, and its contiguous strides were computed
    b = p.new([64, 1, 1], grad=True)  # (and overflowed) before the output's allocation refused it
    p.broadcast("prod_sign_2", [a, b])
    out["bound-broadcast-fn"] = p
    return out


def main():
    corpus = os.path.join(HERE, "corpus", "fuzz_ops")
    os.makedirs(corpus, exist_ok=True)
    for name, p in seeds().items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(p.bytes())
    if "--known" in sys.argv:
        for name, p in known().items():
            with open(os.path.join(HERE, "known", name), "wb") as f:
                f.write(p.bytes())


if __name__ == "__main__":
    main()
