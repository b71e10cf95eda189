"""Subcommands ``calibrate``, ``assumptions``, ``sensitivity`` and ``robustness`` (registered
from commands.py).

The logic lives in ``calibration/`` (calibrate, search, sensitivity, robustness) and the figures in
``report/calibration_figures.py``; here only options, tables and files.
"""

from __future__ import annotations

import argparse

from ..core.errors import SlackSwapError
from ..core.paths import prepare_output
from .app import command
from .common import (
    REPRODUCE_PLANNERS,
    _budget_value,
    _check_outputs,
    _df_table,
    _param,
    _problem,
    _problem_args,
    print_table,
)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _bound(text: str) -> tuple[str, tuple[float, float]]:
    from ..core.units import parse_rate, parse_seconds  # lazy: start-up cost of the command line

    name, sep, rng = text.partition("=")
    lo, sep2, hi = rng.partition(":")
    if not sep or not sep2:
        raise argparse.ArgumentTypeError(f"expected NAME=LO:HI (e.g. bandwidth=20GB/s:31.5GB/s), got {text!r}")
    parse = parse_rate if "bandwidth" in name else parse_seconds if name == "latency" else None
    try:
        if parse is None:
            return name, (float(lo), float(hi))   # finite and ordered: checked with calibrate's bounds
        return name, (float(parse(lo, name)), float(parse(hi, name)))
    except SlackSwapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected numbers LO:HI; got {rng!r}") from None


def _write(console, args, df, figure) -> int:
    """``--out`` (the table as CSV) and ``--figure`` (``figure(df, path=...)``) of a command."""
    if args.out:
        df.to_csv(prepare_output(args.out), index=False)
        console.print(f"table written to {args.out}")
    if args.figure:
        figure(df, path=prepare_output(args.figure))
        console.print(f"figure written to {args.figure}")
    return 0


# ---------------------------------------------------------------- calibrate
def _calibrate_args(p):
    p.add_argument("--targets", help="CSV of target rows (default: the published table "
                                     "data/reference/slackswap_paper.csv); columns in docs/calibration.md")
    p.add_argument("--hardware", default="a100-80gb", help="hardware preset to calibrate (default a100-80gb)")
    p.add_argument("--params", type=_names, default=["compute_scale", "bandwidth"],
                   help="comma-separated parameters: hardware (default compute_scale,bandwidth) and workload "
                        "assumptions (mlm_fraction, logits_dtype, loss_workspace, budget_scope, budget_logits, "
                        "budget_param_grads, batch, seq, attention); see docs/calibration.md")
    p.add_argument("--bound", type=_bound, action="append", default=[], metavar="NAME=LO:HI",
                   help="replace a parameter's plausible range (repeatable)")
    p.add_argument("--planner", default="slack", help="planner of rows that name none (default slack)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="KEY=VALUE",
                   help="slack planner parameter (repeatable)")
    p.add_argument("--grid", type=int, default=3, help="start grid points per parameter (default 3)")
    p.add_argument("--profile", type=int, default=5, help="profile scan points per parameter (0 = none; default 5)")
    p.add_argument("--max-evals", type=int, default=40, help="least-squares evaluations (default 40)")
    p.add_argument("--tol", type=float, default=0.002,
                   help="relative residual counted as reproduced (finite, >= 0; default 0.002)")
    p.add_argument("--out", help="write the calibrated hardware TOML here (never over a preset)")
    p.add_argument("--into-presets", action="store_true", help="allow --out inside data/hardware/")
    p.add_argument("--force", action="store_true", help="replace an existing --out file (never a preset)")
    p.add_argument("--csv", help="write the per-row table as CSV")


@command("calibrate", "fit hardware parameters so the simulator reproduces target rows", _calibrate_args)
def _calibrate(args, console) -> int:
    from ..calibration.calibrate import (  # lazy: start-up cost of the command line
        calibrate,
        check_hardware_out,
    )
    from ..calibration.options import check_calibrate  # lazy: start-up cost of the command line

    check_calibrate(args.params, dict(args.bound) or None, args.grid, args.profile, args.max_evals, args.tol)
    _check_outputs(args)
    if args.out:   # refused now (a preset, an existing file), not after the fit
        check_hardware_out(args.out, allow_presets=args.into_presets, overwrite=args.force)
    cal = calibrate(args.targets, args.params, args.hardware, args.planner, dict(args.param),
                    dict(args.bound) or None, args.grid, args.profile, args.max_evals, args.tol)
    console.print(cal.summary(), highlight=False, markup=False)
    print_table(console, _df_table("Parameters", cal.table(), floatfmt=".6g"))
    if cal.workload is not None:
        print_table(console, _df_table("Workload values: the best RMS residual with each value fixed (the rest "
                                       "refitted over the settings tried)", cal.workload.profile, floatfmt=".6g"))
    print_table(console, _df_table("Rows (residual = simulated / target - 1; closest: best residual of any "
                            "setting tried within the bounds)", cal.rows, floatfmt=".6g"))
    if args.csv:
        cal.rows.to_csv(prepare_output(args.csv), index=False)
        console.print(f"rows written to {args.csv}")
    if args.out:
        path = cal.write_hardware(args.out, allow_presets=args.into_presets, overwrite=args.force)
        console.print(f"calibrated hardware written to {path} (load it with --hardware {path})")
    return 0


