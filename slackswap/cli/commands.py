"""Command line: ``slackswap models | hardware | graph ...`` (docs/experiments.md).

Each subcommand is one ``@command`` function taking the parsed arguments and a rich ``Console``,
returning an exit code; its options are declared by the ``configure`` function passed to the
decorator. New subcommands (plan, simulate, compare, sweep, reproduce) register the same way.

Every error prints one line ``slackswap: error: ...`` on stderr and exits 2 (``--debug`` adds the
traceback); Ctrl-C prints one line saying what was saved and exits 130; output options are checked
before any work; tables are printed whole (``cli.common``; docs/experiments.md, "One problem from the command line").
"""

from __future__ import annotations

import argparse
import math
import sys

from ..core.errors import SlackSwapError
from ..core.units import format_bytes, format_rate, format_seconds
from .app import PROG, command  # noqa: F401 - PROG: the program name in messages
from .common import (
    REPRODUCE_PLANNERS,
    _budget_value,
    _check_outputs,
    _df_table,
    _max_ops_arg,
    _parallel,
    _parallel_arg,
    _param,
    _problem,
    _problem_args,
    _table,
    _time_limit_value,
    positive_int,
    prepare_output,
    print_table,
)


# ---------------------------------------------------------------- formatting helpers
def format_flops(f: float) -> str:
    """``3.2e12 -> '3.20 TFLOP'`` (decimal prefixes)."""
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(f) >= scale:
            return f"{f / scale:.2f} {unit}"
    return f"{f:.0f} FLOP"


def _count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def _warn(console, lines) -> None:
    """Print capacity warnings (static memory + budget above the GPU's memory) in the output."""
    for line in lines:
        console.print(f"[bold yellow]WARNING:[/] {line}", highlight=False)


@command("models", "list the model presets")
def _models(args, console) -> int:
    from .. import models  # lazy: start-up cost of the command line

    t = _table("Model presets (data/models)", ["name", "layers", "hidden", "heads", "params", "seq", "batch"],
               {"layers", "hidden", "heads", "params", "seq", "batch"})
    for name in models.available():
        s = models.load(name)
        t.add_row(name, str(s.layers), str(s.hidden), str(s.heads), _count(s.param_count()), str(s.seq),
                  str(s.batch))
    print_table(console, t)
    return 0


@command("hardware", "list the hardware presets")
def _hardware(args, console) -> int:
    from ..core import hardware  # lazy: start-up cost of the command line

    cols = ["name", "GPU", "peak bf16", "HBM", "memory", "GPU-GPU", "link", "d2h", "h2d", "latency", "node"]
    t = _table("Hardware presets (data/hardware)", cols, set(cols) - {"name", "GPU", "link", "node"})
    for name in hardware.available():
        hw = hardware.load(name)
        g, lk, nd = hw.gpu, hw.link, hw.node
        t.add_row(name, g.name, f"{g.peak('bf16') / 1e12:.0f} TFLOP/s", f"{g.hbm_bytes_per_s / 1e12:.2f} TB/s",
                  format_bytes(g.memory_bytes), format_rate(g.p2p_bytes_per_s) if g.p2p_bytes_per_s else "-",
                  lk.name, format_rate(lk.d2h_bytes_per_s), format_rate(lk.h2d_bytes_per_s),
                  format_seconds(lk.latency_s),
                  "-" if nd is None else f"{nd.gpus_per_node} GPUs, {nd.gpus_per_switch} per switch")
    print_table(console, t)
    console.print(f"link presets: {', '.join(hardware.available_links())}")
    return 0


def _planners_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="a planner: list its parameters (default: list the planners)")


@command("planners", "list the planners, or one planner's parameters (`slackswap planners milp`)", _planners_args)
def _planners(args, console) -> int:
    from .. import planners  # lazy: start-up cost of the command line

    if args.name is None:
        for name in planners.available():
            console.print(f"{name}: {', '.join(planners.param_names(name)) or '(no parameters)'}",
                          highlight=False, soft_wrap=True)
        console.print("`slackswap planners NAME` lists a planner's parameters; `slackswap plan --planner NAME "
                      "--param KEY=VALUE` sets one.", highlight=False, soft_wrap=True)
        return 0
    console.print(planners.params_text(args.name), highlight=False, soft_wrap=True, markup=False)
    return 0


