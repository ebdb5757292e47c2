#!/usr/bin/env python3
"""Writes fuzz_reductions inputs from readable cases: the seed corpus
(corpus/fuzz_reductions/) and, with --known, the reproducers of the bugs in
known/ whose names start with red-.

The byte encoding is the one fuzz_reductions.c reads (decode_case and the
comment at its top); this file is its only other description, so change
both together. Run it from anywhere: python3 tests/fuzz/reduction_cases.py.
Check a case with DC_FUZZ_TRACE=1 build-fuzz/tests/fuzz/fuzz_reductions FILE,
which prints what it decoded and checked."""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

FAMILIES = ["reduce", "scan", "segment_reduce", "reduce_fn", "scan_fn", "segment_reduce_fn"]
BUILTIN_REDUCE = ["sum", "prod", "max", "min", "logsumexp", "mean"]
USER = ["usum", "linrec", "mat2", "maxcount", "ema_reset"]
# byte 12: 0 the operator's own values, 1 + the index of a kind
DATA = ["signed", "near 1", "ties", "[-3, 3]", "near 1 with zeros", "ties with NaN", "[-3, 3] with -inf"]
INDEX = ["sorted", "random", "last", "descending"]
# byte 10 from 144 on
SEGMENTS_BIG = [100, 1000, 4095, 4096, 4097, 5000, 16384, 32768]
# fz_size: 0..87 as such, then units x multiples, give or take 3
UNITS = [1008, 4080, 4096, 16384]
MULTS = [1, 2, 3, 8, 9, 12]
TRANSPOSE_PAIRS = [(0, 1), (0, 2), (1, 2)]


def size(v):
    """The byte of a size: an int 0..87, or (unit, multiple, delta) for
    multiple * unit + delta."""
    if isinstance(v, int):
        assert 0 <= v < 88, v
        return v
    unit, mult, delta = v
    assert -3 <= delta <= 3
    return 88 + 4 * (7 * MULTS.index(mult) + delta + 3) + UNITS.index(unit)


def case(family, op, shape, *, f32=False, axes=None, negative=False, reversed_axes=False, axis=0,
         keepdims=False, exclusive=False, named=False, specials=False, accumulate=False, partial=False,
         seed_output=False, transpose=None, slice_axis=None, slice_extra=1, slice_start=0, n_segments=1,
         index="sorted", data=None, seed=0, at=(0, 0)):
    """One case of FZ_CASE_BYTES (19) bytes. family: one of FAMILIES; op: a
    name of BUILTIN_REDUCE (reductions), of its first four (scans, reductions
    by index) or of USER; shape: up to three sizes (see size()); axes: the
    reduced ones (None: every axis); axis: the scanned one; at: two 1-based
    positions of the values' special (0: none)."""
    fam = FAMILIES.index(family)
    ops = USER if fam >= 3 else BUILTIN_REDUCE
    flags = (f32 * 1 | keepdims * 2 | exclusive * 4 | named * 8 | specials * 16 | accumulate * 32 | partial * 64
             | seed_output * 128)
    rank = len(shape)
    if family in ("reduce", "reduce_fn"):
        axb = sum(1 << a for a in axes) if axes else 0
    else:
        axb = axis
    axb |= negative * 16 | reversed_axes * 32
    sizes = [size(v) for v in shape] + [0] * (3 - rank)
    view0 = 0
    if transpose is not None:
        view0 |= 1 | TRANSPOSE_PAIRS.index(tuple(transpose)) << 2
    view1 = 0
    if slice_axis is not None:
        view0 |= 2 | slice_axis << 4
        view1 = (slice_extra - 1) | slice_start << 2
    if n_segments < 72:
        segb = n_segments
    else:
        segb = 144 + SEGMENTS_BIG.index(n_segments)
    datab = 0 if data is None else 1 + DATA.index(data)
    return (bytes([fam, ops.index(op), flags, rank, axb] + sizes + [view0, view1, segb, INDEX.index(index), datab])
            + struct.pack("<HHH", seed, at[0], at[1]))


