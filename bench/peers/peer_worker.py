"""A peer's side of the comparison: PyTorch or JAX answering the commands of
bench/bench_peer_worker.c (see there) on standard input and output, one reply
line per command, so that compare.py runs every variant once per round.

    python peer_worker.py VARIANT [--device cpu|cuda]

VARIANT:
  torch-eager     PyTorch eager autograd (torch.autograd.grad)
  torch-cudagraph torch-eager's forward and backward captured once as one
                  torch.cuda.CUDAGraph (static inputs, warm-up on a side
                  stream first) and replayed; needs CUDA, and answers every
                  problem with "error unavailable: ..." without it
  torch-compile   torch.compile of the forward function, autograd backward
  jax-jit         jax.jit of the forward and backward together: the output
                  and the gradients (jax.vjp) of the c-update and the primitive
                  ops, jax.value_and_grad of the HM-LSTM loss
  jax-jit-grad    jax.jit(jax.grad(sum of the output)): the gradients only
  jax-jit-split   forward (jax.jit of jax.vjp) and backward (jax.jit of the
                  returned function) as two calls, timed separately

--device cuda puts the inputs on the first GPU, with float32 products
without TF32 (PyTorch: torch.backends.cuda.matmul.allow_tf32 and
torch.backends.cudnn.allow_tf32 off; JAX: jax_default_matmul_precision
"highest"); a framework that finds no GPU answers "error unavailable: ...".
There "run" is one iteration (forward and backward) from the device at rest
until it is at rest again (torch.cuda.synchronize; JAX: block_until_ready),
"ok TOTAL -1 -1". Everywhere, "burst N" queues N iterations back to back
and synchronizes once at the end: "ok SECONDS" per iteration; "device"
answers "ok NAME".

Inputs come from the .npy files the dualcast worker wrote; the all-ones
output adjoint is made here (and passed as an argument, so no compiler can
fold it away). Memory: peak resident set size above the resident size after
warm-up, garbage collection and malloc_trim ("memstart"), with only the
inputs alive.
"""

import ctypes
import gc
import json
import os
import sys
import time

import numpy as np

import peer_models

VARIANTS = ("torch-eager", "torch-cudagraph", "torch-compile", "jax-jit", "jax-jit-grad", "jax-jit-split")


class Unavailable(Exception):
    """The variant cannot run here (no GPU, or a CUDA graph on the CPU)."""


def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return -1


def reset_peak_rss():
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def load(directory, name):
    return np.load(os.path.join(directory, name + ".npy"))


def load_hmlstm(directory):
    """The exported HM-LSTM problem as NumPy arrays: its configuration, the
    parameters by name, the character ids and targets (int64) and the initial
    state h, c, z of every layer by name ("h1", "c1", "z1", ...)."""
    with open(os.path.join(directory, "meta.json")) as f:
        cfg = json.load(f)
    params = {n: load(directory, n) for n in cfg["params"]}
    ids = load(directory, "ids").astype(np.int64)
    targets = load(directory, "targets").astype(np.int64)
    state = {f"{k}{l}": load(directory, f"{k}{l}") for l in range(1, cfg["layers"] + 1) for k in "hcz"}
    return cfg, params, ids, targets, state


def save(directory, name, value):
    np.save(os.path.join(directory, name + ".npy"), np.asarray(value, dtype=np.float32))


