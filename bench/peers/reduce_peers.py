"""Reductions, scans and reductions by index: dualcast against PyTorch eager
and jax.jit, on the same inputs, in one command.

    bench/peers/.venv/bin/python bench/peers/reduce_peers.py [--build DIR]
        [--device cpu|cuda] [--sizes 1000000,10000000] [--reps N] [--ops a,b]
        [--write]

Runs bench_reduce (dualcast; its --dump writes the inputs, outputs and
gradients), then each peer on those inputs. Every variant is timed the same
way: the median wall time of one iteration from the device at rest to the
device at rest (dualcast: dc_ctx_synchronize; PyTorch: torch.cuda.synchronize
on a GPU; JAX: block_until_ready), after two warm-up iterations, the primal
and gradient iterations alternating (peer_timing.median_times).

- primal: the op alone (PyTorch under torch.no_grad; jax.jit of the op);
- gradient: the op and its adjoint from an all-ones output adjoint
  (PyTorch: the op on a leaf requiring a gradient, then torch.autograd.grad,
  its result made contiguous; JAX: jax.jit of the output and jax.vjp's
  gradient together). Every variant's gradient is an array with every
  element written: torch.autograd.grad of a sum returns the adjoint
  broadcast as a view (stride 0, no element written), which .contiguous()
  writes out as x.grad holds it after .backward(); on a gradient already
  dense it is a no-op;
- overhead: gradient / primal.

bench_reduce's own table (least traffic, achieved GB/s against the device's
copy bandwidth) follows the comparison in the section written.

Each peer's output and gradient are compared with dualcast's: a relative
difference (max |peer - dualcast| / max |dualcast|) above the tolerance is
a failure, marked in the table, and the command exits with status 1.
--write replaces the section between the markers in bench/RESULTS.md.
"""

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile

import numpy as np

import results_file
from peer_timing import median_times, rel_diff

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARK_BEGIN = "<!-- reduce-peers:begin (written by bench/peers/reduce_peers.py --write; replaced on each run) -->"
MARK_END = "<!-- reduce-peers:end -->"
SEGMENTS = 1000  # bench_reduce.c's
# float32 sums of 10^7 terms in different orders, and products of 10^7
# factors, differ in more digits than elementwise math does.
TOLERANCE = {"default": 1e-4, "prod": 2e-3, "sum": 1e-3, "user": 2e-3}
# The overhead each case must stay within (gradient / primal).
OVERHEAD_TARGET = {"sum": 2.0, "default": 3.0}


def cases():
    return ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "logsumexp", "scan_sum", "scan_prod",
            "scan_max", "scan_min", "segment_sum", "segment_prod", "segment_max", "segment_min", "user_scan_linrec",
            "user_reduce_linrec"]


def op_of(case):
    """sum, prod, max, min, logsumexp; "user" for the user operator linrec."""
    if case.startswith("user_"):
        return "user"
    return case.split("_")[1] if "_" in case else case


def linrec(l, r):
    """The composition of affine maps x -> a x + b, l then r (tests/assoc/linrec.dc.h)."""
    return r[0] * l[0], r[0] * l[1] + r[1]


def torch_fn(case, torch, index):
    op = op_of(case)
    if op == "user":
        raise NotImplementedError("PyTorch has no associative scan of a user operator")
    if case.startswith("reduce_"):
        return {"sum": torch.sum, "prod": torch.prod, "max": torch.amax, "min": torch.amin}[op]
    if case == "logsumexp":
        return lambda x: torch.logsumexp(x, 0)
    if case.startswith("scan_"):
        return {"sum": lambda x: torch.cumsum(x, 0), "prod": lambda x: torch.cumprod(x, 0),
                "max": lambda x: torch.cummax(x, 0).values, "min": lambda x: torch.cummin(x, 0).values}[op]
    reduce = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amin"}[op]
    return lambda x: torch.zeros(SEGMENTS, dtype=x.dtype, device=x.device).scatter_reduce(
        0, index, x, reduce, include_self=False)