def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a model preset (see `slackswap models`) or an HF config.json path")
    p.add_argument("--seq", type=positive_int, help="sequence length (default: the preset's)")
    p.add_argument("--batch", type=positive_int, help="micro-batch size (default: the preset's)")
    p.add_argument("--attention", choices=("flash", "eager"), help="attention implementation")
    p.add_argument("--implementation", choices=("fused", "hf"),
                   help="what the backward keeps: fused kernels or HuggingFace transformers (docs/models.md)")
    p.add_argument("--hardware", metavar="NAME", help="add analytical times on this hardware preset "
                                                      "(its GPU memory is checked; default a100-80gb)")
    _parallel_arg(p)
    _max_ops_arg(p)


@command("graph", "per-layer summary of a model's graph", _graph_args)
def _graph(args, console) -> int:
    from .. import models  # lazy: start-up cost of the command line
    from ..core import costs, hardware  # lazy: start-up cost of the command line

    overrides = {k: getattr(args, k) for k in ("seq", "batch", "attention", "implementation") if getattr(args, k) is not None}
    g = models.build(args.model, max_ops=args.max_ops, parallel=_parallel(args), **overrides)
    cm = costs.analytical(g, hardware.load(args.hardware)) if args.hardware else None
    saved = {t.id for t in g.planning_tensors()}
    rows: dict[str, list] = {}
    seen_layer = False
    for op in g.ops:
        if op.layer is not None:
            seen_layer = True
        key = str(op.layer) if op.layer is not None else ("head" if seen_layer else "embedding")
        r = rows.setdefault(key, [0, 0.0, 0.0, 0, 0.0])
        r[0] += 1
        r[1] += op.fwd_flops
        r[2] += op.bwd_flops
        r[3] += sum(g.tensors[t].bytes for t in op.outputs if t in saved)
        if cm is not None:
            r[4] += cm.fwd_s[op.id] + cm.bwd_s[op.id]
    cols = ["layer", "ops", "fwd FLOPs", "bwd FLOPs", "saved"] + (["fwd+bwd time"] if cm else [])
    t = _table(f"{g.name}: seq {g.spec.seq}, batch {g.spec.batch}, {g.spec.attention} attention, "
               f"{g.spec.implementation} implementation"
               if g.spec is not None else g.name, cols, set(cols) - {"layer"})
    tot = [0, 0.0, 0.0, 0, 0.0]
    for key, r in rows.items():
        tot = [a + b for a, b in zip(tot, r, strict=True)]
        t.add_row(key, *_graph_cells(r, cm))
    t.add_section()
    t.add_row("total", *_graph_cells(tot, cm), style="bold")
    print_table(console, t)
    console.print(f"static (weights + grads + optimizer): {format_bytes(g.static_bytes)}; "
                  f"saved activations (keep-all): {format_bytes(g.saved_bytes())}; "
                  f"{len(g.ops)} ops, {len(g.tensors)} tensors")
    if cm is not None:
        console.print(f"ideal step on {args.hardware}: {format_seconds(cm.ideal_step_s)} "
                      f"(optimizer {format_seconds(cm.optimizer_s)})")
    from ..timeline.problem import capacity_warnings  # lazy: start-up cost of the command line

    _warn(console, capacity_warnings(g.static_bytes, g.saved_bytes(), hardware.load(args.hardware or "a100-80gb"),
                                     "keep-all activations"))
    return 0


def _graph_cells(r, cm) -> list[str]:
    cells = [str(r[0]), format_flops(r[1]), format_flops(r[2]), format_bytes(r[3])]
    return cells + ([format_seconds(r[4])] if cm is not None else [])