class TorchPeer:
    """PyTorch eager autograd, eager captured as a CUDA graph, or
    torch.compile of the forward function."""

    def __init__(self, mode, device):
        import torch

        self.torch = torch
        self.mode = mode  # "eager", "cudagraph" or "compile"
        self.cuda = device == "cuda"
        torch.set_num_threads(os.cpu_count() or 1)
        if self.cuda:
            if not torch.cuda.is_available():
                raise Unavailable(f"PyTorch {torch.__version__} finds no CUDA device")
            # float32 products as dualcast computes them (no TF32 tensor cores)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        elif mode == "cudagraph":
            raise Unavailable("torch.cuda.CUDAGraph captures CUDA work only (this worker runs on the CPU)")
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.ops = peer_models.TorchOps(torch)
        self.problem = None
        self.graph = None

    def device_name(self):
        return self.torch.cuda.get_device_name(self.device) if self.cuda else "CPU"

    def _fn(self, fn):
        if self.mode != "compile":
            return fn
        self.torch._dynamo.reset()
        return self.torch.compile(fn, dynamic=False)

    def _tensor(self, array):
        return self.torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _leaf(self, array):
        return self._tensor(array).requires_grad_(True)

    def setup_cupdate(self, directory):
        t = self.torch
        z, zb = self._tensor(load(directory, "z")), self._tensor(load(directory, "zb"))
        xs = [self._leaf(load(directory, n)) for n in "cfig"]
        ones = t.ones_like(xs[0])
        ops = self.ops
        fn = self._fn(lambda z_, zb_, c, f, i, g: peer_models.cupdate(ops, z_, zb_, c, f, i, g))
        self.names = ["c", "f", "i", "g"]
        self.leaves = xs
        self.forward = lambda: fn(z, zb, *xs)
        self.adjoint = ones
        self._capture()

    def setup_prim(self, op, directory):
        t = self.torch
        a = self._leaf(load(directory, "a"))
        xs = [a] if op == "sum" else [a, self._leaf(load(directory, "b"))]
        ops = self.ops
        fn = self._fn(lambda *args: peer_models.prim(ops, op, args[0], args[1] if len(args) > 1 else None))
        self.names = ["a", "b"][: len(xs)]
        self.leaves = xs
        self.forward = lambda: fn(*xs)
        self.adjoint = t.ones((), device=self.device) if op == "sum" else t.ones_like(a)
        self._capture()

    def setup_hmlstm(self, directory):
        t = self.torch
        cfg, params, ids, targets, state = load_hmlstm(directory)
        params = {n: self._leaf(v) for n, v in params.items()}
        ids, targets = self._tensor(ids), self._tensor(targets)
        state = {n: self._tensor(v) for n, v in state.items()}
        ops = self.ops
        fn = self._fn(lambda p, i, tg, s: peer_models.hmlstm_loss(ops, p, i, tg, s, cfg))
        self.names = list(cfg["params"])
        self.leaves = [params[n] for n in self.names]
        self.forward = lambda: fn(params, ids, targets, state)
        self.adjoint = None
        self._capture()

    def _step(self):
        out = self.forward()
        return out, self.torch.autograd.grad(out, self.leaves, self.adjoint)

    def _capture(self):
        """torch-cudagraph: the whole step (forward and backward) captured as
        PyTorch documents it: warm-up iterations on a side stream (autograd
        and cuBLAS set themselves up there, outside the capture), then one
        capture whose output and gradients stay the graph's static tensors,
        refreshed by each replay. The inputs are the persistent tensors made
        above, so the graph reads them where they are."""
        if self.mode != "cudagraph":
            return
        t = self.torch
        self.graph = None
        side = t.cuda.Stream()
        side.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(side):
            for _ in range(3):
                self._step()
        t.cuda.current_stream().wait_stream(side)
        graph = t.cuda.CUDAGraph()
        with t.cuda.graph(graph):
            self.static_result = self._step()
        self.graph = graph

    def iterate(self):
        """One forward and backward, queued (replayed from the graph, for
        torch-cudagraph); returns the output and the gradients."""
        if self.graph is not None:
            self.graph.replay()
            return self.static_result
        return self._step()

    def synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def run(self):
        if self.cuda:
            self.synchronize()
            t0 = time.perf_counter()
            out, grads = self.iterate()
            self.synchronize()
            return (time.perf_counter() - t0, None, None), out, grads
        t0 = time.perf_counter()
        out = self.forward()
        t1 = time.perf_counter()
        grads = self.torch.autograd.grad(out, self.leaves, self.adjoint)
        t2 = time.perf_counter()
        return (t2 - t0, t1 - t0, t2 - t1), out, grads

    def burst(self, n):
        self.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            self.iterate()
        self.synchronize()
        return (time.perf_counter() - t0) / n

    def write(self, directory, out, grads):
        save(directory, "loss" if self.adjoint is None else "out", out.detach().cpu().numpy())
        for name, g in zip(self.names, grads):
            save(directory, name, g.cpu().numpy())


