"""dualcast against PyTorch and JAX on this machine's CPU or GPU, in one command.

    bench/peers/run.sh [--quick] [--parts cupdate,hmlstm,sweep] [--no-write]
    bench/peers/run.sh --device cuda [--python PATH] [--corpus DIR] [--compile-limit S]

(run.sh builds the C programs and calls this with the build directory.)

Every variant runs in a worker process of its own: bench_peer_worker (C,
dualcast) or peer_worker.py (PyTorch, JAX), all answering the same commands.
For each problem the workers load the same inputs (written by dualcast's
worker), warm up, and then run in rounds: each round runs every variant once,
in a shuffled order with a short pause before each, so that background load
falls on all alike. Times are medians over the rounds. Each peer's outputs and
gradients are compared with dualcast's (mixed mode, store policy); a relative
difference above the tolerance is a failure, shown in the table, and makes the
command exit with status 1.

Parts:
  cupdate  the paper's c-update gradient, dims 512, 1024, 2048, control per
           row and per column, with peak memory
  hmlstm   one HM-LSTM training step (forward and backward) of the demo's
           model, with peak memory
  sweep    c-update and the primitive ops add, mul, matmul, sum from 64^2 to
           4096^2, forward and backward, against the measured limits

A full run replaces the section between the markers in bench/RESULTS.md and
draws bench/peers_cpu.png.

GPU mode (--device cuda; main_gpu below): the c-update (512^2 to 4096^2, both
control layouts) and the HM-LSTM step, every variant on the GPU: dualcast
store / recompute / pure, each eager and replayed as a CUDA graph; PyTorch
eager, eager captured as a CUDA graph, torch.compile (within
--compile-limit); jax.jit. Each is timed synchronized (one iteration, the
device at rest before and after) and back to back (N iterations, one
synchronization), gradients compared as above. It fails at once without a
GPU; --rehearse runs its procedure on the CPU instead, as a test. A run that
is not --quick replaces the section between the peers-gpu markers in
bench/RESULTS.md; there is no GPU plot.
"""

import argparse
import datetime
import os
import platform
import random
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import results_file

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MARK_BEGIN = "<!-- peers:begin (written by bench/peers/run.sh; replaced on each run) -->"
MARK_END = "<!-- peers:end -->"

# Largest accepted relative difference (|peer - dualcast| / max |dualcast| per
# tensor): float32 math with different rounding, transcendental
# implementations and summation orders stays well inside it.
TOLERANCE = 1e-4

DC_VARIANTS = {
    "dc-store": "dualcast mixed, store",
    "dc-recompute": "dualcast mixed, recompute",
    "dc-pure": "dualcast pure reverse",
}
PEER_VARIANTS = {
    "torch-eager": "PyTorch eager",
    "torch-compile": "torch.compile",
    "jax-jit": "jax.jit (output + gradients)",
    "jax-jit-grad": "jax.jit(grad): gradients only",
    "jax-jit-split": "jax.jit (fwd, bwd as two calls)",
}
# The GPU mode's variants besides those above (see run_gpu).
DC_GRAPH_VARIANTS = {
    "dc-store-graph": "dualcast mixed, store, graph replay",
    "dc-recompute-graph": "dualcast mixed, recompute, graph replay",
    "dc-pure-graph": "dualcast pure reverse, graph replay",
}
GPU_PEER_VARIANTS = {
    "torch-cudagraph": "PyTorch eager, CUDA graph replay",
}
LABELS = {**DC_VARIANTS, **DC_GRAPH_VARIANTS, **PEER_VARIANTS, **GPU_PEER_VARIANTS}
REFERENCE = "dc-store"


class WorkerError(Exception):
    pass


class WorkerTimeout(WorkerError):
    """The worker did not answer within the time allowed (it is stopped)."""


class Worker:
    """One variant's process; commands go in on stdin, replies come out on
    stdout, one line each."""

    def __init__(self, key, argv, log_dir):
        self.key = key
        self.log_path = os.path.join(log_dir, key + ".log")
        self.log = open(self.log_path, "w")
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1, env=env, cwd=HERE)

    def ask(self, line, timeout=None):
        """Sends one command and returns the words of its "ok" reply. With a
        timeout (seconds), a worker that has not answered by then is stopped
        and WorkerTimeout raised. (One reply line per command, so nothing is
        left in the pipe's read buffer between commands and select sees the
        next reply arrive.)"""
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(self._died())
        if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
            self.proc.kill()
            self.proc.wait()
            raise WorkerTimeout(f"no answer within {timeout:.0f} s")
        reply = self.proc.stdout.readline()
        if not reply:
            raise WorkerError(self._died())
        words = reply.split()
        if words[0] != "ok":
            raise WorkerError(reply[len("error "):].strip() if words[0] == "error" else reply.strip())
        return words[1:]

    def _died(self):
        self.proc.poll()
        self.log.flush()
        with open(self.log_path) as f:
            tail = [l for l in f.read().strip().splitlines() if l.strip()][-1:]
        return f"worker exited ({self.proc.returncode}): " + (tail[0] if tail else "no message")

    def close(self):
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_worker(key, args, log_dir):
    """The worker of variant `key`, on args.worker_device ("cpu" unless the
    GPU mode runs); dualcast's "-graph" variants replay a captured graph."""
    device = getattr(args, "worker_device", "cpu")
    if key in DC_VARIANTS or key in DC_GRAPH_VARIANTS:
        base = key[:-len("-graph")] if key.endswith("-graph") else key
        program = "bench_peer_worker"
        if getattr(args, "emulated", False):
            # the rehearsal's dualcast on the emulated CUDA device
            program, device = "bench_peer_worker_emulated", "cuda"
        argv = [os.path.join(args.build, "bench", program), base[len("dc-"):]]
        if key.endswith("-graph"):
            argv.append("--graph")
        if getattr(args, "corpus", None):
            argv += ["--corpus", args.corpus]
    else:
        argv = [sys.executable, os.path.join(HERE, "peer_worker.py"), key]
    if device != "cpu":
        argv += ["--device", device]
    return Worker(key, argv, log_dir)