# ---------------------------------------------------------------- planning and experiments
# (plan, simulate, compare, sweep, reproduce; the logic lives in experiments/ and report/)
def _show_and_save(args, console, problem, plan) -> int:
    from ..report import plan_summary  # lazy: start-up cost of the command line
    from ..timeline import simulate  # lazy: start-up cost of the command line

    r = simulate(problem, plan, detail=True)
    console.print(str(problem))
    for line in plan_summary(problem, plan, r):
        console.print(line, highlight=False)
    if getattr(args, "out", None):
        plan.save(prepare_output(args.out))
        console.print(f"plan written to {args.out}")
    if args.trace:
        r.to_chrome_trace(prepare_output(args.trace))
        console.print(f"chrome trace written to {args.trace} (open in ui.perfetto.dev)")
    if args.figure:
        from ..report import timeline_figure  # lazy: start-up cost of the command line

        timeline_figure(r, problem, path=prepare_output(args.figure), planner=plan.planner)
        console.print(f"timeline figure written to {args.figure}")
    return 0


def _regions_args(p):
    p.add_argument("--regions", choices=("layers",),
                   help="judge and plan as selective activation checkpointing runs the plan, one "
                        "checkpointed region per layer (docs/regions.md, \"Planning for checkpointed regions\")")
    p.add_argument("--region-swap", choices=("save", "recompute"),
                   help="with --regions: what a SWAP inside a region becomes (default save)")


def _with_regions(args, problem):
    """``problem`` under ``--regions`` / ``--region-swap`` (checked: the swap only with regions)."""
    if args.regions is None:
        if args.region_swap is not None:
            raise SlackSwapError(f"--region-swap: only with --regions layers; got --region-swap {args.region_swap} "
                                 f"without --regions")
        return problem
    return problem.with_regions(args.regions, args.region_swap or "save")


def _plan_args(p):
    _problem_args(p)
    _regions_args(p)
    p.add_argument("--planner", default="slack", help="planner name (default slack)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE",
                   help="planner parameter (repeatable; values parsed as JSON when possible); "
                        "`slackswap planners NAME` lists a planner's parameters")
    p.add_argument("--out", help="write the plan as JSON")
    p.add_argument("--trace", help="write the simulated timeline as a Chrome trace JSON")
    p.add_argument("--figure", help="write a timeline figure (PNG, PDF, SVG)")


@command("plan", "plan one problem and show the simulated result", _plan_args)
def _plan(args, console) -> int:
    from .. import planners  # lazy: start-up cost of the command line

    _check_outputs(args)
    problem = _with_regions(args, _problem(args))
    return _show_and_save(args, console, problem, planners.get(args.planner, **dict(args.param)).plan(problem))


def _simulate_args(p):
    p.add_argument("--plan", required=True, help="a plan JSON written by `slackswap plan --out`")
    _problem_args(p)
    _regions_args(p)
    p.add_argument("--trace", help="write the simulated timeline as a Chrome trace JSON")
    p.add_argument("--figure", help="write a timeline figure (PNG, PDF, SVG)")


@command("simulate", "re-simulate a saved plan on a problem", _simulate_args)
def _simulate(args, console) -> int:
    from ..core.plan import Plan, validate  # lazy: start-up cost of the command line

    _check_outputs(args)
    plan = Plan.load(args.plan)
    problem = _with_regions(args, _problem(args))
    validate(problem, plan)
    return _show_and_save(args, console, problem, plan)