# ---------------------------------------------------------------- assumptions (the search)
def _assumptions_args(p):
    p.add_argument("--targets", help="CSV of target rows (default: the published table)")
    p.add_argument("--hardware", default="a100-80gb", help="hardware preset (default a100-80gb)")
    p.add_argument("--params", type=_names, default=["compute_scale", "bandwidth"],
                   help="hardware parameters fitted within their plausible ranges (default compute_scale,bandwidth)")
    p.add_argument("--workload", type=_names,
                   default=["mlm_fraction", "logits_dtype", "loss_workspace", "budget_scope", "budget_logits",
                            "budget_param_grads", "batch", "seq", "attention"],
                   help="workload parameters whose values are the assumptions (default: all)")
    p.add_argument("--max-size", type=int, default=2, help="largest number of assumptions in a set (default 2)")
    p.add_argument("--grid", type=int, default=4, help="hardware grid points per parameter (default 4)")
    p.add_argument("--refine", type=int, default=3, help="sets fitted per size when the grid finds none (default 3)")
    p.add_argument("--max-evals", type=int, default=30, help="least-squares evaluations per fitted set (default 30)")
    p.add_argument("--tol", type=float, default=0.002, help="relative residual counted as reproduced (default 0.002)")
    p.add_argument("--csv", help="write the per-size table as CSV")


@command("assumptions", "the smallest set of workload assumptions reproducing the target rows with plausible "
         "hardware", _assumptions_args)
def _assumptions(args, console) -> int:
    import sys

    from ..calibration.calibrate import read_targets  # lazy: start-up cost of the command line
    from ..calibration.options import check_search  # lazy: start-up cost of the command line
    from ..calibration.search import (  # lazy: start-up cost of the command line
        RowEvaluator,
        search_assumptions,
    )
    from ..core import hardware  # lazy: start-up cost of the command line

    check_search(args.params, args.workload, args.max_size, args.grid, args.refine, args.max_evals, args.tol)
    _check_outputs(args)
    hw = hardware.load(args.hardware)
    rev = RowEvaluator(read_targets(args.targets), hw)

    def progress(k, n, combo, worst):
        if sys.stderr.isatty():
            print(f"\rsize {k}: {n} sets judged, {rev.sims} simulations", end="", file=sys.stderr, flush=True)

    res = search_assumptions(rev, args.params, args.workload, None, args.grid, args.max_size, args.refine,
                             args.max_evals, args.tol, progress)
    console.print(res.summary(), highlight=False, markup=False)
    print_table(console, _df_table("Per size: sets judged, the best set on the grid and its largest row residual",
                                   res.sizes, floatfmt=".4f"))
    console.print(f"{res.sims} simulations")
    if args.csv:
        res.sizes.to_csv(prepare_output(args.csv), index=False)
        console.print(f"table written to {args.csv}")
    return 0


# ---------------------------------------------------------------- sensitivity
def _sensitivity_args(p):
    p.add_argument("--models", type=_names, default=["bert-large", "gpt2-xl", "llama-7b"], help="comma-separated")
    p.add_argument("--hardware", default="a100-80gb", help="hardware preset (default a100-80gb)")
    p.add_argument("--budget", type=_budget_value, default=0.5, help="activation budget (default 0.5)")
    p.add_argument("--planner", default="slack", help="planner (default slack)")
    p.add_argument("--compute-scales", type=_floats, default=[0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25],
                   help="compute efficiency scales (comma-separated)")
    p.add_argument("--bandwidths", type=_floats, default=[12.5, 16, 20, 25, 31.5, 40, 50],
                   help="link bandwidths in GB/s (comma-separated)")
    p.add_argument("--no-bound", action="store_true", help="skip the certified ceiling (faster)")
    p.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    p.add_argument("--out", help="write the grid as CSV")
    p.add_argument("--figure", help="write the contour figure (PNG, PDF, SVG)")