def relative_difference(ref_dir, other_dir):
    """max over the files both hold of max|a - b| / max|a|, and the names
    compared; files the reference holds but the other lacks are skipped (a
    gradients-only variant has no output)."""
    worst, names = 0.0, []
    for name in sorted(os.listdir(ref_dir)):
        path = os.path.join(other_dir, name)
        if not os.path.exists(path):
            continue
        a = np.load(os.path.join(ref_dir, name)).astype(np.float64)
        b = np.load(path).astype(np.float64)
        if a.shape != b.shape:
            return float("inf"), names + [name]
        scale = np.abs(a).max() if a.size else 0.0
        diff = np.abs(a - b).max() if a.size else 0.0
        worst = max(worst, diff / scale if scale > 0 else diff)
        names.append(name)
    if not names:
        return float("nan"), names
    return worst, names


def measure(problem, keys, args, tmp, rounds, warmup, memory, pre_runs=None, burst=None, setup_limits=None):
    """Runs one problem ("cupdate 2048 row", "hmlstm", "prim add 512") over the
    variants; returns {key: result dict}. Workers are started here and closed
    at the end unless given in args.pool (the sweep keeps them). With burst
    (the GPU mode), each turn also times `burst` iterations back to back
    ("burst N"), and each worker is asked for its device. setup_limits:
    {key: seconds} a variant's setup (which compiles) may take; past it, the
    variant is skipped and its worker stopped."""
    inputs = os.path.join(tmp, "inputs")
    shutil.rmtree(inputs, ignore_errors=True)
    os.makedirs(inputs)
    pool = args.pool if args.pool is not None else {}
    own = [k for k in keys if k not in pool]
    for k in own:
        pool[k] = start_worker(k, args, tmp)
    results = {k: {"error": None, "total": [], "fwd": [], "bwd": [], "burst": []} for k in keys}
    setup_limits = setup_limits or {}
    words = problem.split()
    # the dualcast reference writes the inputs; everyone else reads them
    order = [REFERENCE] + [k for k in keys if k != REFERENCE]
    for k in order:
        write = "1" if k == REFERENCE else "0"
        if words[0] == "cupdate":
            cmd = f"cupdate {words[1]} {words[2]} {inputs} {write}"
        elif words[0] == "prim":
            cmd = f"prim {words[1]} {words[2]} {inputs} {write}"
        else:
            cmd = f"hmlstm {inputs} {write}"
        try:
            t0 = time.perf_counter()
            pool[k].ask(cmd, setup_limits.get(k))
            results[k]["setup_s"] = time.perf_counter() - t0
            if burst is not None:
                results[k]["device"] = " ".join(pool[k].ask("device"))
        except WorkerTimeout:
            results[k]["error"] = (f"skipped: setting up (compiling) and the first iteration took longer than "
                                   f"the limit of {setup_limits[k]:.0f} s")
            # a worker stopped mid-command is of no further use, here or in
            # the next problem of a kept pool
            pool[k].close()
            del pool[k]
        except WorkerError as e:
            results[k]["error"] = str(e)
            if k == REFERENCE:
                raise SystemExit(f"dualcast's worker failed on {problem}: {e}")
    active = [k for k in keys if results[k]["error"] is None]
    rng = random.Random(problem)
    pre_runs = args.pre_runs if pre_runs is None else pre_runs

    def one_round(record):
        ks = list(active)
        rng.shuffle(ks)
        for k in ks:
            if results[k]["error"] is not None:
                continue
            time.sleep(args.gap)
            try:
                for _ in range(pre_runs):
                    pool[k].ask("run")
                total, fwd, bwd = (float(x) for x in pool[k].ask("run"))
                per_iteration = float(pool[k].ask(f"burst {burst}")[0]) if burst is not None else None
            except WorkerError as e:
                results[k]["error"] = str(e)
                continue
            if record:
                results[k]["total"].append(total)
                results[k]["fwd"].append(fwd)
                results[k]["bwd"].append(bwd)
                if per_iteration is not None:
                    results[k]["burst"].append(per_iteration)

    for _ in range(warmup):
        one_round(False)
    if memory:
        for k in active:
            if results[k]["error"] is None:
                pool[k].ask("memstart")
    for _ in range(rounds):
        one_round(True)
    for k in active:
        r = results[k]
        if r["error"] is not None:
            continue
        if memory:
            rss, tape = pool[k].ask("mem")
            r["rss"], r["tape"] = int(rss), int(tape)
        if burst is not None and k in DC_GRAPH_VARIANTS:
            try:
                r["graph"] = [int(x) for x in pool[k].ask("graph")]  # captures, replays, kernels
            except WorkerError as e:
                r["error"] = str(e)
                continue
        out_dir = os.path.join(tmp, "out-" + k)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        try:
            pool[k].ask("grads " + out_dir)
        except WorkerError as e:
            r["error"] = str(e)
    ref_dir = os.path.join(tmp, "out-" + REFERENCE)
    for k in keys:
        r = results[k]
        if r["error"] is None:
            r["diff"], r["compared"] = ((0.0, []) if k == REFERENCE
                                         else relative_difference(ref_dir, os.path.join(tmp, "out-" + k)))
            r["samples"] = list(r["total"])
            for field in ("total", "fwd", "bwd", "burst"):
                r[field] = statistics.median(r[field]) if r[field] and min(r[field]) >= 0 else None
    if args.pool is None:
        for k in own:
            if k in pool:
                pool[k].close()
    return results


# ---- formatting -------------------------------------------------------------

def ms(seconds):
    return "" if seconds is None else f"{1e3 * seconds:.3f}" if seconds < 0.01 else f"{1e3 * seconds:.2f}"


def diff_cell(r):
    d = r.get("diff")
    if d is None:
        return ""
    if not r.get("compared"):
        return "(reference)" if d == 0 else "**FAIL: nothing compared**"
    if not d <= TOLERANCE:
        return f"**FAIL {d:.1e}**"
    return f"{d:.1e}"


def mem_cell(r):
    parts = []
    if r.get("rss") is not None and r["rss"] >= 0:
        parts.append(f"{r['rss'] / 2**20:.1f}")
    return parts[0] if parts else ""


