"""Sparse matrices: dualcast against SciPy's forward (the native,
non-differentiable reference), PyTorch (torch.sparse CSR with autograd) and
JAX (jax.experimental.sparse.BCSR under jax.jit), on the same inputs, in one
command.

    bench/peers/.venv/bin/python bench/peers/sparse_peers.py [--build DIR]
        [--device cpu|cuda] [--reps N] [--reps-small N] [--ops a,b] [--write]

Runs bench_sparse (dualcast; its --dump writes the patterns, values, dense
operands, outputs and gradients), then each peer on those inputs. The cases
(float32; see bench/bench_sparse.c):

- dot: sum(A .* B) of two 1000 x 1000 matrices of density 5% with the same
  pattern. SciPy: A.multiply(B).sum() (the time of numpy.dot of the two
  .data arrays is printed beside it). dualcast, PyTorch and JAX: the product
  of the two value vectors, then its sum (dc_op_mul + dc_op_sum,
  torch.sum(a * b), jnp.sum(a * b)): with one pattern, that is the sparse
  product. (PyTorch's (A * B).sum() on CSR tensors gives the same result
  and gradients but takes over a second; JAX's BCSR has no product.)
- spmv: A @ v, A as above, v: [1000].
- spmm: A @ X, A: 100,000 x 100,000 with 10 entries per row, X: [100000, 64].

Times: the median wall time of one iteration from the device at rest to the
device at rest (dualcast: dc_ctx_synchronize; PyTorch: torch.cuda.synchronize
on a GPU; JAX: block_until_ready), after two warm-up iterations, the forward
and gradient iterations alternating (peer_timing.median_times; SciPy has no
gradient).

- forward: the op alone (SciPy; PyTorch under torch.no_grad; jax.jit of the op);
- gradient: the op and its adjoint from an all-ones output adjoint, with
  respect to A's values and the other operand (B's values, v or X)
  (PyTorch: the CSR tensor built from a values leaf requiring a gradient,
  then torch.autograd.grad; JAX: jax.jit of the output and jax.vjp's
  gradients together).

Targets: dualcast's gradient within 2x of SciPy's forward, and dualcast
faster than PyTorch and JAX (forward and gradient) on every case. Outputs
and gradients of every peer are compared with dualcast's (SciPy: the
output): a relative difference (max |peer - dualcast| / max |dualcast|)
above the tolerance is a failure, marked in the table, and the command
exits with status 1. --write replaces the section between the markers in
bench/RESULTS.md.
"""

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import results_file
from peer_timing import median_time, median_times, rel_diff

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARK_BEGIN = "<!-- sparse-peers:begin (written by bench/peers/sparse_peers.py --write; replaced on each run) -->"
MARK_END = "<!-- sparse-peers:end -->"
CASES = ["dot", "spmv", "spmm"]
SECOND = {"dot": "b", "spmv": "v", "spmm": "x"}
# float32 sums in different orders: 50,000 terms for dot, 50 or 64 elsewhere.
TOLERANCE = {"dot": 1e-3, "spmv": 1e-4, "spmm": 1e-4}
GRADIENT_TARGET = 2.0  # dualcast's gradient / SciPy's forward


def load_inputs(dump, case):
    p = "large" if case == "spmm" else "small"
    rows = 100000 if case == "spmm" else 1000
    ld = lambda name: np.load(os.path.join(dump, name + ".npy"))
    inp = {"shape": (rows, rows), "row_ptr": ld(p + "_row_ptr"), "col_idx": ld(p + "_col_idx"), "a": ld(p + "_a")}
    inp["second"] = ld({"dot": "small_b", "spmv": "small_v", "spmm": "large_x"}[case])
    return inp


def run_scipy(case, inp, reps):
    import scipy.sparse as sp
    a = sp.csr_matrix((inp["a"], inp["col_idx"], inp["row_ptr"]), shape=inp["shape"])
    if case == "dot":
        b = sp.csr_matrix((inp["second"], inp["col_idx"], inp["row_ptr"]), shape=inp["shape"])
        f = lambda: a.multiply(b).sum()
    else:
        x = inp["second"]
        f = lambda: a @ x
    t = median_time(f, lambda: None, reps)
    extra = None
    if case == "dot":
        extra = median_time(lambda: np.dot(a.data, b.data), lambda: None, reps)
    return t, extra, np.asarray(f())