def jax_fn(case, jax, jnp, index):
    op = op_of(case)
    if case == "user_scan_linrec":
        return lambda a, b: jax.lax.associative_scan(linrec, (a, b))[1]
    if case == "user_reduce_linrec":  # no differentiable reduction of a user operator: the scan's last element
        return lambda a, b: jax.lax.associative_scan(linrec, (a, b))[1][-1]
    if case.startswith("reduce_"):
        return {"sum": jnp.sum, "prod": jnp.prod, "max": jnp.max, "min": jnp.min}[op]
    if case == "logsumexp":
        return jax.scipy.special.logsumexp
    if case.startswith("scan_"):
        return {"sum": jnp.cumsum, "prod": jnp.cumprod, "max": jax.lax.cummax, "min": jax.lax.cummin}[op]
    seg = {"sum": jax.ops.segment_sum, "prod": jax.ops.segment_prod, "max": jax.ops.segment_max,
           "min": jax.ops.segment_min}[op]
    return lambda x: seg(x, index, num_segments=SEGMENTS)


def run_torch(case, x_np, idx_np, device, reps, a_np=None):
    import torch
    dev = torch.device("cuda" if device == "cuda" else "cpu")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    index = torch.from_numpy(idx_np.astype(np.int64)).to(dev)
    f = torch_fn(case, torch, index)
    x = torch.from_numpy(x_np).to(dev)
    xg = x.clone().requires_grad_(True)
    ones = None

    def primal():
        with torch.no_grad():
            return f(x)

    def gradient():
        y = f(xg)
        return y, torch.autograd.grad(y, xg, ones)[0].contiguous()

    ones = torch.ones_like(primal())
    t_primal, t_grad = median_times([primal, gradient], sync, reps)
    y, g = gradient()
    return t_primal, t_grad, y.detach().cpu().numpy(), g.cpu().numpy()


def run_jax(case, x_np, idx_np, device, reps, a_np=None):
    """a_np: the user operator's field a (its field b is x_np); the gradient
    returned is then b's, and a's is in the fifth value."""
    import jax
    import jax.numpy as jnp
    dev = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    index = jax.device_put(jnp.asarray(idx_np.astype(np.int32)), dev)
    f = jax_fn(case, jax, jnp, index)
    args = [jax.device_put(jnp.asarray(v), dev) for v in ([a_np, x_np] if a_np is not None else [x_np])]
    ones = jnp.ones_like(f(*args))

    primal_fn = jax.jit(f)

    @jax.jit
    def grad_fn(args, ct):
        y, vjp = jax.vjp(f, *args)
        return y, vjp(ct)

    state = {}

    def primal():
        state["r"] = primal_fn(*args)

    def gradient():
        state["r"] = grad_fn(args, ones)

    def sync():
        if "r" in state:
            jax.block_until_ready(state["r"])

    t_primal, t_grad = median_times([primal, gradient], sync, reps)
    y, g = grad_fn(args, ones)
    if a_np is not None:
        return t_primal, t_grad, np.asarray(y), np.asarray(g[1]), np.asarray(g[0])
    return t_primal, t_grad, np.asarray(y), np.asarray(g[0])