def tape_cell(r):
    t = r.get("tape")
    return f"{t / 2**20:.1f}" if t is not None and t >= 0 else ""


def main_rows(name_cells, results, keys):
    """Rows of the c-update and HM-LSTM tables for one problem."""
    ref = results[REFERENCE]["total"]
    rows = []
    for k in keys:
        r = results[k]
        if r["error"] is not None:
            rows.append(name_cells + [LABELS[k], f"failed: {r['error']}", "", "", "", "", "", ""])
            continue
        ratio = f"{r['total'] / ref:.2f}x" if ref else ""
        rows.append(name_cells + [LABELS[k], ms(r["total"]), ms(r["fwd"]), ms(r["bwd"]), ratio, mem_cell(r),
                                  tape_cell(r), diff_cell(r)])
    return rows


def table(header, rows, align):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# ---- the parts ----------------------------------------------------------------

CUPDATE_KEYS = ["dc-store", "dc-recompute", "dc-pure", "torch-eager", "torch-compile", "jax-jit", "jax-jit-grad"]
HMLSTM_KEYS = ["dc-store", "dc-recompute", "dc-pure", "torch-eager", "torch-compile", "jax-jit"]
SWEEP_KEYS = ["dc-store", "torch-eager", "torch-compile", "jax-jit-split"]
MAIN_HEADER = ["variant", "median ms", "forward ms", "backward ms", "time / dualcast mixed (store)",
               "peak memory MiB (RSS)", "peak tape MiB", "max rel diff"]


