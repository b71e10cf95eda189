"""slack against what users pick instead, side by side on a real training step, at equal budgets.

    python benchmarks/versus.py                      # CUDA when present (full shapes), else CPU (small)
    python benchmarks/versus.py --size cpu --out benchmarks/results/versus-cpu.csv --figure versus-cpu.png
    python benchmarks/versus.py --size gpu --out benchmarks/results/versus-gpu.csv --figure versus-gpu.png

Models: GPT-2 355M (``gpt2-355m`` of slackswap.torch.hf_models) and ``llama-1b``, a Llama of about
1.1B parameters (hidden 2048, MLP 5632, 32 heads, 4 KV heads, 22 layers, vocab 32000).
``--layers``, ``--seq``, ``--batch`` and ``--vocab`` shrink both (hidden sizes and heads stay).

Rows, each a forward + loss + backward step (no optimizer) of the same model and inputs:

* ``no plan``: the plain step;
* ``checkpoint per layer``: ``torch.utils.checkpoint`` (non-reentrant) around each block
  (``activation_checkpointing_enable``);
* ``save_on_cpu``: ``torch.autograd.graph.save_on_cpu`` (``pin_memory`` on CUDA only);
* per budget ``b`` (a fraction of the simulated keep-all peak, ``Problem.with_budget``), the
  ``slack`` plan of the step traced on the device, run two ways: ``slack apply`` (the executor,
  ``slackswap.torch.apply``) and ``slack policy`` (the ``slack`` plan made for per-layer
  regions, ``Problem.with_regions("layers")``, run by ``slackswap.torch.policy`` as the
  ``context_fn`` of per-layer checkpointing);
* per budget, ``compile knapsack``: ``torch.compile`` (``--compile-backend``, default inductor)
  with ``torch._functorch.config.activation_memory_budget = b`` (PyTorch's own knapsack over
  what to recompute, as a fraction of its own activation memory). ``--no-compile`` skips it; a
  step that cannot compile here gives a ``not run`` row with the reason, and the rest runs.

Columns: step time (median of ``--repeats`` steps after one warm-up step; for compile the
warm-up compiles, its seconds are in ``note``), the measured activation peak (CUDA:
``torch.cuda.max_memory_allocated`` above what was allocated before the step; CPU: the same
quantity read from PyTorch's profiler, ``profile_memory=True``: the peak of bytes allocated
during one profiled step above those allocated before it; parameter gradients are allocated
before the step in both), for both slack rows the saved-activation peak the step held (``slack
apply``: counted by the executor's hooks, docs/executor.md, "The saved-activation accounting";
``slack policy``: by ``CheckpointPlanPolicy.track()``) and its simulated value, the simulator's
step time and peak for both slack rows (``slack policy``'s plan is made for, and simulated
with, one region per layer: docs/regions.md, "Planning for checkpointed regions"), and the
largest absolute difference of a parameter gradient from the plain step's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

import torch

from slackswap import Problem, planners, simulate
from slackswap.core.errors import BudgetError, ParameterError
from slackswap.timeline.regions import layer_regions
from slackswap.torch import apply, policy, simulated_saved_peak, trace
from slackswap.torch import hf_models as zoo
from slackswap.torch.measure_step import device_costs

MODELS = ("gpt2-355m", "llama-1b")
#: a Llama of about 1.1B parameters (the shape of TinyLlama-1.1B), default batch and seq
LLAMA_1B = ({"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
             "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000}, 4, 1024)
CPU_SHAPE = {"batch": 1, "seq": 128, "layers": 2, "vocab": 1024}
GPU_SHAPE = {"gpt2-355m": {"batch": 8, "seq": 1024}, "llama-1b": {"batch": 4, "seq": 1024}}
FIELDS = ("model", "method", "budget", "step ms", "sim step ms", "peak MiB", "sim peak MiB",
          "saved peak MiB", "sim saved peak MiB", "grad max abs diff", "note")


def build(name: str, batch=None, seq=None, layers=None, vocab=None, seed: int = 0):
    """``(model, inputs)``: an hf_models preset, or ``llama-1b``."""
    if name in zoo.PRESETS:
        return zoo.build(name, batch=batch, seq=seq, layers=layers, vocab=vocab, seed=seed)
    if name != "llama-1b":
        raise ParameterError(f"versus: models: must be among {', '.join(MODELS)}; got {name!r}")
    import transformers as tf

    cfg, b0, s0 = dict(LLAMA_1B[0]), LLAMA_1B[1], LLAMA_1B[2]
    batch, seq = batch or b0, seq or s0
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    if vocab is not None:
        cfg["vocab_size"] = vocab
    torch.manual_seed(seed)
    ids_out = {k: None for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if isinstance(getattr(tf.LlamaConfig(), k, None), int)
               and getattr(tf.LlamaConfig(), k) >= cfg["vocab_size"]}
    conf = tf.LlamaConfig(max_position_embeddings=max(seq, 8), attn_implementation="eager",
                          use_cache=False, **cfg, **ids_out)
    model = tf.LlamaForCausalLM(conf)
    model.loss_type = "ForCausalLM"
    model.train()
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(seed + 1))
    return model, {"input_ids": ids, "labels": ids.clone()}


def _cpu_peak(fn) -> int:
    """Peak bytes allocated on the CPU while ``fn`` runs, above those allocated before it, from
    PyTorch's profiler (the CPU allocator keeps no peak counter). A block allocated before the
    profiler started and freed during ``fn`` is not seen freed (PyTorch warns so), so such a
    block, if any, is counted as still held: the value is an upper bound."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        fn()
    now = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action == Action.CREATE:
            now += size
        elif action == Action.DESTROY:
            now -= size
        peak = max(peak, now)
    return peak


