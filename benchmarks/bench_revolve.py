"""Multi-level recompute (Revolve) through dp-checkpoint on unit chains (plain script).

    python benchmarks/bench_revolve.py [--chains 10 30 100] [--budgets 3-9]
    python benchmarks/bench_revolve.py --presets gpt2-xl bert-large

With ``--presets``: per preset (A100 80GB + PCIe 4.0), the smallest budget (fraction of the
keep-all peak, bisection to 0.0005) at which ``dp-checkpoint`` fits with ``multilevel=False`` and
with the default, and the throughput ratio there.

For every ``chain(l)`` with ``CostModel.unit`` (1-byte activations, 1 s per op) and budget ``b``
bytes: does a single-level plan fit (``dp-checkpoint`` with ``multilevel=False``) and how many ops
it re-runs; what ``dp-checkpoint`` (default ``multilevel=True``) returns, its slots and re-runs;
and Griewank's ``F(l, s)`` for ``s = b - 2`` slots (every forward step of the binomial schedule,
the first sweep included, so ``F(l, s) - (l - 1)`` re-runs). Prints a markdown table
(benchmarks/README.md, "Multi-level recompute (Revolve)"; docs/planners.md).
"""

from __future__ import annotations

import argparse
import re
import time

from slackswap import CostModel, Problem, SlackSwapError, planners, simulate
from slackswap.planners.dp import griewank_formula
from slackswap.synthetic import chain


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


def row(l: int, b: int) -> str:  # noqa: E741 (l as in Griewank)
    g = chain(l)
    p = Problem(g, CostModel.unit(g), budget_bytes=b)
    t0 = time.perf_counter()
    single = planners.get("dp-checkpoint", multilevel=False).plan(p)
    rs = simulate(p, single)
    plan = planners.get("dp-checkpoint").plan(p)
    dt = time.perf_counter() - t0
    r = simulate(p, plan)
    if plan.hold_points:
        m = re.match(r"multi-level: (\d+) slots", plan.info.message)
        n = m.group(1) if m else "?"
        kind = f"multi-level, {n} slot{'' if n == '1' else 's'}"
    else:
        kind = "single-level" if r.fits else "nothing fits"
    s = b - 2
    f = griewank_formula(l, s) if s >= 1 else None
    return (f"| chain({l}) | {b} | {'yes' if rs.fits else 'no'} | "
            f"{round(rs.recompute_s) if rs.fits else '-'} | {kind} | "
            f"{round(r.recompute_s) if r.fits else '-'} | {s} | {f if f is not None else '-'} | "
            f"{f - (l - 1) if f is not None else '-'} | {dt:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, nargs="+", default=[10, 30, 100], help="chain lengths l")
    ap.add_argument("--budgets", type=budgets, default=budgets("3-9"), help="budget range in bytes, e.g. 3-9 (default)")
    ap.add_argument("--presets", nargs="+", help="model presets instead of chains (smallest budget that fits)")
    a = ap.parse_args()
    if any(x < 1 for x in a.chains):
        ap.error(f"--chains: lengths must be >= 1; got {a.chains}")
    if a.presets:
        print("| model | single-level: smallest budget | ratio there | with multi-level: smallest budget | ratio there |")
        print("|---|---|---|---|---|")
        for m in a.presets:
            try:
                (f1, r1), (f2, r2) = smallest(m, False), smallest(m, True)
            except SlackSwapError as e:
                ap.error(f"--presets {m}: {e}")
            print(f"| {m} | {f1:.4f} | {r1:.4f} | {f2:.4f} | {r2:.4f} |", flush=True)
        return
    print("| chain | budget (bytes) | single-level fits | single-level re-runs | dp-checkpoint plan | "
          "re-runs | Revolve slots s = budget - 2 | F(l, s) | F(l, s) - (l - 1) | plan time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for l in a.chains:  # noqa: E741
        for b in a.budgets:
            print(row(l, b), flush=True)


if __name__ == "__main__":
    main()