def cupdate_rounds(dims, quick):
    r = 60 if dims <= 512 else 40 if dims <= 1024 else 25
    return max(5, r // 4) if quick else r


def cpu_setup_limits(args):
    """The CPU mode limits torch.compile only when --compile-limit is given."""
    return {"torch-compile": args.compile_limit} if args.compile_limit else {}


def run_cupdate(args, tmp, log):
    data = {}
    rows = []
    for dims in args.dims:
        for layout in ("row", "column"):
            log(f"c-update {dims}^2, control per {layout} ...")
            res = measure(f"cupdate {dims} {layout}", CUPDATE_KEYS, args, tmp, cupdate_rounds(dims, args.quick),
                          3, True, setup_limits=cpu_setup_limits(args))
            data[(dims, layout)] = res
            new = main_rows([str(dims), f"per {layout}"], res, CUPDATE_KEYS)
            rows += new
            log("\n".join("| " + " | ".join(map(str, row)) + " |" for row in new))
    return data, table(["dims", "control"] + MAIN_HEADER, rows,
                       ["---:", "---", "---"] + ["---:"] * (len(MAIN_HEADER) - 1))


def run_hmlstm(args, tmp, log):
    log("HM-LSTM training step (torch.compile compiles the 64-step unrolled graph: minutes) ...")
    rounds = 8 if args.quick else 30
    res = measure("hmlstm", HMLSTM_KEYS, args, tmp, rounds, 3, True, setup_limits=cpu_setup_limits(args))
    rows = main_rows([], res, HMLSTM_KEYS)
    for row in rows:
        if row[0] == LABELS["jax-jit"]:
            row[0] = "jax.jit(value_and_grad)"
    log("\n".join("| " + " | ".join(map(str, row)) + " |" for row in rows))
    for k, row in zip(HMLSTM_KEYS, rows):
        if res[k].get("setup_s") is not None and k == "torch-compile":
            row[0] += f" (compile {res[k]['setup_s']:.0f} s)"
    return res, table(MAIN_HEADER, rows, ["---"] + ["---:"] * (len(MAIN_HEADER) - 1))


SWEEP_OPS = ["cupdate", "add", "mul", "matmul", "sum"]
# Minimal bytes per element a pass must move (float32): read the inputs, write
# the outputs; the c-update backward reads the 4 inputs (or 4 stored
# partials) and the adjoint and writes 4 gradients.
SWEEP_BYTES = {"cupdate": (20, 36), "add": (12, 12), "mul": (12, 20), "sum": (4, 4)}


def sweep_label(op, key):
    """A primitive op is the same in mixed and pure reverse mode."""
    return "dualcast" if key == REFERENCE and op != "cupdate" else LABELS[key]


def sweep_rounds(op, n, quick):
    if op == "matmul":
        r = 20 if n <= 512 else 10 if n <= 1024 else 5 if n <= 2048 else 3
    else:
        r = 40 if n <= 256 else 30 if n <= 512 else 20 if n <= 1024 else 10 if n <= 2048 else 5
    return max(3, r // 3) if quick else r


def rate_cells(op, n, seconds, limits, fwd):
    """Achieved GB/s or GFLOP/s and the share of the machine's limit."""
    if seconds is None or seconds <= 0:
        return "", ""
    if op == "matmul":
        rate = (2 if fwd else 4) * float(n) ** 3 / seconds / 1e9
        return f"{rate:.1f}", f"{100 * rate / limits['gemm']:.0f}%"
    rate = SWEEP_BYTES[op][0 if fwd else 1] * float(n) * n / seconds / 1e9
    return f"{rate:.1f}", f"{100 * rate / limits['stream']:.0f}%"


def run_sweep(args, tmp, limits, log):
    args.pool = {}
    data = {}
    rows = []
    try:
        for op in SWEEP_OPS:
            for n in args.sizes:
                log(f"sweep: {op} {n}^2 ...")
                problem = f"cupdate {n} row" if op == "cupdate" else f"prim {op} {n}"
                res = measure(problem, SWEEP_KEYS, args, tmp, sweep_rounds(op, n, args.quick), 1, False,
                              min(args.pre_runs, 1) if n >= 2048 else None)
                data[(op, n)] = res
                ref = res[REFERENCE]
                for k in SWEEP_KEYS:
                    r = res[k]
                    label = sweep_label(op, k)
                    if r["error"] is not None:
                        rows.append([op, n, label, f"failed: {r['error']}"] + [""] * 8)
                        continue
                    fr, fp = rate_cells(op, n, r["fwd"], limits, True)
                    br, bp = rate_cells(op, n, r["bwd"], limits, False)
                    ratio = f"{r['total'] / ref['total']:.2f}x" if ref["total"] else ""
                    rows.append([op, n, label, ms(r["fwd"]), ms(r["bwd"]), ms(r["total"]), ratio, fr, fp, br, bp,
                                 diff_cell(r)])
    finally:
        for w in args.pool.values():
            w.close()
        args.pool = None
    header = ["op", "n", "variant", "forward ms", "backward ms", "total ms", "time / dualcast", "fwd GB/s or GFLOP/s",
              "fwd % of limit", "bwd GB/s or GFLOP/s", "bwd % of limit", "max rel diff"]
    return data, table(header, rows, ["---", "---:", "---"] + ["---:"] * 9)


def gpu_status():
    """Why the CPU-vs-GPU part cannot run here (None when a GPU is there)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and "GPU" in out.stdout:
                return None
            return "nvidia-smi finds no GPU (" + (out.stderr or out.stdout).strip().splitlines()[0] + ")"
        except (subprocess.TimeoutExpired, IndexError, OSError):
            return "nvidia-smi does not answer"
    if not os.path.exists("/dev/nvidiactl"):
        return "no NVIDIA driver or device on this machine (no nvidia-smi, no /dev/nvidiactl)"
    return "no nvidia-smi on this machine"


# ---- targets ------------------------------------------------------------------

def verdict(ok):
    return "met" if ok else "**missed**"


def targets(cup, hm):
    rows = []
    for (dims, layout), res in sorted(cup.items()):
        if dims != 2048:
            continue
        for peer, rule in (("torch-eager", "faster than"), ("jax-jit", "no slower than"),
                           ("jax-jit-grad", "no slower than")):
            p = res[peer]
            for dc in ("dc-store", "dc-recompute"):
                d = res[dc]
                if p["error"] is not None or d["error"] is not None:
                    rows.append([f"c-update 2048^2, per {layout}", f"{LABELS[dc]} {rule} {LABELS[peer]}", "", "",
                                 "not measured"])
                    continue
                ok = d["total"] < p["total"] if rule == "faster than" else d["total"] <= p["total"]
                rows.append([f"c-update 2048^2, per {layout}", f"{LABELS[dc]} {rule} {LABELS[peer]}",
                             ms(d["total"]), ms(p["total"]),
                             f"{verdict(ok)} ({p['total'] / d['total']:.2f}x)"])
    if hm:
        for dc in ("dc-store", "dc-recompute"):
            d, p = hm[dc], hm["torch-eager"]
            if d["error"] is None and p["error"] is None:
                ok = d["total"] < p["total"]
                rows.append(["HM-LSTM step", f"{LABELS[dc]} faster than PyTorch eager", ms(d["total"]),
                             ms(p["total"]), f"{verdict(ok)} ({p['total'] / d['total']:.2f}x)"])
    return table(["problem", "target", "dualcast ms", "peer ms", "verdict (peer time / dualcast time)"], rows,
                 ["---", "---", "---:", "---:", "---"])


# ---- plot ---------------------------------------------------------------------

def plot(path, cup, sweep, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("c-update (dims 512-2048)", None)] + [(op, op) for op in SWEEP_OPS] if cup else \
        [(op, op) for op in SWEEP_OPS]
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    colors = {"dc-store": "C0", "dc-recompute": "C9", "dc-pure": "C7", "torch-eager": "C3", "torch-compile": "C1",
              "jax-jit": "C2", "jax-jit-grad": "C4", "jax-jit-split": "C2"}
    for ax, (title, op) in zip(axes.flat, panels):
        if op is None:
            for k in CUPDATE_KEYS:
                for layout, style in (("row", "-"), ("column", "--")):
                    pts = [(d, cup[(d, layout)][k]["total"]) for d in args.dims
                           if (d, layout) in cup and cup[(d, layout)][k].get("total")]
                    if pts:
                        x, y = zip(*pts)
                        ax.plot(x, [1e3 * v for v in y], style, marker="o", color=colors[k],
                                label=LABELS[k] if layout == "row" else None)
            ax.set_title("c-update, fwd + bwd (solid: control per row, dashed: per column)", fontsize=9)
            ax.set_xlabel("dims (matrix dims x dims)")
        else:
            for k in SWEEP_KEYS:
                pts = [(n, sweep[(op, n)][k]["total"]) for n in args.sizes
                       if (op, n) in sweep and sweep[(op, n)][k].get("total")]
                if pts:
                    x, y = zip(*pts)
                    ax.plot(x, [1e3 * v for v in y], marker="o", color=colors[k], label=sweep_label(op, k))
            name = "c-update (control per row)" if op == "cupdate" else op
            ax.set_title(f"sweep: {name}, forward + backward", fontsize=9)
            ax.set_xlabel("n (matrix n x n)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylabel("median time, ms")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"dualcast vs PyTorch and JAX on the CPU ({cpu_name()})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    # a line plot needs few colours: a palette image is a fraction of the size
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


# ---- main ---------------------------------------------------------------------

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f", {os.cpu_count()} threads"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions():
    import jax
    import torch

    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return f"PyTorch {torch.__version__}, JAX {jax.__version__}, NumPy {np.__version__}, gcc {gcc}, " \
           f"Python {platform.python_version()}"


def write_results(path, section, begin=MARK_BEGIN, end=MARK_END):
    """Replaces the marked section of path (RESULTS.md) with section."""
    results_file.replace_section(path, begin, end, section.strip())


# ---- the GPU mode (--device cuda) ---------------------------------------------

GPU_MARK_BEGIN = ("<!-- peers-gpu:begin (written by bench/peers/run.sh --device cuda; a run replaces the tables of "
                  "the parts it ran) -->")
GPU_MARK_END = "<!-- peers-gpu:end -->"
GPU_KEYS = ["dc-store", "dc-recompute", "dc-pure", "dc-store-graph", "dc-recompute-graph", "dc-pure-graph",
            "torch-eager", "torch-cudagraph", "torch-compile", "jax-jit"]
GPU_DIMS = [512, 1024, 2048, 4096]
GPU_HEADER = ["variant", "synchronized ms (median)", "back-to-back ms per iteration (median)",
              "synchronized / dualcast mixed store", "back-to-back / dualcast mixed store", "max rel diff"]


def gpu_rounds(dims, quick):
    """Rounds (each: one synchronized iteration and one burst per variant) and
    the iterations of a burst, for a c-update of dims^2 (None: the HM-LSTM)."""
    if dims is None:
        return (5, 3) if quick else (20, 10)
    rounds = 30 if dims <= 1024 else 20 if dims <= 2048 else 15
    burst = 50 if dims <= 1024 else 20 if dims <= 2048 else 10
    return (5, 5) if quick else (rounds, burst)


def gpu_rows(name_cells, results, keys):
    ref = results[REFERENCE]
    rows = []
    for k in keys:
        r = results[k]
        label = LABELS[k]
        if k == "torch-compile" and r.get("setup_s") is not None and r["error"] is None:
            label += f" (compile {r['setup_s']:.0f} s)"
        if r.get("graph") and r["error"] is None:
            captures, _, kernels = r["graph"]
            label += (" (ran eagerly: no capture)" if captures == 0 else
                      f" ({kernels} kernels" + (f"; captured {captures} times)" if captures > 1 else ")"))
        if r["error"] is not None:
            why = r["error"]
            why = why if why.startswith("skipped:") else ("skipped: " + why[len("unavailable: "):]
                                                          if why.startswith("unavailable: ") else "failed: " + why)
            rows.append(name_cells + [label, why, "", "", "", ""])
            continue
        sync_ratio = f"{r['total'] / ref['total']:.2f}x" if ref.get("total") and r.get("total") else ""
        burst_ratio = f"{r['burst'] / ref['burst']:.2f}x" if ref.get("burst") and r.get("burst") else ""
        rows.append(name_cells + [label, ms(r["total"]), ms(r["burst"]), sync_ratio, burst_ratio, diff_cell(r)])
    return rows


def gpu_setup_limits(args):
    return {"torch-compile": args.compile_limit} if args.compile_limit > 0 else {}


def run_gpu_cupdate(args, tmp, log):
    data, rows = {}, []
    # one worker per variant for all the sizes (each setup replaces the last
    # problem): starting PyTorch and JAX and their CUDA contexts takes seconds
    args.pool = {}
    try:
        for dims in args.dims:
            for layout in ("row", "column"):
                log(f"c-update {dims}^2, control per {layout} ...")
                rounds, burst = gpu_rounds(dims, args.quick)
                res = measure(f"cupdate {dims} {layout}", GPU_KEYS, args, tmp, rounds, 3, False, burst=burst,
                              setup_limits=gpu_setup_limits(args))
                data[(dims, layout)] = res
                new = gpu_rows([str(dims), f"per {layout}"], res, GPU_KEYS)
                rows += new
                log("\n".join("| " + " | ".join(map(str, row)) + " |" for row in new))
    finally:
        for w in args.pool.values():
            w.close()
        args.pool = None
    return data, table(["dims", "control"] + GPU_HEADER, rows, ["---:", "---", "---"] + ["---:"] * 5)


def run_gpu_hmlstm(args, tmp, log):
    log("HM-LSTM step (forward and backward) ...")
    rounds, burst = gpu_rounds(None, args.quick)
    res = measure("hmlstm", GPU_KEYS, args, tmp, rounds, 3, False, burst=burst, setup_limits=gpu_setup_limits(args))
    rows = gpu_rows([], res, GPU_KEYS)
    for row in rows:
        if row[0] == LABELS["jax-jit"]:
            row[0] = "jax.jit(value_and_grad)"
    log("\n".join("| " + " | ".join(map(str, row)) + " |" for row in rows))
    return res, table(GPU_HEADER, rows, ["---"] + ["---:"] * 5)


def nvidia_smi_gpus():
    """nvidia-smi's name, driver and memory of each GPU ("" without it)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        return ""
    lines = [l.strip() for l in out.stdout.splitlines() if l.strip()]
    return "; ".join(f"GPU {i}: {l}" for i, l in enumerate(lines)) if out.returncode == 0 else ""


def frameworks_devices(groups):
    """The devices the workers named, per framework ("dualcast: ..., PyTorch:
    ..."), over every problem run."""
    names = {}
    for res in groups:
        for k, r in res.items():
            if r.get("device"):
                fw = "dualcast" if k.startswith("dc-") else "PyTorch" if k.startswith("torch-") else "JAX"
                names.setdefault(fw, set()).add(r["device"])
    return "; ".join(f"{fw}: {', '.join(sorted(v))}" for fw, v in names.items())


def main_gpu(args, parts):
    """The GPU mode: every variant on the GPU (or, rehearsing, on the CPU),
    timed one way (see GPU_NOTES); the section between the peers-gpu
    markers of RESULTS.md."""
    rehearsal = args.device == "cpu"
    if not rehearsal:
        why = gpu_status()
        if why:
            raise SystemExit(f"compare.py --device cuda: {why}; the GPU mode needs an NVIDIA GPU "
                             "(--rehearse runs its procedure on the CPU)")
    args.worker_device = "cpu" if rehearsal else "cuda"
    write = not args.no_write and not args.quick and not rehearsal
    tmp = tempfile.mkdtemp(prefix="dualcast-peers-gpu-")
    started = time.time()

    def log(msg):
        print(msg, flush=True)

    cup = hm = None
    cup_table = hm_table = ""
    try:
        # fail fast, before any problem: dualcast's CUDA context must start
        probe = start_worker("dc-store", args, tmp)
        try:
            dc_device = " ".join(probe.ask("device"))
        except WorkerError as e:
            raise SystemExit(f"compare.py: dualcast's worker cannot run on {args.worker_device}: {e}")
        finally:
            probe.close()
        smi = nvidia_smi_gpus()
        head = [("REHEARSAL without a GPU (--rehearse): the GPU mode's procedure with "
                 + ("dualcast's workers on the emulated CUDA device and the peers' " if args.emulated else
                    "every worker ") + "on the CPU; no figure here is a GPU figure. " if rehearsal else "") +
                f"Device: {dc_device} (dualcast)" + (f"; nvidia-smi: {smi}" if smi else "") +
                f"; host CPU: {cpu_name()}.",
                f"{versions()}; {datetime.date.today().isoformat()}."]
        log("\n".join(head) + "\n")
        if "cupdate" in parts:
            cup, cup_table = run_gpu_cupdate(args, tmp, log)
        if "hmlstm" in parts:
            hm, hm_table = run_gpu_hmlstm(args, tmp, log)
    finally:
        if args.keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    elapsed = time.time() - started
    devices = frameworks_devices(list((cup or {}).values()) + ([hm] if hm else []))
    run_line = " ".join(head) + (f" Devices as each framework names them: {devices}." if devices else "")
    command = "bench/peers/run.sh " + (("--rehearse" + (" --emulated" if args.emulated else "")) if rehearsal
                                       else "--device cuda") + ("" if len(parts) > 1 else f" --parts {parts[0]}")
    failures = []
    blocks = {}
    for part, named, table_text in (("cupdate", list((cup or {}).items()), cup_table),
                                    ("hmlstm", [(("hmlstm",), hm)] if hm else [], hm_table)):
        if not table_text:
            continue
        bad = []
        for name, res in named:
            for k, r in res.items():
                if r["error"] is None and not (r.get("diff", 0) <= TOLERANCE):
                    bad.append(f"{' '.join(map(str, name))}: {LABELS[k]} differs by {r['diff']:.1e}")
        failures += bad
        check = ("**Gradient check FAILED:** " + "; ".join(bad) if bad else
                 f"Gradient check: every variant that ran agrees with dualcast (mixed, store, eager) within "
                 f"{TOLERANCE:.0e}.")
        blocks[part] = "\n".join([GPU_PART_TITLES[part], "", GPU_PART_INTROS[part], "",
                                  f"Run: `{command}`, {elapsed / 60:.0f} min in all. {run_line}", "", table_text,
                                  "", check])
    section = gpu_section(blocks)
    print("\n" + section)
    if write:
        old = read_section(args.results, GPU_MARK_BEGIN, GPU_MARK_END)
        kept = {part: block for part, block in gpu_part_blocks(old).items() if part not in blocks}
        write_results(args.results, gpu_section({**kept, **blocks}), GPU_MARK_BEGIN, GPU_MARK_END)
        print(f"wrote the peers-gpu section of {os.path.relpath(args.results, REPO)}"
              + (f" (kept its earlier {', '.join(kept)} table)" if kept else ""))
    elif rehearsal:
        print("(a rehearsal on the CPU: bench/RESULTS.md left alone)")
    elif not args.no_write:
        print("(a quick run: bench/RESULTS.md left alone)")
    return 1 if failures else 0


GPU_PART_TITLES = {
    "cupdate": "### The c-update gradient on the GPU (dims x dims, float32, all-ones output adjoint)",
    "hmlstm": "### One HM-LSTM step on the GPU (forward and backward)",
}
GPU_PART_INTROS = {
    "cupdate": "The problem of the CPU section's c-update table, up to 4096^2.",
    "hmlstm": "The problem of the CPU section (the demo's model, 3 layers x 128 units, batch 32 x 64), on the GPU; "
              "an iteration is the forward and backward pass into the parameters' gradients, without clipping or "
              "Adam (`bench_hmlstm_step` times the whole training step), so that every iteration computes the "
              "gradients of the same parameters.",
}


def gpu_part_marks(part):
    return f"<!-- peers-gpu:{part}:begin -->", f"<!-- peers-gpu:{part}:end -->"


def gpu_section(blocks):
    """The peers-gpu section: a title, each part's block between markers of
    its own (so that a run of one part leaves the other's table in place:
    on a lent GPU one command may have to fit a time limit), the notes."""
    out = ["## GPU: dualcast against PyTorch and JAX (`bench/peers/run.sh --device cuda`)", "",
           "Every figure in this section comes from `bench/peers/run.sh --device cuda`, which wrote it here; "
           "each table says which run and device.", ""]
    for part in ("cupdate", "hmlstm"):
        if part in blocks:
            begin, end = gpu_part_marks(part)
            out += [begin, blocks[part].strip(), end, ""]
    return "\n".join(out + [GPU_NOTES, ""])


def read_section(path, begin, end):
    """The text between the markers in path ("" where there is none)."""
    if not os.path.exists(path):
        return ""
    m = re.search(re.escape(begin) + "(.*?)" + re.escape(end), open(path).read(), re.S)
    return m.group(1) if m else ""


def gpu_part_blocks(section):
    blocks = {}
    for part in ("cupdate", "hmlstm"):
        begin, end = gpu_part_marks(part)
        m = re.search(re.escape(begin) + "(.*?)" + re.escape(end), section, re.S)
        if m:
            blocks[part] = m.group(1).strip()
    return blocks


GPU_NOTES = """How it is measured (GPU mode):

- Every variant runs in its own process on the same GPU (dualcast: `bench_peer_worker --device cuda`,
  with `--graph` for the graph replays; the peers: `peer_worker.py --device cuda`), all loading the
  inputs dualcast wrote, in the rounds of the CPU section (shuffled order, a 50 ms pause and two untimed
  iterations before each turn). Float32 throughout, without TF32: dualcast's contexts leave `cuda_tf32`
  off; PyTorch runs with `torch.backends.cuda.matmul.allow_tf32 = False` and
  `torch.backends.cudnn.allow_tf32 = False`; JAX with `jax_default_matmul_precision = "highest"`.
- An iteration is the forward and the backward pass into the inputs' gradients (dualcast: tape reset,
  gradients zeroed, forward, backward; PyTorch: the forward and `torch.autograd.grad`; JAX: one jitted
  call returning the output and the gradients). Each variant's iteration is timed the same two ways:
  synchronized, the wall time of one iteration from a device at rest until it is at rest again (dualcast:
  `dc_ctx_synchronize` before and after; PyTorch: `torch.cuda.synchronize()`; JAX: the previous call's
  results ready before, `block_until_ready` after), median over the rounds; and back to back, the wall
  time of N iterations queued one after the other with one synchronization at the end, divided by N
  (median over the rounds), where the host's launch overhead hides behind the GPU's work as far as it can.
- Variants. dualcast eager: the step's ops launched one by one; graph replay: the iteration captured once
  (`dc_graph_capture`) and replayed (`dc_graph_replay`). PyTorch eager; PyTorch eager captured as one
  `torch.cuda.CUDAGraph` (forward and `torch.autograd.grad`, static inputs, after three warm-up iterations
  on a side stream, as PyTorch documents it) and replayed; torch.compile (`dynamic=False`, Inductor's
  default mode) where compiling and the first iteration finish within the limit (`--compile-limit`,
  seconds), else skipped with that reason; jax.jit of the output and the gradients (`jax.vjp`), for the
  HM-LSTM `jax.jit(jax.value_and_grad(loss))` with `lax.scan` over the 64 characters.
- Agreement: as in the CPU section, against dualcast mixed store (eager) on the same GPU; above 1e-4 the
  run fails. No memory columns: resident host memory says little about a GPU run."""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="dualcast's CMake build directory")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu (default): the CPU comparison; cuda: the GPU mode (every variant on the GPU, "
                         "synchronized and back-to-back times; fails at once without a GPU)")
    ap.add_argument("--rehearse", action="store_true",
                    help="the GPU mode's procedure with every worker on the CPU (a test of that mode where there "
                         "is no GPU; its figures are CPU figures and are never written)")
    ap.add_argument("--emulated", action="store_true",
                    help="with --rehearse: dualcast's workers are bench_peer_worker_emulated on the emulated CUDA "
                         "device of tests/cuda_emulation (its CUDA code runs; its times mean nothing)")
    ap.add_argument("--parts", default=None,
                    help="comma-separated: cupdate, hmlstm, sweep (default all; the GPU mode: cupdate, hmlstm)")
    ap.add_argument("--dims", default=None,
                    help="c-update sizes, comma-separated (default 512,1024,2048; GPU mode 512,1024,2048,4096)")
    ap.add_argument("--corpus", default=None, help="the fortunes corpus for the HM-LSTM step (dualcast's workers)")
    ap.add_argument("--compile-limit", type=float, default=None,
                    help="seconds torch.compile may take to compile and run its first iteration before the variant "
                         "is skipped (GPU mode default 150; CPU mode: no limit unless given)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and sizes (a check, not a measurement)")
    ap.add_argument("--gap", type=float, default=0.05, help="pause before each variant's turn, seconds (0.05)")
    ap.add_argument("--pre-runs", type=int, default=2,
                    help="untimed runs right before each timed one (2; 1 in the sweep from 2048^2 on)")
    ap.add_argument("--results", default=os.path.join(REPO, "bench", "RESULTS.md"))
    ap.add_argument("--plot", default=os.path.join(REPO, "bench", "peers_cpu.png"))
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md and the plot alone")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (inputs, gradients, logs)")
    args = ap.parse_args()
    args.pool = None
    gpu_mode = args.device == "cuda" or args.rehearse
    if args.rehearse and args.device == "cuda":
        ap.error("--rehearse runs the GPU mode on the CPU: leave --device out")
    if args.emulated and not args.rehearse:
        ap.error("--emulated goes with --rehearse")
    if args.emulated and not os.path.exists(os.path.join(args.build, "bench", "bench_peer_worker_emulated")):
        ap.error("--emulated: no bench/bench_peer_worker_emulated in the build directory (cmake --build BUILD "
                 "--target bench_peer_worker_emulated; it needs the CUDA emulation of tests/cuda_emulation)")
    if args.parts is None:
        args.parts = "cupdate,hmlstm" if gpu_mode else "cupdate,hmlstm,sweep"
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in ("cupdate", "hmlstm", "sweep"):
            ap.error(f"unknown part {p}")
        if p == "sweep" and gpu_mode:
            ap.error("the GPU mode has no sweep (parts: cupdate, hmlstm)")
    try:
        custom_dims = [int(d) for d in args.dims.split(",") if d] if args.dims else None
    except ValueError:
        ap.error("--dims: comma-separated integers")
    if gpu_mode:
        args.dims = custom_dims or ([512, 4096] if args.quick else GPU_DIMS)
        if args.compile_limit is None:
            args.compile_limit = 150.0
        return main_gpu(args, parts)
    args.dims = custom_dims or [512, 1024, 2048]
    args.sizes = [64, 256, 1024] if args.quick else [64, 128, 256, 512, 1024, 2048, 4096]
    full = set(parts) == {"cupdate", "hmlstm", "sweep"} and not args.quick
    write = full and not args.no_write

    tmp = tempfile.mkdtemp(prefix="dualcast-peers-")
    started = time.time()

    def log(msg):
        print(msg, flush=True)

    try:
        limits_worker = start_worker("dc-store", args, tmp)
        stream, copy, gemm = (float(x) for x in limits_worker.ask("limits"))
        limits_worker.close()
        limits = {"stream": stream, "copy": copy, "gemm": gemm}
        head = [f"Machine: {cpu_name()}, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
                f"{versions()}; {datetime.date.today().isoformat()}.",
                f"Measured limits: streaming bandwidth {stream:.1f} GB/s (plain OpenMP loop, 4 float arrays in, 5 out, "
                f"as bench_common.c measures it), copy {copy:.1f} GB/s; one 4096^2 sgemm (OpenBLAS, the BLAS dualcast "
                f"uses) {gemm:.0f} GFLOP/s."]
        log("\n".join(head) + "\n")
        cup = hm = sweep = None
        cup_table = hm_table = sweep_table = ""
        if "cupdate" in parts:
            cup, cup_table = run_cupdate(args, tmp, log)
        if "hmlstm" in parts:
            hm, hm_table = run_hmlstm(args, tmp, log)
        if "sweep" in parts:
            sweep, sweep_table = run_sweep(args, tmp, limits, log)
        gpu = gpu_status()
        gpu_line = ("CPU vs GPU: skipped: " + gpu + "." if gpu else
                    "CPU vs GPU: a GPU is present, but this command measures the CPU only; the GPU runs are owed.")
        target_table = targets(cup or {}, hm) if (cup or hm) else ""
    finally:
        if args.pool:
            for w in args.pool.values():
                w.close()
        if args.keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    failures = []
    for group in ([cup] if cup else []) + ([{("hmlstm",): hm}] if hm else []) + ([sweep] if sweep else []):
        for name, res in group.items():
            for k, r in res.items():
                if r["error"] is None and not (r.get("diff", 0) <= TOLERANCE):
                    failures.append(f"{' '.join(map(str, name))}: {LABELS[k]} differs by {r['diff']:.1e}")
    elapsed = time.time() - started

    out = ["## CPU: dualcast against PyTorch and JAX (`bench/peers/run.sh`)", "",
           "Every figure in this section comes from one run of `bench/peers/setup.sh && bench/peers/run.sh` "
           f"({elapsed / 60:.0f} min), which wrote it here.", ""] + head + [""]
    if cup_table:
        out += ["### The c-update gradient (dims x dims, float32, all-ones output adjoint)", "", cup_table, ""]
    if hm_table:
        out += ["### One HM-LSTM training step (forward and backward)", "",
                "The demo's model with its default sizes (3 layers x 128 units, embedding 64, output module 128, "
                "batch 32 x 64 characters, vocabulary 114 of the fortunes corpus), parameters built by dualcast "
                "from seed 1, batch 0 of the corpus and a random initial state, exported by `bench_hmlstm_export`'s "
                "code; the peers load the same files.", "", hm_table, ""]
    if target_table:
        out += ["### Against the targets", "", target_table, ""]
    if sweep_table:
        out += ["### Size sweep: forward and backward (control per row for the c-update)", "",
                "Rates are the minimal traffic of a pass over its time: bytes per element (float32) forward / "
                "backward: c-update 20 / 36, add 12 / 12, mul 12 / 20, sum 4 / 4, against the streaming "
                f"bandwidth ({stream:.1f} GB/s); matmul 2n^3 / 4n^3 flops against the sgemm rate "
                f"({gemm:.0f} GFLOP/s). Up to 1024^2 the arrays stay in the caches, which is why rates above 100% of "
                "the streaming bandwidth occur. PyTorch's add backward hands the adjoint itself to both inputs and "
                "its sum backward returns a broadcast view, so neither moves the nominal bytes. PyTorch and JAX "
                "allocate every result afresh, and glibc maps arrays this large (64 MiB at 4096^2) anew for each "
                "one, so from there on a profile of either is dominated by the kernel faulting in and clearing "
                "pages; dualcast's tape reuses its arena from step to step. jax.jit runs forward (jax.vjp, keeping "
                "the residuals) and backward as two jitted calls here.", "", sweep_table, ""]
    out += [gpu_line, ""]
    if os.path.exists(args.plot) or write:
        out += [f"![time against size per variant]({os.path.relpath(args.plot, os.path.dirname(args.results))})",
                ""]
    out += [NOTES, ""]
    if failures:
        out += ["**Gradient check FAILED:** " + "; ".join(failures), ""]
    else:
        out += [f"Gradient check: every variant agrees with dualcast within {TOLERANCE:.0e}.", ""]
    section = "\n".join(out)
    print("\n" + section)
    if write:
        if cup or sweep:
            plot(args.plot, cup or {}, sweep or {}, args)
        write_results(args.results, section)
        print(f"wrote {os.path.relpath(args.results, REPO)} and {os.path.relpath(args.plot, REPO)}")
    elif not args.no_write:
        print("(a partial or quick run: bench/RESULTS.md and the plot left alone)")
    return 1 if failures else 0


