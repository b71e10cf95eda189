"""Multi-level recompute (Revolve) through dp-checkpoint on unit chains (plain script).

    python benchmarks/bench_revolve.py [--chains 10 30 100] [--budgets 3-9]
    python benchmarks/bench_revolve.py --presets gpt2-xl bert-large
    python benchmarks/bench_revolve.py --brute 6 7 8 9
    python benchmarks/bench_revolve.py --milp 10 20 30 --budgets 3-9 --time-limit 120

With ``--brute``: per unit chain and budget from the floor up, dp-checkpoint's re-runs against
the optimum over every keep/recompute plan with any hold points (a_t KEEP, or RECOMPUTE with hold
point t..l-1: ``l!`` plans; 9 ops take a few minutes).

With ``--milp``: per unit chain and budget, the exact MILP over every keep/recompute plan with
any hold points (``milp(hold_points=True, allow_swap=False)``, docs/milp.md, "Potential steps"; one thread,
``--time-limit`` seconds) against dp-checkpoint: the MILP's status, re-runs and certified bound,
for chains too long for ``--brute`` (at most 41 ops: the exact path's 40 planning tensors).

With ``--presets``: per preset (A100 80GB + PCIe 4.0), the smallest budget (fraction of the
keep-all peak, bisection to 0.0005) at which ``dp-checkpoint`` fits with ``multilevel=False`` and
with the default, and the throughput ratio there.

For every ``chain(l)`` with ``CostModel.unit`` (1-byte activations, 1 s per op) and budget ``b``
bytes: the re-runs of the single-level plan (``dp-checkpoint`` with ``multilevel=False``; "no"
if none fits); Griewank's ``F(l, s)`` for ``s = b - 2`` slots (every forward step of the binomial
schedule, the first sweep included) and the re-runs of the library's binomial plan with ``s``
slots (``F(l, s) - (l - 1)``: the first sweep is the forward pass); what ``dp-checkpoint``
(default ``multilevel=True``) returns and its re-runs. Prints a markdown table
(benchmarks/README.md, "Multi-level recompute (Revolve)"; docs/planners.md).
"""

from __future__ import annotations

import argparse
import time

from slackswap import CostModel, Problem, SlackSwapError, planners, simulate
from slackswap.experiments.synthetic import chain, chain_multilevel_optimum
from slackswap.planners.dp import binomial_plan, griewank_formula


def budgets(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    try:
        out = list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bytes or a range LO-HI, e.g. 3-9; got {text!r}") from None
    if not out or out[0] < 1:
        raise argparse.ArgumentTypeError(f"expected a non-empty range of budgets >= 1 byte; got {text!r}")
    return out


def smallest(model: str, multilevel: bool) -> tuple[float, float]:
    """Smallest fitting budget fraction (bisection, 0.0005) and the throughput ratio there."""
    base = Problem.build(model, "a100-80gb", None)
    peak = base.keep_all_peak

    def fits(f):
        p = base.with_budget(int(f * peak))
        r = simulate(p, planners.get("dp-checkpoint", multilevel=multilevel).plan(p), detail=False)
        return r.fits, r.throughput_ratio

    lo, hi = base.min_feasible_bytes / peak, 1.0
    while hi - lo > 0.0005:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid)[0] else (mid, hi)
    return hi, fits(hi)[1]


def binomial_reruns(p, s: int) -> float | None:
    """Re-runs of the library's ``s``-slot binomial plan on ``p`` (None if it does not fit)."""
    r = simulate(p, binomial_plan(p, s)[0])
    return round(r.recompute_s) if r.fits else None


def row(l: int, b: int) -> str:  # noqa: E741 (l as in Griewank)
    g = chain(l)
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=b)
    single = planners.get("dp-checkpoint", multilevel=False).plan(p)
    rs = simulate(p, single)
    t0 = time.perf_counter()
    plan = planners.get("dp-checkpoint").plan(p)
    dt = time.perf_counter() - t0
    r = simulate(p, plan)
    if plan.hold_points:
        kind = plan.info.message.split(" (")[0]
    else:
        kind = "single-level" if r.fits else "nothing fits"
    s = b - 2
    f = griewank_formula(l, s) if s >= 1 else None
    binom = binomial_reruns(p, s) if s >= 1 and l > 1 else None
    return (f"| chain({l}) | {b} | {round(rs.recompute_s) if rs.fits else 'no'} | "
            f"{s} | {f if f is not None else '-'} | {binom if binom is not None else '-'} | {kind} | "
            f"{round(r.recompute_s) if r.fits else '-'} | {dt:.2f} |")