class _Runner:
    """Runs and measures steps of one model: gradients preallocated and zeroed in place before
    each step, so they are not in its peak and each step's gradients are its own."""

    def __init__(self, model, inputs, device):
        self.model, self.inputs, self.dev = model, inputs, device
        self.cuda = device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def zero(self):
        for p in self.model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            else:
                p.grad.zero_()

    def step(self, fwd=None):
        out = (self.model if fwd is None else fwd)(**self.inputs)
        loss = out.loss
        del out
        loss.backward()

    def timed(self, run, repeats):
        times = []
        for _ in range(repeats):
            self.zero()
            self.sync()
            t0 = time.perf_counter()
            run()
            self.sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def peak(self, run) -> int:
        self.zero()
        self.sync()
        if self.cuda:
            base = torch.cuda.memory_allocated(self.dev)
            torch.cuda.reset_peak_memory_stats(self.dev)
            run()
            self.sync()
            return torch.cuda.max_memory_allocated(self.dev) - base
        return _cpu_peak(run)

    def grads(self):
        return [p.grad.detach().clone() for p in self.model.parameters()]


def _diff(a, b) -> float:
    return max((x.double() - y.double()).abs().max().item() for x, y in zip(a, b, strict=True))


@contextlib.contextmanager
def _per_layer(model, **kw):
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False, **kw})
    model.train()
    try:
        yield
    finally:
        model.activation_checkpointing_disable()