class JaxPeer:
    """jax.jit of the forward and backward passes (see VARIANTS)."""

    def __init__(self, mode, device):
        if device == "cuda":
            # JAX takes three quarters of the GPU's memory at its start unless
            # told not to; the other variants' processes share the GPU
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        if device == "cuda":
            if jax.default_backend() not in ("gpu", "cuda"):
                raise Unavailable(f"JAX {jax.__version__} finds no GPU (its default backend is "
                                  f"{jax.default_backend()})")
            # float32 products in full float32 (no TF32, no bfloat16 passes)
            jax.config.update("jax_default_matmul_precision", "highest")
        self.jax = jax
        self.jnp = jax.numpy
        self.mode = mode  # "fused", "grad" or "split"
        self.ops = peer_models.JaxOps(jax)
        self.launch = None  # queues one iteration without waiting; returns its results

    def device_name(self):
        d = self.jax.devices()[0]
        return "CPU" if d.platform == "cpu" else d.device_kind

    def burst(self, n):
        """n iterations queued back to back, waited for once. A device runs
        the executions queued on it in order, so the last one's results being
        ready means every one is done; the earlier results are let go as they
        come, as PyTorch's are."""
        t0 = time.perf_counter()
        last = None
        for _ in range(n):
            last = self.launch()
        self.jax.block_until_ready(last)
        return (time.perf_counter() - t0) / n

    def _vjp_functions(self, fn, n_diff):
        """fn(*diff, *rest) -> output; returns the runner for self.mode."""
        jax = self.jax
        if self.mode == "grad":
            step = jax.jit(jax.grad(lambda *a: fn(*a).sum(), argnums=tuple(range(n_diff))))
            return lambda diff, rest, ct: (None, step(*diff, *rest))

        def fwd(diff, rest):
            return jax.vjp(lambda *d: fn(*d, *rest), *diff)

        if self.mode == "fused":
            both = jax.jit(lambda diff, rest, ct: (lambda o, back: (o, back(ct)))(*fwd(diff, rest)))
            return lambda diff, rest, ct: both(diff, rest, ct)
        fwd_jit = jax.jit(fwd)
        bwd_jit = jax.jit(lambda back, ct: back(ct))
        self.split = (fwd_jit, bwd_jit)
        return None

    def setup_cupdate(self, directory):
        jnp = self.jnp
        rest = (jnp.asarray(load(directory, "z")), jnp.asarray(load(directory, "zb")))
        diff = tuple(jnp.asarray(load(directory, n)) for n in "cfig")
        ops = self.ops
        self._prepare(lambda c, f, i, g, z, zb: peer_models.cupdate(ops, z, zb, c, f, i, g), diff, rest,
                      jnp.ones_like(diff[0]), ["c", "f", "i", "g"], "out")

    def setup_prim(self, op, directory):
        jnp = self.jnp
        a = jnp.asarray(load(directory, "a"))
        diff = (a,) if op == "sum" else (a, jnp.asarray(load(directory, "b")))
        ops = self.ops
        self._prepare(lambda *d: peer_models.prim(ops, op, d[0], d[1] if len(d) > 1 else None), diff, (),
                      jnp.ones(()) if op == "sum" else jnp.ones_like(a), ["a", "b"][: len(diff)], "out")

    def setup_hmlstm(self, directory):
        jax, jnp = self.jax, self.jnp
        cfg, params, ids, targets, state = load_hmlstm(directory)
        self.names = list(cfg["params"])
        self.params = {n: jnp.asarray(v) for n, v in params.items()}
        ids, targets = jnp.asarray(ids.astype(np.int32)), jnp.asarray(targets.astype(np.int32))
        state = {n: jnp.asarray(v) for n, v in state.items()}
        ops = self.ops
        step = jax.jit(jax.value_and_grad(lambda p, i, tg, s: peer_models.hmlstm_loss(ops, p, i, tg, s, cfg)))
        self.out_name = "loss"
        self.launch = lambda: step(self.params, ids, targets, state)

        def run():
            t0 = time.perf_counter()
            loss, grads = jax.block_until_ready(step(self.params, ids, targets, state))
            t = time.perf_counter() - t0
            return (t, None, None), loss, [grads[n] for n in self.names]

        self.run = run

    def _prepare(self, fn, diff, rest, ct, names, out_name):
        jax = self.jax
        self.names, self.out_name = names, out_name
        runner = self._vjp_functions(fn, len(diff))
        if runner is not None:
            self.launch = lambda: runner(diff, rest, ct)

            def run():
                t0 = time.perf_counter()
                out, grads = jax.block_until_ready(runner(diff, rest, ct))
                t = time.perf_counter() - t0
                return (t, None, None), out, grads
        else:
            fwd_jit, bwd_jit = self.split

            def launch():
                out, back = fwd_jit(diff, rest)
                return out, bwd_jit(back, ct)

            self.launch = launch

            def run():
                t0 = time.perf_counter()
                out, back = jax.block_until_ready(fwd_jit(diff, rest))
                t1 = time.perf_counter()
                grads = jax.block_until_ready(bwd_jit(back, ct))
                t2 = time.perf_counter()
                return (t2 - t0, t1 - t0, t2 - t1), out, grads
        self.run = run

    def write(self, directory, out, grads):
        if out is not None:
            save(directory, self.out_name, np.asarray(out))
        for name, g in zip(self.names, grads):
            save(directory, name, np.asarray(g))