NOTES = """How it is measured:

- Each variant runs in its own process (dualcast: `bench_peer_worker`, C; the peers: `peer_worker.py`),
  all loading the inputs dualcast wrote. After warm-up (which includes compiling), rounds follow in which
  every variant takes one turn, in a shuffled order; the tables give medians over the rounds (forward and
  backward columns are medians of their own). A turn is a 50 ms pause, two untimed runs (one from 2048^2
  on in the sweep) and one timed run: the pause lets the previous process's OpenMP threads stop spinning,
  and the untimed runs wake this process's threads (on this 2-vCPU virtual machine a thread pool that has
  gone to sleep takes milliseconds to wake) and bring its data into the caches as far as it fits, as in a
  loop of training steps. Times are taken inside each worker around the forward and backward calls
  (PyTorch: `torch.autograd.grad`; JAX: until `block_until_ready`); 2 threads everywhere (OpenMP for
  dualcast and PyTorch, XLA's pool for JAX).
- Variants. dualcast mixed: the c-update (or the HM-LSTM cell) as one broadcast node, partials stored
  forward (store) or recomputed in the backward pass (recompute); pure reverse: one node per primitive op
  with select. PyTorch eager: the same math with `torch.where`; torch.compile: the forward function
  compiled by Inductor (`dynamic=False`), the backward through autograd (compiled by AOTAutograd).
  jax.jit (output + gradients): one jitted function returning the output and `jax.vjp`'s gradients for
  an adjoint passed in as an argument (as dualcast and PyTorch get it); jax.jit(grad): `jax.jit(jax.grad(
  sum of the output))`, which computes no output tensor and folds the all-ones adjoint away. The HM-LSTM
  under JAX is `jax.jit(jax.value_and_grad(loss))` with `lax.scan` over the 64 characters, the usual form
  of a recurrence in JAX; PyTorch (eager and compiled) runs the Python loop.
- Memory. PyTorch and JAX: peak resident set size (VmHWM, reset through /proc/self/clear_refs) during
  the timed rounds minus the resident size just before them, after warm-up, garbage collection and
  `malloc_trim`, with only the inputs alive: what one step adds. Neither framework reports allocator
  statistics on the CPU. dualcast: the same resident-size delta, from before its first step (its tape
  keeps its arena between steps, so after warm-up the delta would be zero), and the tape's own peak
  bytes (`dc_tape_peak_bytes`: tape tensors, partials and gradients of the step; the inputs' gradient
  buffers are outside the tape).
- Agreement. "max rel diff" is the largest over the outputs and gradients of max |peer - dualcast| /
  max |dualcast|, dualcast being mixed mode with the store policy; above 1e-4 the run fails."""


if __name__ == "__main__":
    sys.exit(main())
