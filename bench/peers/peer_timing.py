"""Timing and comparison shared by the one-shot peer scripts
(reduce_peers.py, sparse_peers.py): every variant timed the same way, and
results compared the same way."""

import statistics
import time

import numpy as np


def median_time(run, sync, reps):
    """Median wall time of run(), each from the device at rest (sync()) to the
    device at rest, after two warm-up calls."""
    for _ in range(2):
        run()
        sync()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def median_times(runs, sync, reps):
    """Median wall times of each of runs (callables), timed as median_time
    does, the runs alternating: each round runs every one in turn, so that
    all meet the machine in the same state (a primal and its gradient timed
    one block after the other saw the load of a shared machine change
    between the blocks)."""
    for _ in range(2):
        for run in runs:
            run()
            sync()
    times = [[] for _ in runs]
    for _ in range(reps):
        for run, t in zip(runs, times):
            sync()
            t0 = time.perf_counter()
            run()
            sync()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def rel_diff(a, b):
    """max |a - b| / max |b| over the elements (inf when the shapes differ)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        return float("inf")
    scale = max(np.max(np.abs(b)) if b.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - b)) / scale) if a.size else 0.0