def brute(l: int) -> None:  # noqa: E741
    import math


    g = chain(l)
    base = Problem.from_graph(g, CostModel.unit(g))
    for b in range(base.min_feasible_bytes, l + 1):
        p = base.with_budget(b)
        t0 = time.perf_counter()
        best = chain_multilevel_optimum(p)
        plan = planners.get("dp-checkpoint").plan(p)
        r = simulate(p, plan)
        kind = plan.info.message.split(" (")[0] if plan.hold_points else "single-level"
        print(f"| chain({l}) | {b} | {round(best) if math.isfinite(best) else '-'} | {kind} | "
              f"{round(r.recompute_s) if r.fits else '-'} | {time.perf_counter() - t0:.0f} |", flush=True)


def milp(l: int, bs: list[int], limit: float) -> None:  # noqa: E741
    g = chain(l)
    base = Problem.from_graph(g, CostModel.unit(g))
    for b in bs:
        if b < base.min_feasible_bytes:
            continue
        p = base.with_budget(b)
        t0 = time.perf_counter()
        mp = planners.get("milp", hold_points=True, allow_swap=False, threads=1, time_limit_s=limit).plan(p)
        wall = time.perf_counter() - t0
        r = simulate(p, mp)
        plan = planners.get("dp-checkpoint").plan(p)
        rd = simulate(p, plan)
        kind = plan.info.message.split(" (")[0] if plan.hold_points else "single-level"
        bound = mp.info.lower_bound - p.ideal_step_s if mp.info.lower_bound is not None else None
        print(f"| chain({l}) | {b} | {mp.info.status.value} | {round(r.recompute_s) if r.fits else '-'} | "
              f"{f'{bound:.2f}' if bound is not None else '-'} | {wall:.1f} | {kind} | "
              f"{round(rd.recompute_s) if rd.fits else '-'} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, nargs="+", default=[10, 30, 100], help="chain lengths l")
    ap.add_argument("--budgets", type=budgets, default=budgets("3-9"), help="budget range in bytes, e.g. 3-9 (default)")
    ap.add_argument("--presets", nargs="+", help="model presets instead of chains (smallest budget that fits)")
    ap.add_argument("--brute", type=int, nargs="+", help="unit chain lengths (2-10) to compare with brute force")
    ap.add_argument("--milp", type=int, nargs="+", help="unit chain lengths (2-41) to compare with the exact MILP")
    ap.add_argument("--time-limit", type=float, default=120.0, help="--milp: seconds per MILP (default 120)")
    a = ap.parse_args()
    if any(x < 1 for x in a.chains):
        ap.error(f"--chains: lengths must be >= 1; got {a.chains}")
    if a.milp:
        if any(not 2 <= x <= 41 for x in a.milp):
            ap.error(f"--milp: chain lengths 2..41 (the exact path's 40 planning tensors); got {a.milp}")
        if not a.time_limit > 0:
            ap.error(f"--time-limit: expected seconds > 0; got {a.time_limit}")
        print("| chain | budget (bytes) | MILP status | MILP re-runs | certified bound (re-run s) | MILP seconds "
              "| dp-checkpoint plan | re-runs |")
        print("|---|---|---|---|---|---|---|---|")
        for l in a.milp:  # noqa: E741
            milp(l, a.budgets, a.time_limit)
        return
    if a.brute:
        if any(not 2 <= x <= 10 for x in a.brute):
            ap.error(f"--brute: chain lengths 2..10 (l! plans each); got {a.brute}")
        print("| chain | budget (bytes) | optimum re-runs (all hold points) | dp-checkpoint plan | re-runs | seconds |")
        print("|---|---|---|---|---|---|")
        for l in a.brute:  # noqa: E741
            brute(l)
        return
    if a.presets:
        print("| model | dp-checkpoint | smallest budget that fits | throughput ratio at that budget |")
        print("|---|---|---|---|")
        for m in a.presets:
            for multilevel in (False, True):
                try:
                    f, r = smallest(m, multilevel)
                except SlackSwapError as e:
                    ap.error(f"--presets {m}: {e}")
                print(f"| {m} | multilevel={multilevel} | {f:.4f} | {r:.4f} |", flush=True)
        return
    print("| chain | budget (bytes) | single-level re-runs | Revolve slots s = budget - 2 | F(l, s) | "
          "binomial plan re-runs | dp-checkpoint plan | re-runs | plan time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for l in a.chains:  # noqa: E741
        for b in a.budgets:
            print(row(l, b), flush=True)


if __name__ == "__main__":
    main()