def seeds():
    """Each family and operator, both dtypes, the views, the gradient's
    variants, and the lengths at which the kernels cut their work."""
    C = 1008  # DC_ASSOC_CHUNK
    S = 4080  # the built-in scans' chunks
    return {
        # built-in reductions over axes
        "reduce_sum_scalar": case("reduce", "sum", []),
        "reduce_sum_axes_0_2_f64": case("reduce", "sum", [3, (S, 1, 1), 2], axes=[0, 2], seed=1),
        "reduce_sum_transposed_2_threads": case("reduce", "sum", [3, (16384, 1, 1)], axes=[0], transpose=(0, 1),
                                                named=True, seed=2),
        "reduce_prod_split_rows_zeros": case("reduce", "prod", [2, (16384, 1, 1)], axes=[1], specials=True,
                                             at=(16385, 16386 + 16384), seed=3),
        "reduce_max_ties_nan_keepdims": case("reduce", "max", [3, (S, 1, 1), 2], axes=[0, 2], keepdims=True,
                                             specials=True, at=(4081 * 2, 0), seed=4),
        "reduce_min_f32_sliced": case("reduce", "min", [65, 33], f32=True, axes=[1], negative=True, slice_axis=1,
                                      slice_extra=3, slice_start=1, seed=5),
        "reduce_logsumexp_neginf": case("reduce", "logsumexp", [9, (4096, 1, 1)], axes=[1], specials=True,
                                        accumulate=True, seed=6),
        "reduce_mean_all_f32": case("reduce", "mean", [2, 5, (S, 1, -1)], f32=True, keepdims=True, seed=7),
        # built-in scans
        "scan_sum_two_chunks": case("scan", "sum", [1, (S, 2, 1)], axis=1, seed=8),
        "scan_prod_exclusive_zeros_f32": case("scan", "prod", [3, (S, 3, 3)], f32=True, axis=1, exclusive=True,
                                              specials=True, at=(4081, 4080 * 2 + 1), seed=9),
        "scan_max_ties_nan_columns": case("scan", "max", [2, (S, 1, 1), 3], axis=1, specials=True, at=(4080 * 3 + 1, 0),
                                          seed=10),
        "scan_min_transposed": case("scan", "min", [(S, 1, 1), 3], axis=0, transpose=(0, 1), seed_output=True,
                                    seed=11),
        "scan_sum_one_row_2_threads": case("scan", "sum", [(S, 9, 3)], axis=0, negative=True, accumulate=True,
                                           seed=12),
        # built-in reductions by index
        "segment_sum_rows_32769": case("segment_reduce", "sum", [(16384, 2, 1)], n_segments=5, seed=13),
        "segment_max_4096_bins_f32": case("segment_reduce", "max", [(S, 9, 1)], f32=True, n_segments=4096,
                                          index="random", specials=True, seed=14),
        "segment_prod_transposed": case("segment_reduce", "prod", [(C, 1, -3), 3], transpose=(0, 1), n_segments=7, index="random",
                                        seed=15),
        "segment_min_empty": case("segment_reduce", "min", [0, 3], n_segments=0, seed=16),
        # user operators: reductions
        "reduce_fn_linrec_rows_short_last_piece": case("reduce_fn", "linrec", [3, (C, 2, 3)], axes=[1], seed=17),
        "reduce_fn_mat2_f32": case("reduce_fn", "mat2", [5, (C, 1, 3)], f32=True, axes=[1], negative=True, seed=18),
        "reduce_fn_maxcount_axes_0_2": case("reduce_fn", "maxcount", [3, (C, 1, 1), 2], axes=[0, 2],
                                            keepdims=True, seed=19),
        "reduce_fn_ema_reset_2_threads": case("reduce_fn", "ema_reset", [1, (S, 9, 1)], axes=[1], partial=True,
                                              seed=20),
        "reduce_fn_usum_sliced_accumulate": case("reduce_fn", "usum", [9, (C, 1, 0)], slice_axis=1,
                                                 slice_extra=2, slice_start=1, accumulate=True, seed=21),
        # user operators: scans
        "scan_fn_linrec_f32_rows": case("scan_fn", "linrec", [3, (C, 2, 3)], f32=True, axis=1, seed=22),
        "scan_fn_mat2_exclusive_9_pieces": case("scan_fn", "mat2", [2, (C, 9, 1)], axis=1, exclusive=True,
                                                seed_output=True, seed=23),
        "scan_fn_ema_reset_transposed": case("scan_fn", "ema_reset", [(C, 1, 1), 3], axis=0, transpose=(0, 1),
                                             seed=24),
        "scan_fn_maxcount_middle_axis": case("scan_fn", "maxcount", [70, 7, 3], axis=1, partial=True, seed=25),
        # user operators: reductions by index
        "segment_reduce_fn_linrec_transposed": case("segment_reduce_fn", "linrec", [(C, 3, 0), 3],
                                                    transpose=(0, 1), n_segments=50, index="random", seed=26),
        "segment_reduce_fn_usum_f32": case("segment_reduce_fn", "usum", [(C, 1, 1)], f32=True, n_segments=3,
                                           seed=27),
        # several small cases in one input
        "several_small": (case("reduce", "max", [7, 0, 3], axes=[1], data="[-3, 3] with -inf", seed=28)
                          + case("scan_fn", "usum", [17, 2], axis=0, exclusive=True, seed=29)
                          + case("segment_reduce", "sum", [33], n_segments=71, index="descending", seed=30)
                          + case("reduce_fn", "maxcount", [1, 1, 1], keepdims=True, seed=31)),
    }


def known():
    """Reproducers of fixed bugs (known/README.md)."""
    return {
        # several one-lane rows whose length is not a multiple of
        # DC_ASSOC_CHUNK: a group of pieces spanning rows took in a row's
        # short last piece as a whole one
        "red-group-short-piece": case("reduce_fn", "linrec", [3, (1008, 2, 3)], axes=[1], seed=17),
        # a float64 sum over axes that are not one run: 1 and 2 threads
        # differed in the last bits
        "red-sum-threads": case("reduce", "sum", [3, (4080, 1, 1), 2], axes=[0, 2], seed=1),
    }


def main():
    corpus = os.path.join(HERE, "corpus", "fuzz_reductions")
    os.makedirs(corpus, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)
    if "--known" in sys.argv:
        for name, data in known().items():
            with open(os.path.join(HERE, "known", name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
