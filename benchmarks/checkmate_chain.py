"""Checkmate's chain benchmark: the milp planner, recompute only, on unit chains (plain script).

    python benchmarks/checkmate_chain.py [--n 16 32 48 64 96] [--fractions 0.25 0.1] [--csv PATH]
    python benchmarks/checkmate_chain.py --before 60 --csv benchmarks/results/checkmate-chain-before.csv

For every ``synthetic.chain(n)`` with ``CostModel.unit`` (1-byte activations, 1 s per op forward
and backward) and budget ``fraction`` of the keep-all peak: ``milp(allow_swap=False)`` with its
defaults (on a simple chain without SWAP: the checkpointing recursion, docs/milp.md, "Simple
chains, recompute only"): status, plan kind, re-runs, step time, certified bound, proven gap and
wall time, next to the anchor: the times in which Checkmate's MILP, run with HiGHS and a 300 s
limit, proves the optimum (the times this benchmark's goal was set against; not re-measured
here). A budget below ``Problem.min_feasible_bytes`` has no row of results: no plan can fit it.

With ``--before SECONDS``: the same instances with ``chain_recursion=False`` (the planner's paths
without the recursion: the exact MILP up to 40 planning tensors, the aggregated relaxation above)
under that time limit, one thread, for comparison.

With ``--against-dp N ...``: per unit chain of ``N`` ops, every budget from the floor to keep-all,
the budgets at which ``dp-checkpoint``'s re-runs differ from the recursion's optimum (printed).

With ``--against-brute SEEDS``: random chains of 3-6 ops (activations of 1-4 bytes, step
inputs of 0-2 bytes, some workspaces, forward costs of 1-4 s; seeds ``0 .. SEEDS-1``), every
budget from the floor to keep-all: the recursion's optimum against the brute force over every
KEEP/RECOMPUTE plan with any hold points (``synthetic.chain_multilevel_optimum``), and its plan
simulated. With ``--no-swap-bound N``: the first ``N`` problems of ``random_suite(N, seed=3)``
whose plans without SWAP can be enumerated (``synthetic.multilevel_optimum``, 3,000 plans at
most): the capacity bound of the problem without swappable tensors against their optimum and
against the bound over every plan.

With ``--presets MODEL ...``: ``milp(allow_swap=False, time_limit_s=--limit)`` on model presets
(A100 80GB) at ``--fractions``: status, step, bound, proven gap, wall (the presets are not simple
chains: the planner's other paths).

``--csv PATH`` writes the table with its ``# date / machine / command`` header
(scripts/update_benchmarks_readme.py); without it the table is printed as markdown.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import sys
import time

from slackswap import CostModel, Problem, planners, simulate
from slackswap.core.errors import BudgetError, SlackSwapError
from slackswap.experiments.synthetic import chain

#: seconds in which Checkmate's MILP (HiGHS, 300 s limit) proves the optimum on its chain of n
#: unit layers, by budget fraction; None: not proven within the limit
ANCHOR_S = {0.25: {16: 4.9, 32: 12.8, 48: 32.8, 64: 57.0}, 0.1: {16: 115.0}}


def anchor(n: int, fraction: float) -> str:
    runs = ANCHOR_S.get(fraction)
    if runs is None or n > 64:
        return "-"
    s = runs.get(n)
    return f"{s:g} s" if s is not None else "not proven in 300 s"


def run(n: int, fraction: float, before: float | None):
    g = chain(n)
    base = Problem.from_graph(g, CostModel.unit(g))
    head = [str(n), f"{fraction:g}"]
    try:
        p = base.with_budget(fraction)
    except BudgetError:
        return head + [f"{fraction * base.keep_all_peak:g} B: below the floor of "
                       f"{base.min_feasible_bytes} B, no plan fits"] + ["-"] * 7 + [anchor(n, fraction)]
    params = {"allow_swap": False}
    if before is not None:
        params.update(chain_recursion=False, time_limit_s=before, threads=1)
    t0 = time.perf_counter()
    plan = planners.get("milp", **params).plan(p)
    wall = time.perf_counter() - t0
    info = plan.info
    r = simulate(p, plan, detail=False)
    kind = "multi-level" if plan.hold_points else "single-level"
    fits = r.fits
    return head + [
        f"{p.budget_bytes:g} B",
        info.status.value,
        kind if fits else "-",
        f"{r.recompute_s:g}" if fits else "-",
        f"{r.step_time_s:g}" if fits else "-",
        f"{info.lower_bound:g}" if info.lower_bound is not None else "-",
        f"{info.gap:.2%}" if info.gap is not None else "-",
        f"{wall:.2f}",
        anchor(n, fraction),
    ]


HEADER = ["n", "budget (fraction of peak)", "budget", "status", "plan", "re-runs (s)", "step (s)",
          "certified bound (s)", "proven gap", "milp wall (s)", "Checkmate MILP proves it in"]


def against_dp(n: int) -> str:
    from slackswap.planners import _revolve

    g = chain(n)
    base = Problem.from_graph(g, CostModel.unit(g))
    xs = _revolve.simple_chain(base)
    top = base.keep_all_peak
    budgets = list(range(top, base.min_feasible_bytes - 1, -1))
    sols = _revolve.solve(_revolve.problem_needs(base.with_budget(top), xs), fewer=[top - b for b in budgets])
    differ = []
    for b, sol in zip(budgets, sols, strict=True):
        p = base.with_budget(b)
        r = simulate(p, planners.get("dp-checkpoint").plan(p), detail=False)
        if (r.recompute_s if r.fits else float("inf")) != sol.reruns:
            differ.append(f"{b} B: {r.recompute_s if r.fits else 'none fits'} against {sol.reruns:g}")
    return (f"chain({n}): {len(budgets)} budgets ({base.min_feasible_bytes}-{top} B), dp-checkpoint's re-runs "
            f"differ from the optimum at {len(differ)}" + (": " + "; ".join(differ) if differ else ""))


def against_brute(seeds: int) -> str:
    import math
    from dataclasses import replace

    import numpy as np

    from slackswap.core.graph import Graph
    from slackswap.core.plan import Plan
    from slackswap.experiments.synthetic import chain_multilevel_optimum
    from slackswap.planners import _revolve

    budgets = equal = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 7))
        g0 = chain(n, sizes=[int(v) for v in rng.integers(1, 5, n)], input_bytes=int(rng.integers(0, 3)))
        ws = [int(rng.integers(0, 3)) * int(rng.random() < 0.4) for _ in range(n)]
        g = Graph(g0.name, tuple(replace(op, workspace_bytes=w) for op, w in zip(g0.ops, ws, strict=True)),
                  g0.tensors)
        c = CostModel.unit(g)
        base = Problem.from_graph(g, replace(c, fwd_s=tuple(float(v) for v in rng.integers(1, 5, n))))
        xs = _revolve.simple_chain(base)
        for b in range(base.min_feasible_bytes, base.keep_all_peak + 1):
            p = base.with_budget(b)
            sol = _revolve.solve(_revolve.problem_needs(p, xs))
            ok = sol.reruns == chain_multilevel_optimum(p)
            if ok and math.isfinite(sol.reruns):
                dec, hold = _revolve.chain_plan(p, xs, sol)
                r = simulate(p, Plan(dec, hold_points=hold), detail=False)
                ok = r.fits and abs(r.recompute_s - sol.reruns) <= 1e-9 * max(1.0, sol.reruns)
            budgets += 1
            equal += ok
    return f"{seeds} random chains, {budgets} budgets: the recursion equals the brute-force optimum at {equal}"


def no_swap_bound(count: int) -> str:
    import math

    from slackswap import bounds
    from slackswap.experiments.synthetic import multilevel_optimum, random_suite
    from slackswap.planners.milp.chain import without_swaps

    checked = below = stronger = 0
    for inst in random_suite(count, seed=3):
        q = without_swaps(inst.problem)
        best, _ = multilevel_optimum(q, max_plans=3000)
        if best is None:
            continue
        checked += 1
        cb = bounds.capacity_bound(q)
        below += (not math.isfinite(best)) or cb <= best * (1 + 1e-9)
        stronger += cb > bounds.capacity_bound(inst.problem) * (1 + 1e-9)
    return (f"random_suite({count}, seed=3): {checked} problems enumerated; the no-swap capacity bound is at "
            f"most their optimum without SWAP on {below}, above the bound over every plan on {stronger}")


PRESET_HEADER = ["model", "budget", "status", "step (ms)", "certified bound (ms)", "proven gap", "wall (s)"]


def preset_row(model: str, fraction: float, limit: float) -> list[str]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # llama-7b's static memory warning
        try:
            p = Problem.build(model, "a100-80gb", fraction)
        except BudgetError as e:
            return [model, f"{fraction:g}", f"below the floor ({e})"] + ["-"] * 4
    t0 = time.perf_counter()
    plan = planners.get("milp", allow_swap=False, time_limit_s=limit).plan(p)
    wall = time.perf_counter() - t0
    i = plan.info
    return [model, f"{fraction:g}", i.status.value, f"{i.objective * 1e3:.3f}" if i.objective else "-",
            f"{i.lower_bound * 1e3:.3f}" if i.lower_bound else "-",
            f"{i.gap:.4%}" if i.gap is not None else "-", f"{wall:.1f}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[16, 32, 48, 64, 96], help="chain lengths")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.1],
                    help="budgets as fractions of the keep-all peak, in (0, 1]")
    ap.add_argument("--before", type=float, default=None,
                    help="seconds: run the planner without the chain recursion under this limit instead")
    ap.add_argument("--csv", default=None, help="write the table here, with the date/machine/command header")
    ap.add_argument("--machine", default="2-core development machine", help="--csv: the machine line")
    ap.add_argument("--against-dp", type=int, nargs="+", default=None, metavar="N",
                    help="unit chain lengths: budgets where dp-checkpoint differs from the optimum")
    ap.add_argument("--against-brute", type=int, default=None, metavar="SEEDS",
                    help="random chains: the recursion against brute force, seeds 0..SEEDS-1")
    ap.add_argument("--no-swap-bound", type=int, default=None, metavar="N",
                    help="random_suite(N, seed=3): the no-swap capacity bound against enumeration")
    ap.add_argument("--presets", nargs="+", default=None, metavar="MODEL",
                    help="model presets instead of chains (milp, no SWAP, under --limit)")
    ap.add_argument("--limit", type=float, default=60.0, help="--presets: seconds per plan (default 60)")
    a = ap.parse_args(argv)
    for flag, value, fn in (("--against-brute", a.against_brute, against_brute),
                            ("--no-swap-bound", a.no_swap_bound, no_swap_bound)):
        if value is not None:
            if value < 1:
                ap.error(f"{flag}: a count >= 1; got {value}")
            print(fn(value), flush=True)
            return 0
    if a.against_dp is not None:
        if any(x < 2 for x in a.against_dp):
            ap.error(f"--against-dp: chain lengths must be >= 2; got {a.against_dp}")
        for n in a.against_dp:
            print(against_dp(n), flush=True)
        return 0
    if any(x < 2 for x in a.n):
        ap.error(f"--n: chain lengths must be >= 2; got {a.n}")
    if any(not 0 < f <= 1 for f in a.fractions):     # NaN fails too
        ap.error(f"--fractions: each in (0, 1]; got {a.fractions}")
    if a.before is not None and not a.before >= 2:
        ap.error(f"--before: seconds >= 2 (the milp planner's shortest time limit); got {a.before}")
    if a.presets is not None and not a.limit >= 2:
        ap.error(f"--limit: seconds >= 2 (the milp planner's shortest time limit); got {a.limit}")
    header = PRESET_HEADER if a.presets is not None else HEADER
    if not a.csv:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    rows = []
    t0 = time.perf_counter()
    try:
        cases = [(m, f) for m in a.presets for f in a.fractions] if a.presets is not None else \
                [(n, f) for n in a.n for f in a.fractions]
        for x, f in cases:
            rows.append(preset_row(x, f, a.limit) if a.presets is not None else run(x, f, a.before))
            if not a.csv:
                print("| " + " | ".join(rows[-1]) + " |", flush=True)
    except SlackSwapError as e:
        print(f"checkmate_chain: {e}", file=sys.stderr)
        return 2
    total = time.perf_counter() - t0
    if a.csv:
        cmd = "python benchmarks/checkmate_chain.py " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(a.csv, "w", encoding="utf-8", newline="") as fh:
            fh.write(f"# date: {datetime.date.today().isoformat()}\n# machine: {a.machine}\n")
            fh.write(f"# command: {cmd.strip()}\n# note: {total:.0f} s in all\n")
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