def run_torch(case, inp, device, reps, gather=False):
    """gather: A X as PyTorch code writes it without torch.sparse (rows of X
    gathered, scaled by the values, index_add_ into Y), for when the CSR
    tensor's gradient does not fit in memory."""
    import torch
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    dev = torch.device("cuda" if device == "cuda" else "cpu")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    crow = torch.from_numpy(inp["row_ptr"]).to(dev)
    col = torch.from_numpy(inp["col_idx"]).to(dev)
    a = torch.from_numpy(inp["a"]).to(dev)
    s = torch.from_numpy(inp["second"]).to(dev)
    ag = a.clone().requires_grad_(True)
    sg = s.clone().requires_grad_(True)

    row = torch.repeat_interleave(torch.arange(inp["shape"][0], device=dev), crow[1:] - crow[:-1])

    def f(vals, other):
        if case == "dot":
            return torch.sum(vals * other)
        if gather:
            out = torch.zeros((inp["shape"][0], *other.shape[1:]), dtype=other.dtype, device=dev)
            scale = vals.view(-1, *([1] * (other.dim() - 1)))
            return out.index_add(0, row, scale * other.index_select(0, col))
        return torch.sparse_csr_tensor(crow, col, vals, inp["shape"]) @ other

    def forward():
        with torch.no_grad():
            return f(a, s)

    ones = torch.ones_like(forward())

    def gradient():
        y = f(ag, sg)
        return (y, *torch.autograd.grad(y, (ag, sg), ones))

    t_fwd, t_grad = median_times([forward, gradient], sync, reps)
    y, ga, gs = gradient()
    return t_fwd, t_grad, y.detach().cpu().numpy(), ga.cpu().numpy(), gs.cpu().numpy()


def run_jax(case, inp, device, reps):
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse
    dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    put = lambda x: jax.device_put(jnp.asarray(x), dev)
    indptr = put(inp["row_ptr"].astype(np.int32))
    indices = put(inp["col_idx"].astype(np.int32))
    a = put(inp["a"])
    s = put(inp["second"])

    def f(vals, other):
        if case == "dot":
            return jnp.sum(vals * other)
        return jsparse.BCSR((vals, indices, indptr), shape=inp["shape"]) @ other

    ones = jnp.ones_like(f(a, s))
    forward_fn = jax.jit(f)

    @jax.jit
    def grad_fn(vals, other, ct):
        y, vjp = jax.vjp(f, vals, other)
        return (y, *vjp(ct))

    state = {}

    def forward():
        state["r"] = forward_fn(a, s)

    def gradient():
        state["r"] = grad_fn(a, s, ones)

    def sync():
        if "r" in state:
            jax.block_until_ready(state["r"])

    t_fwd, t_grad = median_times([forward, gradient], sync, reps)
    y, ga, gs = grad_fn(a, s, ones)
    return t_fwd, t_grad, np.asarray(y), np.asarray(ga), np.asarray(gs)