def parse_dualcast(text):
    rows = {}
    device = ""
    for line in text.splitlines():
        if line.startswith("device:"):
            device = line.split(":", 1)[1].strip()
        m = re.match(r"\| (\w+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = (float(m.group(3)) / 1e3, float(m.group(4)) / 1e3)
    return device, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--ops", default=None)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads of every framework (OMP_NUM_THREADS, torch.set_num_threads, XLA's Eigen pool "
                         "off for 1); 0: each framework's default")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
        import torch
        torch.set_num_threads(args.threads)
    exe = os.path.join(args.build, "bench", "bench_reduce")
    if not os.access(exe, os.X_OK):
        sys.exit(f"reduce_peers.py: {exe} is missing; build the target bench_reduce first")
    wanted = [c for c in cases() if not args.ops or c in args.ops.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    failures = 0
    lines = []
    with tempfile.TemporaryDirectory() as dump:
        cmd = [exe, "--device", args.device, "--sizes", args.sizes, "--reps", str(args.reps), "--dump", dump]
        if args.ops:
            cmd += ["--ops", args.ops]
        print("+", " ".join(cmd), flush=True)
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        print(out, flush=True)
        device, dc = parse_dualcast(out)
        header = ("| case | n | dualcast primal ms | gradient ms | overhead | PyTorch primal | gradient | overhead "
                  "| jax.jit primal | gradient | overhead | gradient: vs PyTorch | vs jax.jit | peers agree |")
        lines += [header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        print(header, flush=True)
        for n in sizes:
            x = np.load(os.path.join(dump, f"x_{n}.npy"))
            near1 = np.load(os.path.join(dump, f"near1_{n}.npy"))
            idx = np.load(os.path.join(dump, f"index_{n}.npy"))
            for case in wanted:
                op = op_of(case)
                xin = near1 if op == "prod" else x
                dc_primal, dc_grad = dc[(case, n)]
                dc_out = np.load(os.path.join(dump, f"{case}_{n}_out.npy"))
                dc_g = np.load(os.path.join(dump, f"{case}_{n}_grad.npy"))
                tol = TOLERANCE.get(op, TOLERANCE["default"])
                peers = []
                agree = []
                for name, runner in (("PyTorch", run_torch), ("jax.jit", run_jax)):
                    try:
                        r = runner(case, xin, idx, args.device, args.reps, near1 if op == "user" else None)
                    except NotImplementedError as e:  # JAX's segment_prod has no gradient; PyTorch no user scan
                        agree.append(f"{name}: none ({str(e).splitlines()[0]})")
                        peers.append(None)
                        continue
                    tp, tg, y, g = r[:4]
                    d = max(rel_diff(y, dc_out), rel_diff(g, dc_g))
                    if op == "user":
                        d = max(d, rel_diff(r[4], np.load(os.path.join(dump, f"{case}_{n}_grad_a.npy"))))
                    ok = d <= tol
                    failures += not ok
                    agree.append(f"{name} {d:.0e}" + ("" if ok else " FAIL"))
                    peers.append((tp, tg))
                target = OVERHEAD_TARGET.get(op, OVERHEAD_TARGET["default"])
                over = dc_grad / dc_primal
                row = (f"| {case} | {n:.0e} | {dc_primal * 1e3:.3f} | {dc_grad * 1e3:.3f} | {over:.2f}"
                       f"{'' if over <= target else ' (over ' + str(target) + ')'} | "
                       + " | ".join(f"{p[0] * 1e3:.3f} | {p[1] * 1e3:.3f} | {p[1] / p[0]:.2f}" if p else "— | — | —"
                                    for p in peers)
                       + " | " + " | ".join(f"{p[1] / dc_grad:.2f}x" if p else "—" for p in peers)
                       + f" | {', '.join(agree)} |")
                lines.append(row)
                print(row, flush=True)
    machine = device or platform.processor()
    import jax
    import torch
    stamp = datetime.date.today().isoformat()
    rev = results_file.build_revision(REPO)
    load = os.getloadavg()[0]
    threads = f"{args.threads} thread(s) in every framework" if args.threads else "each framework's default threads"
    intro = (f"Measured {stamp} at build {rev} on {machine} ({args.device}; {threads}), float32, median of "
             f"{args.reps} iterations each; load average {load:.1f} at the end of the run; PyTorch "
             f"{torch.__version__}, JAX {jax.__version__}. Times in ms.")
    # bench_reduce's own table of the same run: least traffic and achieved
    # bandwidth beside the device's copy bandwidth
    bandwidth = [line for line in out.splitlines() if line.startswith("|") or line.startswith("copy bandwidth")]
    bandwidth_intro = ("dualcast's achieved bandwidth in the same run (bench_reduce): GB/s counts the least "
                       "float32 traffic of each case (bench_reduce.c's bench_case words), the least-traffic "
                       "overhead is the gradient's least traffic over the primal's.")
    if args.write:
        results_file.replace_section(os.path.join(REPO, "bench", "RESULTS.md"), MARK_BEGIN, MARK_END,
                                     "\n".join(["", intro, "", *lines, "", bandwidth_intro, "", *bandwidth, ""]))
    if failures:
        print(f"reduce_peers.py: {failures} comparison(s) beyond the tolerance", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