def _names(text: str, option: str) -> list[str]:
    """The names of a comma-separated option, each given once (a name given twice would run the
    same runs twice): ``"--planners: expected each name once; got 'slack' twice"``."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for j, n in enumerate(names):
        if n in names[:j]:
            raise SlackSwapError(f"{option}: expected each name once; got {n!r} twice")
    return names


def _compare_args(p):
    _problem_args(p)
    _regions_args(p)
    p.add_argument("--planners", default="slack,capuchin,dp-checkpoint,chen-greedy,checkpoint-layers,swap-all",
                   help="comma-separated planner names")


@command("compare", "run several planners on one problem and tabulate", _compare_args)
def _compare(args, console) -> int:
    from .. import experiments, planners  # lazy: start-up cost of the command line

    names = _names(args.planners, "--planners")
    if args.node is not None:
        raise SlackSwapError("--node: not taken by compare (its runs load the hardware preset by name); "
                             "use plan or simulate with --node, or Hardware.with_node in Python")
    for n in names:
        planners.get(n)  # unknown names: one error line
    problem = _with_regions(args, _problem(args))  # validates model, hardware, parallel setting and budget up front
    overrides = {k: getattr(args, k) for k in ("seq", "batch", "attention", "implementation")
                 if getattr(args, k) is not None}
    par = _parallel(args)   # a preset name or .toml path as given (the rows name it), else the keys
    par = par if par is None else args.parallel if "=" not in args.parallel else par.as_dict()
    df = experiments.sweep(args.model, args.hardware, args.budget, names, overrides=overrides, link=args.link,
                           workers=1, progress=False, parallel=par, regions=args.regions,
                           region_swap=problem.region_swap)
    cols = {"label": "planner", "status": "status", "throughput_ratio": "ratio", "step_time_s": "step",
            "peak_bytes": "peak", "stall_s": "stall", "recompute_s": "recompute", "swapped_bytes": "swapped",
            "n_keep": "keep", "n_swap": "swap", "n_recompute": "recomp.", "gap_to_bound": "gap to bound",
            "solve_s": "solve"}
    from ..report import humanize  # lazy: start-up cost of the command line

    where = f", {problem.regions_text}" if problem.regions is not None else ""
    print_table(console, _df_table(f"{args.model} on {args.hardware}, budget {args.budget} "
                            f"({df['budget_bytes'].iloc[0] / 2**30:.2f} GiB){where}",
                            humanize(df[list(cols)]).rename(columns=cols)))
    _warn(console, dict.fromkeys(w for w in df["warning"] if w))
    return 0


def _sweep_args(p):
    p.add_argument("config", help="a sweep file (data/sweeps/*.toml)")
    p.add_argument("--out", help="write every run as CSV")
    p.add_argument("--workers", type=positive_int, help="processes (default: the file's, else 2)")
    p.add_argument("--cache", help="cache directory: finished runs are reused by a resumed sweep "
                                   "(after Ctrl-C, run the same command again)")
    from ..experiments import MAX_RUNS  # lazy: start-up cost of the command line

    p.add_argument("--max-runs", type=positive_int, default=MAX_RUNS,
                   help=f"refuse a sweep of more runs than this before it starts (default {MAX_RUNS:,})")


def _load_sweep_checked(args) -> None:
    """Read the sweep file and count its runs now: any error names the file, before any run."""
    from .. import experiments, planners  # lazy: start-up cost of the command line

    try:
        cfg = experiments.load_sweep(args.config, max_runs=args.max_runs)
        experiments.grid(cfg["models"], cfg["hardware"], cfg["budgets"], cfg["planners"], overrides=cfg["overrides"],
                         planner_params=cfg["planner_params"], link=cfg["link"], max_runs=args.max_runs,
                         parallel=cfg["parallel"], regions=cfg["regions"], region_swap=cfg["region_swap"])
        for _, name, params in experiments.variants(cfg["planners"], cfg["planner_params"]):
            planners.get(name, **params)   # unknown names and bad parameters: before any run
    except SlackSwapError:
        raise
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError, IndexError) as e:
        raise SlackSwapError(f"sweep file {args.config}: {type(e).__name__}: {' '.join(str(e).split())}") from None


def _sweep_interrupted(args, state) -> str:
    done = (f"{state['done'] - state['errors']} of {state['total']} runs" if state["total"]
            else "the runs finished so far")
    if args.cache:
        return (f"{done} are saved in the cache {args.cache}; run the same command to resume "
                f"(finished runs are read from the cache)")
    return f"{done} were finished but not saved (no --cache); give --cache DIR to make a sweep resumable"


@command("sweep", "run a sweep file and print its ablation table", _sweep_args)
def _sweep(args, console) -> int:
    from .. import experiments, report  # lazy: start-up cost of the command line

    _check_outputs(args)
    _load_sweep_checked(args)
    state = {"done": 0, "total": None, "errors": 0}

    def on_row(row, done, total):   # ERROR rows are not cached
        state.update(done=done, total=total, errors=state["errors"] + (row["status"] == "ERROR"))

    args.on_interrupt = lambda: _sweep_interrupted(args, state)
    kw = {"workers": args.workers} if args.workers else {}
    df = experiments.run_sweep_file(args.config, out=args.out, cache=args.cache, progress=sys.stderr.isatty(),
                                    on_row=on_row, max_runs=args.max_runs, **kw)
    if (df["planner"] == "milp").any():   # its plan is an incumbent, not an optimum: name it so
        print_table(console, _df_table(f"{args.config}: throughput ratio, the milp planner's plan and certified ceiling",
                                report.optimality_table(df)))
    else:
        print_table(console, _df_table(f"{args.config}: throughput ratio by {df.attrs['by']}",
                                report.ablation_table(df, by=df.attrs["by"])))
    errors = int((df["status"] == "ERROR").sum())
    console.print(f"{len(df)} runs ({df.attrs['cache_hits']} from cache), {errors} errors"
                  + (f"; rows written to {args.out}" if args.out else ""))
    _warn(console, report.capacity_notes(df))
    return 0


def _reproduce_args(p):
    p.add_argument("--models", default="bert-large,gpt2-xl,llama-7b", help="comma-separated models")
    p.add_argument("--hardware", default="a100-80gb", help="hardware preset (default a100-80gb)")
    p.add_argument("--budget", type=_budget_value, default=0.5, help="activation budget (default 0.5)")
    p.add_argument("--planners", help=f"comma-separated heuristics (default: those of {','.join(REPRODUCE_PLANNERS)} "
                                      "that are installed)")
    p.add_argument("--exact", action="store_true", help="add the milp planner: exact on small problems, a proven gap on full-size ones "
                        "(a fixed number of solver nodes: the same result on any machine)")
    p.add_argument("--time-limit", type=_time_limit_value, default=120.0, help="MILP time limit per problem, seconds")
    p.add_argument("--workers", type=positive_int, default=2, help="processes (default 2)")
    p.add_argument("--out", help="directory for runs.csv, published.csv/.md, gaps.csv/.md")
    p.add_argument("--assumptions", help="a named assumption set (data/assumptions/<name>.toml) or a TOML file: "
                                         "the published table also under it, with an ablation over its "
                                         "assumptions (docs/calibration.md, \"Assumption files\")")
    p.add_argument("--graphs", choices=("analytical", "traced"), default="analytical",
                   help="analytical graphs (default) or graphs traced from the HF models "
                        "(hf:<model>, needs the torch extra; docs/fidelity.md)")


@command("reproduce", "the published table (arXiv 2610.13003) beside ours, and gaps to a bound",
         _reproduce_args)
def _reproduce(args, console) -> int:
    from .. import experiments, models, planners, report  # lazy: start-up cost of the command line
    from ..core import hardware  # lazy: start-up cost of the command line
    from ..core.paths import user_path  # lazy: start-up cost of the command line

    _check_outputs(args, out_dir=True)
    names = _names(args.models, "--models")
    for n in names:
        models.load(n)
    runs = [f"hf:{n}" for n in names] if args.graphs == "traced" else names
    hardware.load(args.hardware)
    aset = None
    if args.assumptions:
        from ..calibration import assumptions  # lazy: start-up cost of the command line

        if args.graphs == "traced":
            raise SlackSwapError("reproduce: --assumptions: expected analytical graphs (the assumptions are "
                                 "model-spec fields); got --graphs traced")
        aset = assumptions.load(args.assumptions)   # a bad file: refused before any run
    if args.planners:
        heur = _names(args.planners, "--planners")
        for n in heur:
            planners.get(n)
    else:
        heur = [n for n in REPRODUCE_PLANNERS if n in planners.available()]
        missing = [n for n in REPRODUCE_PLANNERS if n not in heur]
        if missing:
            console.print(f"(planners not installed, left out: {', '.join(missing)})")

    def line(row, done, total):
        what = (f"ratio {row['throughput_ratio']:.4f}" if row["fits"] else row["status"])
        print(f"[{done}/{total}] {row['model']} {row['label']}: {what} ({row['solve_s']:.2f} s)",
              file=sys.stderr, flush=True)

    df = experiments.sweep(runs, args.hardware, args.budget, heur + (["milp"] if args.exact else []),
                           planner_params={"milp": {"time_limit_s": args.time_limit}} if args.exact else None,
                           workers=args.workers, progress=False, on_row=line)
    df["model"] = df["model"].str.removeprefix("hf:")  # traced rows sit beside the published ones
    try:
        pub = report.published_table(df)
    except ValueError as e:  # the reference file is missing: still show ours
        pub = None
        console.print(f"(no published table: {e})")
    if pub is not None:
        print_table(console, _df_table("Published (arXiv 2610.13003) vs ours: throughput ratio of slack",
                                pub.drop(columns="source")))
        console.print(f"paper: {pub['source'].iloc[0]}" if len(pub) else "(no published setting in this run)")
    print_table(console, _df_table(f"Throughput ratio at budget {args.budget} on {args.hardware}",
                            report.ablation_table(df, by="model")))
    gaps = report.ablation_table(df[df["planner"] != "milp"], by="model", value="gap_to_bound")
    how = next((h for h in df["bound_how"] if h), "none")
    print_table(console, _df_table(f"Gap to the lower bound (step / bound - 1; bound: {how})", gaps))
    if args.exact:
        print_table(console, _df_table("Gap to the MILP's plan (step / MILP step - 1)",
                                report.ablation_table(df[df["planner"] != "milp"], by="model", value="gap_to_milp")))
        milp = df[df["planner"] == "milp"].copy()
        milp["proven_gap"] = 1 - milp["planner_bound_s"] / milp["step_time_s"]
        print_table(console, _df_table("MILP: status, its plan's step and certified bound, proven gap "
                                "(docs/milp.md, \"Full-size models: the aggregated relaxation and proven gaps\" above max_exact_tensors)",
                                milp[["model", "status", "step_time_s", "planner_bound_s", "proven_gap"]],
                                floatfmt=".6g"))
    _warn(console, report.capacity_notes(df))
    extra = _assumption_tables(console, aset, names, args.hardware) if aset is not None else {}
    if args.out:
        out = user_path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        report.to_csv(df, out / "runs.csv")
        for name, t in (("published", pub), ("gaps", report.gap_table(df)), *extra.items()):
            if t is not None:
                report.to_csv(t, out / f"{name}.csv")
                report.to_markdown(t, path=out / f"{name}.md")
        console.print(f"results written to {out}/")
    return 0


def _assumption_tables(console, aset, names, hardware_name) -> dict:
    """The published rows with our defaults and under ``aset``, and the ablation over its
    assumptions (``calibration.assumptions``); returns the tables by output file name."""
    import warnings

    from ..calibration import assumptions  # lazy: start-up cost of the command line
    from ..calibration.search import RowEvaluator  # lazy: start-up cost of the command line
    from ..core import hardware  # lazy: start-up cost of the command line
    from ..core.errors import CapacityWarning  # lazy: start-up cost of the command line

    rows = [t for t in assumptions.read_targets(None) if t.model in names]
    if not rows:
        console.print(f"(--assumptions: no published row for {', '.join(names)})")
        return {}
    with warnings.catch_warnings():   # the capacity notes of these models were printed above
        warnings.simplefilter("ignore", CapacityWarning)
        rev = RowEvaluator(rows, hardware.load(hardware_name))
        tab = assumptions.table(aset, rev=rev)
        abl = assumptions.ablation(aset, rev=rev)
    print_table(console, _df_table(f"Published vs ours: with our defaults and with the assumptions of "
                                   f"{aset.name!r} (slack; within: 0.2% of the paper)", tab, floatfmt=".4f"))
    for it in aset.items:
        console.print(f"  {it}: {it.source}", highlight=False, markup=False)
    for line in assumptions.outside_plausible(aset, hardware_name):
        console.print(f"NOTE: {line}", highlight=False, markup=False)
    print_table(console, _df_table("Ablation, one assumption at a time: alone_moves = alone - defaults (the "
                                   "assumption added to our defaults); its_share = all - without (what the set "
                                   "loses without it)", abl, floatfmt=".4f"))
    return {"assumptions": tab, "ablation": abl}


def _whole_number(text: str) -> int:
    """An integer, also written as ``1e12``; its range is the API's to check."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v != int(v):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(v)