def make_peer(variant, device):
    if variant.startswith("torch-"):
        return TorchPeer(variant[len("torch-"):], device)
    return JaxPeer({"jax-jit": "fused", "jax-jit-grad": "grad", "jax-jit-split": "split"}[variant], device)


def serve(variant, device):
    try:
        peer, unavailable = make_peer(variant, device), None
    except Unavailable as e:
        # the worker stays, so that the driver shows the reason in its table
        peer, unavailable = None, str(e)
    rss_base = None
    ready = False

    def reply(text):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd = words[0]
        try:
            if cmd == "quit":
                break
            if unavailable is not None:
                reply(f"error unavailable: {unavailable}")
                continue
            if cmd == "device":
                reply("ok " + peer.device_name())
            elif cmd in ("cupdate", "prim", "hmlstm"):
                ready = False
                if cmd == "cupdate":
                    peer.setup_cupdate(words[3])
                elif cmd == "prim":
                    peer.setup_prim(words[1], words[3])
                else:
                    peer.setup_hmlstm(words[1])
                peer.run()  # compiles; the driver's warm-up rounds follow
                ready = True
                reply("ok")
            elif cmd == "run":
                if not ready:
                    raise RuntimeError("no problem set up")
                (total, fwd, bwd), _, _ = peer.run()
                reply(f"ok {total:.9g} {fwd if fwd is not None else -1:.9g} {bwd if bwd is not None else -1:.9g}")
            elif cmd == "burst":
                if not ready:
                    raise RuntimeError("no problem set up")
                n = int(words[1]) if len(words) == 2 else 0
                if n < 1:
                    raise ValueError("usage: burst N (N >= 1)")
                reply(f"ok {peer.burst(n):.9g}")
            elif cmd == "grads":
                _, out, grads = peer.run()
                peer.write(words[1], out, grads)
                reply("ok")
            elif cmd == "memstart":
                reset_peak_rss()
                rss_base = status_bytes("VmRSS")
                reply("ok")
            elif cmd == "mem":
                peak = status_bytes("VmHWM") - rss_base if rss_base is not None else -1
                reply(f"ok {peak} -1")
            else:
                reply(f"error unknown command {cmd}")
        except Exception as e:  # reported to the driver, which shows it in the table
            first = str(e).strip().splitlines()
            reply(f"error {type(e).__name__}: {first[0] if first else ''}"[:400])
            print(f"{variant}: {cmd} failed", file=sys.stderr)
            import traceback

            traceback.print_exc(file=sys.stderr)


if __name__ == "__main__":
    argv = sys.argv[1:]
    device = "cpu"
    if len(argv) == 3 and argv[1] == "--device" and argv[2] in ("cpu", "cuda"):
        device = argv.pop(2)
        argv.pop(1)
    if len(argv) != 1 or argv[0] not in VARIANTS:
        sys.exit("usage: peer_worker.py " + "|".join(VARIANTS) + " [--device cpu|cuda]")
    serve(argv[0], device)