def _slack_rows(model, graph, b, pb, regions, r, row):
    """The ``slack`` plan at ``pb``'s budget, run through ``apply`` and through ``policy``."""
    plan = planners.get("slack").plan(pb)
    sim = simulate(pb, plan, detail=False)
    fits = sim.fits
    if not fits:
        sim = simulate(pb.with_budget(None), plan, detail=False)
    ex = apply(model, plan, graph, problem=pb)
    r.zero()
    with ex:
        r.step()
    saved = ex.stats.peak_saved_bytes

    def run_apply(plan=plan, pb=pb):
        with apply(model, plan, graph, problem=pb, track=False):
            r.step()
    counts = "/".join(str(plan.counts()[k]) for k in ("keep", "swap", "recompute"))
    row("slack apply", b, run_apply, **{
        "sim step ms": sim.step_time_s * 1e3, "sim peak MiB": sim.peak_bytes / 2**20,
        "saved peak MiB": saved / 2**20,
        "sim saved peak MiB": simulated_saved_peak(graph, plan, problem=pb) / 2**20,
        "note": f"keep/swap/recompute {counts}; simulated {'fits' if fits else 'over budget'}"})
    # planned for the regions it runs under (docs/regions.md, "Planning for checkpointed regions")
    pr = pb.with_regions(regions)
    plan_r = planners.get("slack").plan(pr)
    sim_r = simulate(pr, plan_r, detail=False)
    fits = sim_r.fits
    if not fits:
        sim_r = simulate(pr.with_budget(None), plan_r, detail=False)
    if plan_r.info.status.value == "INFEASIBLE":   # the regions' floor is above the budget
        fit_note = "no plan fits per-layer regions at this budget (slack: INFEASIBLE); simulated over budget"
    else:
        fit_note = f"simulated {'fits' if fits else 'over budget'}"
    pol = policy(plan_r, graph)
    with _per_layer(model, context_fn=pol):
        r.zero()
        with pol.track() as tracked:
            r.step()
        counts = "/".join(str(sim_r.counts[k]) for k in ("keep", "recompute"))
        row("slack policy", b, r.step, **{
            "sim step ms": sim_r.step_time_s * 1e3, "sim peak MiB": sim_r.peak_bytes / 2**20,
            "saved peak MiB": tracked.peak_saved_bytes / 2**20,
            "sim saved peak MiB": simulated_saved_peak(graph, plan_r, problem=pr) / 2**20,
            "note": f"planned for per-layer regions; keep/recompute {counts} as they run; {fit_note}"})


def _compile_row(model, b, backend, r, row) -> str | None:
    """``torch.compile`` with PyTorch's activation-memory knapsack at fraction ``b``; returns
    why not when this machine cannot compile the step (None when the row ran)."""
    import torch._functorch.config as fconfig

    torch._dynamo.reset()
    try:
        with fconfig.patch(activation_memory_budget=b):
            fwd = torch.compile(model, backend=backend)
            t0 = time.perf_counter()
            r.zero()
            r.step(fwd)
            first = time.perf_counter() - t0
            row("compile knapsack", b, lambda: r.step(fwd),
                note=f"{backend}; first step (compiles) {first:.1f} s; its backward returns "
                     "every parameter gradient before they are added to .grad")
    except Exception as e:   # a missing compiler, an unsupported op: say why, run the rest
        text = " ".join(ln.strip() for ln in str(e).splitlines()[:2])
        return f"{type(e).__name__}: {text}".replace(",", ";")
    finally:
        torch._dynamo.reset()
    return None