def _measure_args(p):
    p.add_argument("model", help="a preset of slackswap.torch.hf_models (gpt2-124m, ...) or module:function returning (model, inputs)")
    for a in ("batch", "seq", "layers", "vocab", "repeats"):   # ranges: checked by the API, same line
        p.add_argument(f"--{a}", type=_whole_number, default=3 if a == "repeats" else None,
                       help="timed steps per plan (default 3)" if a == "repeats" else f"override the preset's {a}")
    for a, h in (("--planner", "planner name (default slack)"), ("--plan", "run this plan JSON instead of planning"),
                 ("--profile-out", "write the measured profile (JSON)"), ("--figure", "write the figure"), ("--csv", "write the table")):
        p.add_argument(a, default="slack" if a == "--planner" else None, help=h)
    p.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE", help="planner parameter")
    p.add_argument("--budget", type=_budget_value, default=0.5, help="activation budget (default 0.5)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when present, else cpu")
    p.add_argument("--no-overhead", action="store_true", help="simulate with the traced op times alone "
                   "(default: measure the fixed cost per op and charge it on every op; docs/profile.md)")


@command("measure", "run keep-all, recompute-all and a plan of a real PyTorch model: measured vs simulated", _measure_args)
def _measure(args, console) -> int:
    import torch  # an optional dependency

    from ..core.paths import prepare_output  # lazy: start-up cost of the command line
    from ..core.plan import Plan as _Plan  # lazy: start-up cost of the command line
    from ..torch._check import check_device  # torch: an optional dependency
    from ..torch.measure_step import (  # torch: an optional dependency
        check_repeats,
        load_model,
        measure,
    )

    _check_outputs(args)
    check_repeats(args.repeats)
    device = check_device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"), "measure")
    model, inputs = load_model(args.model, args.batch, args.seq, args.layers, args.vocab, device=device)
    plan = _Plan.load(args.plan) if args.plan else None
    if plan is not None:
        plan = _Plan(plan.decisions, plan.issue_points, plan.d2h_order, plan.planner, plan.params,
                     plan.info, None)   # checked against the traced graph, not a zoo problem
    r = measure(model, inputs, planner=args.planner, planner_params=dict(args.param), plan=plan,
                budget=args.budget, repeats=args.repeats, device=args.device, name=args.model,
                profile_path=args.profile_out, overhead=not args.no_overhead)
    df = r.table()
    print_table(console, _df_table(f"{r.model} on {r.device}: fastest of {args.repeats} steps, budget "
                            f"{r.budget_bytes / 2**20:.2f} MiB", df, floatfmt=".3f"))
    console.print(f"peak: {r.peak_kind}" + ("" if r.device.startswith("cuda") else
                  " (CPU: the executor's count of resident saved tensors, against the same count on "
                  "the simulator's schedule; the budget is judged on the simulator's full peak)"))
    if r.overhead is not None:
        console.print(f"per-op overhead (charged on every op): forward {r.overhead.fwd_s * 1e6:.1f} us, "
                      f"backward {r.overhead.bwd_s * 1e6:.1f} us, of which the executor's hooks "
                      f"{r.overhead.hooks_fwd_s * 1e6:.1f} us, {r.overhead.hooks_bwd_s * 1e6:.1f} us")
    for row in r.rows:
        if not row.fits:
            console.print(f"{row.plan}: exceeds the budget (simulated peak over "
                          f"{row.budget_bytes / 2**20:.2f} MiB); it ran anyway")
    if args.profile_out:
        console.print(f"profile written to {args.profile_out}")
    if args.figure:
        r.figure(prepare_output(args.figure))
        console.print(f"figure written to {args.figure}")
    if args.csv:
        df.to_csv(prepare_output(args.csv), index=False)
        console.print(f"table written to {args.csv}")
    return 0