def parse_dualcast(text):
    rows = {}
    device = ""
    for line in text.splitlines():
        if line.startswith("device:"):
            device = line.split(":", 1)[1].strip()
        m = re.match(r"\| (\w+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)) / 1e6, float(m.group(5)) / 1e6)
    return device, rows


def us(t):
    return f"{t * 1e6:.1f}" if t < 1e-2 else f"{t * 1e6:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--reps", type=int, default=15, help="iterations timed for spmm")
    ap.add_argument("--reps-small", type=int, default=200, help="iterations timed for dot and spmv")
    ap.add_argument("--ops", default=None)
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads of dualcast and PyTorch (OMP_NUM_THREADS, torch.set_num_threads); "
                         "1 also turns XLA's multithreaded Eigen off; 0: each framework's default")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.threads > 0:  # before PyTorch and JAX are imported
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
        import torch
        torch.set_num_threads(args.threads)
    exe = os.path.join(args.build, "bench", "bench_sparse")
    if not os.access(exe, os.X_OK):
        sys.exit(f"sparse_peers.py: {exe} is missing; build the target bench_sparse first")
    wanted = [c for c in CASES if not args.ops or c in args.ops.split(",")]
    failures = 0
    lines = []
    notes = []
    with tempfile.TemporaryDirectory() as dump:
        cmd = [exe, "--device", args.device, "--reps", str(args.reps), "--reps-small", str(args.reps_small),
               "--dump", dump, "--ops", ",".join(wanted)]
        print("+", " ".join(cmd), flush=True)
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        print(out, flush=True)
        device, dc = parse_dualcast(out)
        header = ("| case | rows | nnz | dualcast forward us | gradient us | gradient / SciPy forward | SciPy forward "
                  "| PyTorch forward | gradient | JAX forward | gradient | forward: vs PyTorch | vs JAX "
                  "| gradient: vs PyTorch | vs JAX | agreement with dualcast |")
        lines += [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        print(header, flush=True)
        for case in wanted:
            reps = args.reps if case == "spmm" else args.reps_small
            inp = load_inputs(dump, case)
            rows, nnz, dc_fwd, dc_grad = dc[case]
            ld = lambda name: np.load(os.path.join(dump, f"{case}_{name}.npy"))
            dc_out, dc_ga, dc_gs = ld("out"), ld("grad_a"), ld("grad_" + SECOND[case])
            tol = TOLERANCE[case]
            agree = []
            sp_fwd, sp_extra, sp_out = run_scipy(case, inp, reps)
            d = rel_diff(sp_out, dc_out)
            failures += d > tol
            agree.append(f"SciPy {d:.0e}" + ("" if d <= tol else " FAIL"))
            if sp_extra is not None:
                notes.append(f"{case}: numpy.dot of the two .data arrays (the values' product alone, no sparse "
                             f"structure) takes {us(sp_extra)} us; dualcast's gradient is "
                             f"{dc_grad / sp_extra:.2f}x that.")
            peers = []
            for name, runner in (("PyTorch", run_torch), ("JAX", run_jax)):
                try:
                    tf, tg, y, ga, gs = runner(case, inp, args.device, reps)
                except RuntimeError as e:  # torch.sparse's values gradient as a dense rows x cols product
                    if name != "PyTorch" or "allocate" not in str(e):
                        raise
                    m = re.search(r"tried to allocate \d+ bytes", str(e))
                    notes.append(f"{case}: PyTorch's CSR (and COO) product fails in its backward pass "
                                 f"(out of memory: {m.group(0) if m else str(e).splitlines()[0][:100]}): the gradient of the values is formed as the "
                                 f"dense product G X^T, then masked. The PyTorch times are those of the same product "
                                 f"written with index_select and index_add (rows of X gathered, scaled by the "
                                 f"values, added into Y), marked *.")
                    tf, tg, y, ga, gs = runner(case, inp, args.device, reps, gather=True)
                    name += "*"
                d = max(rel_diff(y, dc_out), rel_diff(ga, dc_ga), rel_diff(gs, dc_gs))
                ok = d <= tol
                failures += not ok
                agree.append(f"{name} {d:.0e}" + ("" if ok else " FAIL"))
                peers.append((tf, tg))
            ratio = dc_grad / sp_fwd
            case_label = case + (" *" if any(a.startswith("PyTorch*") for a in agree) else "")
            row = (f"| {case_label} | {rows} | {nnz} | {us(dc_fwd)} | {us(dc_grad)} | {ratio:.2f}"
                   f"{'' if ratio <= GRADIENT_TARGET else ' (over ' + str(GRADIENT_TARGET) + ')'} | {us(sp_fwd)} | "
                   + " | ".join(f"{us(p[0])} | {us(p[1])}" for p in peers)
                   + " | " + " | ".join(f"{p[0] / dc_fwd:.2f}x" for p in peers)
                   + " | " + " | ".join(f"{p[1] / dc_grad:.2f}x" for p in peers)
                   + f" | {', '.join(agree)} |")
            lines.append(row)
            print(row, flush=True)
    for n in notes:
        print(n)
    machine = device or platform.processor()
    import jax
    import scipy
    import torch
    stamp = datetime.date.today().isoformat()
    rev = results_file.build_revision(REPO)
    load = os.getloadavg()[0]
    threads = "each framework's default threads"
    if args.threads:
        threads = (f"OMP_NUM_THREADS={args.threads}, torch.set_num_threads({args.threads})"
                   + (", XLA_FLAGS=--xla_cpu_multi_thread_eigen=false" if args.threads == 1 else ""))
    intro = (f"Measured {stamp} at build {rev} on {machine} ({args.device}, {threads}), float32, median of {args.reps_small} "
             f"iterations (dot, spmv) and {args.reps} (spmm); load average {load:.2f} at the end of the run. "
             f"SciPy {scipy.__version__}, PyTorch {torch.__version__} ({torch.get_num_threads()} threads), "
             f"JAX {jax.__version__}. Times in microseconds. \"vs\": the peer's time over dualcast's "
             f"(above 1: dualcast faster).")
    if args.write:
        results_file.replace_section(os.path.join(REPO, "bench", "RESULTS.md"), MARK_BEGIN, MARK_END,
                                     "\n".join(["", intro, "", *lines, "", *[f"- {n}" for n in notes], ""]))
    if failures:
        print(f"sparse_peers.py: {failures} comparison(s) beyond the tolerance", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