@command("sensitivity", "throughput ratio over compute efficiency x link bandwidth", _sensitivity_args)
def _sensitivity(args, console) -> int:
    from ..calibration.options import check_sensitivity  # lazy: start-up cost of the command line
    from ..calibration.sensitivity import (
        sensitivity_grid,  # lazy: start-up cost of the command line
    )
    from ..report.calibration_figures import (
        sensitivity_figure,  # lazy: start-up cost of the command line
    )

    bandwidths = [b * 1e9 for b in args.bandwidths]
    check_sensitivity(args.models, args.compute_scales, bandwidths, not args.no_bound, args.workers)
    _check_outputs(args)
    df = sensitivity_grid(args.models, args.hardware, args.budget, args.compute_scales,
                          bandwidths, args.planner, not args.no_bound, args.workers)
    show = df.assign(bandwidth=df["bandwidth"] / 1e9).rename(columns={"bandwidth": "GB/s"})
    print_table(console, _df_table(f"{args.planner} throughput ratio and certified ceiling at budget {args.budget}", show))
    return _write(console, args, df, sensitivity_figure)


# ---------------------------------------------------------------- robustness
def _robustness_args(p):
    _problem_args(p, model_required=False)
    p.add_argument("--planners", type=_names, help="comma-separated planners (default: the heuristics of "
                                                   "`slackswap reproduce` that are installed)")
    p.add_argument("--sweep", help="a sweep file: every setting and variant of it (e.g. data/sweeps/slack_margin.toml)")
    p.add_argument("--noise", type=_floats, default=[0.0, 0.1, 0.2, 0.3], help="noise levels (default 0,0.1,0.2,0.3)")
    p.add_argument("--samples", type=int, default=50, help="samples per level (default 50; at most --max-samples)")
    p.add_argument("--max-samples", type=int,
                   help="largest --samples accepted (default: calibration.options.MAX_SAMPLES, 10000; "
                        "raise it for a longer run)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--correlation", type=float, default=0.5, help="share of variance common per engine (0.5)")
    p.add_argument("--engines", type=_names, default=["compute", "d2h", "h2d", "latency"],
                   help="engines that get noise (default compute,d2h,h2d,latency)")
    p.add_argument("--out", help="write the table as CSV")
    p.add_argument("--figure", help="write a figure of the throughput ratio under noise (PNG, PDF, SVG)")


ROBUSTNESS_COLUMNS = ["noise", "nominal_ratio", "ratio_mean", "ratio_p5", "mean_slowdown", "p95_slowdown",
                      "spread", "over_budget"]


@command("robustness", "simulate plans under random cost perturbations: slowdown and tail", _robustness_args)
def _robustness(args, console) -> int:
    from .. import planners  # lazy: start-up cost of the command line
    from ..calibration.options import (  # lazy: start-up cost of the command line
        MAX_SAMPLES,
        check_robustness,
    )
    from ..calibration.robustness import (  # lazy: start-up cost of the command line
        robustness_sweep,
        robustness_table,
    )

    kw = dict(noise=args.noise, samples=args.samples, seed=args.seed, correlation=args.correlation,
              engines=args.engines, max_samples=MAX_SAMPLES if args.max_samples is None else args.max_samples)
    check_robustness(**kw)
    if args.sweep:
        given = [f"--{k}" for k in ("model", "planners", "link", "seq", "batch", "attention", "parallel")
                 if getattr(args, k) is not None]
        if given:
            raise SlackSwapError(f"robustness: --sweep: expected no {', '.join(given)} with a sweep file (the file "
                                 f"names its models, planners and overrides); got {given[0]} "
                                 f"{getattr(args, given[0][2:])!r}")
    _check_outputs(args)
    if args.sweep:
        df = robustness_sweep(args.sweep, **kw)
        keys = ["model", "budget", "planner"]
    else:
        if not args.model:
            raise SlackSwapError("robustness: give --model (or --sweep FILE)")
        names = args.planners or [n for n in REPRODUCE_PLANNERS if n in planners.available()]
        df = robustness_table(_problem(args), names, **kw)
        keys = ["planner"]
    print_table(console, _df_table(f"Robustness: {args.samples} samples per level, seed {args.seed}, engines "
                            f"{','.join(args.engines)} (slowdown = step / nominal step; ratio = throughput "
                            "ratio under noise)", df[keys + ROBUSTNESS_COLUMNS]))
    from ..report.calibration_figures import (
        robustness_figure,  # lazy: start-up cost of the command line
    )

    return _write(console, args, df, robustness_figure)