def versus(model, inputs, budgets, *, repeats: int = 3, device=None, compile_backend="inductor",
           name: str = "model", peaks: bool = True) -> list[dict]:
    """One row per method (see the module docstring); ``compile_backend=None`` skips compile;
    ``peaks=False`` skips the profiled step of each row on CPU (about a second on small models)."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = model.to(dev)
    inputs = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    r = _Runner(model, inputs, dev)
    r.zero()
    r.step()                                     # warm-up
    r.zero()
    r.step()
    ref = r.grads()
    rows = []

    def row(method, budget, run, **extra):
        r.zero()
        run()                                   # warm-up (compile: compiles)
        grads = r.grads()
        step = r.timed(run, repeats)
        peak = r.peak(run) / 2**20 if peaks or r.cuda else ""
        rows.append({"model": name, "method": method, "budget": budget, "step ms": step * 1e3,
                     "peak MiB": peak, "grad max abs diff": _diff(grads, ref), **extra})

    row("no plan", "", r.step)
    with _per_layer(model):
        row("checkpoint per layer", "", r.step)

    def offload():
        with torch.autograd.graph.save_on_cpu(pin_memory=r.cuda):
            r.step()
    row("save_on_cpu", "", offload, note="" if r.cuda else "on CPU the host copy is the tensor itself")

    graph = trace(model, inputs, device=dev.type, name=name)
    costs = device_costs(graph, dev)
    base = Problem.from_graph(graph, costs)
    regions = layer_regions(graph)
    for b in budgets:
        try:
            pb = base.with_budget(b)
        except BudgetError as e:              # below the step's floor: no plan fits it
            why = str(e).replace(",", "")
            rows += [{"model": name, "method": m, "budget": b, "note": f"not run: {why}"}
                     for m in ("slack apply", "slack policy")]
        else:
            _slack_rows(model, graph, b, pb, regions, r, row)
        if compile_backend:
            why = _compile_row(model, b, compile_backend, r, row)
            if why is not None:
                rows.append({"model": name, "method": "compile knapsack", "budget": b, "note": f"not run: {why}"})
    return rows


def positive():
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            v = None
        if v is None or v < 1:
            raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
        return v
    return parse


def fractions(text):
    try:
        out = [float(b) for b in text.split(",")]
    except ValueError:
        out = None
    if not out or not all(0 < b <= 1 for b in out):    # NaN fails the comparison
        raise argparse.ArgumentTypeError(f"expected fractions in (0, 1] of the keep-all "
                                         f"peak, separated by commas, e.g. 0.5,0.3; got {text!r}")
    return out


def _fmt(v, field=""):
    if v == "" or v is None:
        return ""
    if field == "grad max abs diff":
        return "0 (bitwise)" if v == 0 else f"{v:.2g}"
    if isinstance(v, float):
        return f"{v:.3g}" if v and abs(v) < 0.01 else f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def figure(rows, path, title="CPU"):
    """Measured step time against measured peak, one panel per model, one marker per method
    (rows without both, such as a budget no plan can fit, are left out)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models), 4.6), squeeze=False)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    marks = dict(zip(methods, "os^DvP*X", strict=False))
    colors = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for ax, m in zip(axes[0], models, strict=True):
        budgets: dict = {}      # one label per point: budgets whose rows landed on the same one
        for r in (r for r in rows if r["model"] == m and r.get("peak MiB", "") != ""
                  and r.get("step ms", "") != ""):
            ax.scatter(r["peak MiB"], r["step ms"], marker=marks[r["method"]], s=70,
                       color=colors[r["method"]], label=r["method"])
            if r["budget"] != "":
                budgets.setdefault((r["method"], r["peak MiB"], r["step ms"]), []).append(f"{r['budget']}")
        for (method, peak, step), bs in budgets.items():
            text = ", ".join(bs)
            ax.annotate(text, (peak, step), textcoords="offset points", fontsize=8,
                        xytext=(-6 - 5 * len(text), 4) if method == "slack policy" else (6, 4))
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles, strict=True))
        ax.legend(seen.values(), seen.keys(), fontsize=8)
        ax.set_title(m)
        ax.set_xlabel("measured peak above the step's start (MiB)" + ("; CPU: host copies included"
                                                                     if title == "CPU" else ""))
        ax.set_ylabel("measured step time (ms)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title}: measured step time against measured peak (labels: budget as a fraction of "
                 "the simulated keep-all peak)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("cpu", "gpu"), help="default: gpu when CUDA is present")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=positive())
    ap.add_argument("--seq", type=positive())
    ap.add_argument("--layers", type=positive())
    ap.add_argument("--vocab", type=positive())
    ap.add_argument("--budgets", type=fractions, help="fractions of the simulated keep-all peak "
                    "(default 0.5,0.3; at --size cpu 0.5,0.35: GPT-2's floor there is 0.304)")
    ap.add_argument("--repeats", type=positive(), default=3)
    ap.add_argument("--threads", type=positive(), help="torch intra-op threads (default 1 on CPU)")
    ap.add_argument("--compile-backend", default="inductor", choices=("inductor", "aot_eager_decomp_partition"))
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--out", help="write the rows as CSV")
    ap.add_argument("--figure", help="write the figure (PNG)")
    ap.add_argument("--replot", metavar="CSV", help="draw --figure from a CSV this script wrote; run nothing")
    args = ap.parse_args(argv)
    if args.replot:
        return _replot(ap, args.replot, args.figure)
    cuda = torch.cuda.is_available()
    size = args.size or ("gpu" if cuda else "cpu")
    if size == "gpu" and not cuda:
        print("versus: --size gpu: no CUDA device here; the GPU rows are skipped (run --size cpu)",
              file=sys.stderr)
        return 0
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            ap.error(f"--models: must be among {', '.join(MODELS)}; got {m!r}")
    if size == "cpu" or args.threads:
        torch.set_num_threads(args.threads or 1)
    given = {k: getattr(args, k) for k in ("batch", "seq", "layers", "vocab") if getattr(args, k)}
    budgets = args.budgets or ([0.5, 0.35] if size == "cpu" else [0.5, 0.3])
    backend = None if args.no_compile else args.compile_backend
    rows = []
    for m in models:
        shape = {**(CPU_SHAPE if size == "cpu" else GPU_SHAPE[m]), **given}
        t0 = time.perf_counter()
        model, inputs = build(m, **shape)
        rows += versus(model, inputs, budgets, repeats=args.repeats, compile_backend=backend,
                       name=m, device="cuda" if size == "gpu" else "cpu")
        print(f"{m}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        del model
    lines = [",".join(FIELDS)] + [",".join(_fmt(r.get(f, ""), f) for f in FIELDS) for r in rows]
    print("\n".join(lines))
    if args.out:
        import transformers

        where = (f"{torch.cuda.get_device_name()}" if size == "gpu" else
                 f"{os.cpu_count()}-core machine ({torch.get_num_threads()} intra-op thread(s))")
        shape = ", ".join(f"{k} {v}" for k, v in {**(CPU_SHAPE if size == "cpu" else {}), **given}.items())
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(f"# date: {time.strftime('%Y-%m-%d', time.gmtime())}\n"
                    f"# machine: {where}; PyTorch {torch.__version__}, transformers {transformers.__version__}\n"
                    f"# command: python benchmarks/versus.py {' '.join(argv if argv is not None else sys.argv[1:])}\n"
                    f"# note: {shape or 'full shapes'}; budgets {', '.join(map(str, budgets))} of the simulated "
                    f"keep-all peak; median of {args.repeats} steps\n")
            f.write("\n".join(lines) + "\n")
    if args.figure:
        figure(rows, args.figure, "CPU" if size == "cpu" else torch.cuda.get_device_name())
    return 0


def _replot(ap, csv_path, fig_path):
    import csv

    if not fig_path:
        ap.error("--replot: needs --figure PATH")
    try:
        with open(csv_path, encoding="utf-8") as f:
            lines0 = f.readlines()
            lines = [ln for ln in lines0 if not ln.startswith("#")]
            meta = {k.strip(): v.strip() for k, _, v in (ln[1:].partition(":") for ln in lines0
                                                           if ln.startswith("#"))}
    except OSError as e:
        ap.error(f"--replot: cannot read {csv_path!r} ({e.strerror})")
    rows = list(csv.DictReader(lines))
    if not rows or any(f not in rows[0] for f in ("model", "method", "budget", "step ms", "peak MiB")):
        ap.error(f"--replot: {csv_path!r} is not a CSV of benchmarks/versus.py (columns {', '.join(FIELDS)})")
    for r in rows:
        for f in ("step ms", "peak MiB"):
            r[f] = float(r[f]) if r[f] else ""
    machine = meta.get("machine", "").strip()
    figure(rows, fig_path, "CPU" if "-core " in machine else machine.split(";")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
