"""The pipeline bound (``slackswap.bounds.pipeline``) against brute force on tiny pipeline stages.

    python scripts/pipeline_bound_check.py --graphs 200
    python scripts/pipeline_bound_check.py --graphs 50 --planners slack,milp

For each of ``--graphs`` random 4-op graphs (``synthetic.random_dag`` and ``synthetic.mixed_dag``,
alternately, unit costs, copies 0.3 to 10 times a unit), pp = 2, stages 0 and 1, 2 to 4
micro-batches, at four budgets from the smallest feasible one to just below the keep-all peak:
brute's best shared plan (every keep / swap / recompute vector, simulated on the pipeline)
against ``lower_bound``. Prints the cases, the violations (a bound above brute's optimum: must be
0), the cases where the bound proves more than the pipeline's ideal step, where it proves that no
plan fits (brute agrees), and the bound's gap to the optimum (median and largest). With
``--planners``: for each named planner (default parameters), on how many cases where a plan fits
its plan is brute's optimum (within 1e-9), slower, or none, and how often it says OPTIMAL (each
such claim is checked: it must be brute's optimum)."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace

from slackswap import planners
from slackswap.bounds import lower_bound
from slackswap.core import hardware as hw_mod
from slackswap.core.costs import CostModel
from slackswap.core.plan import Status
from slackswap.experiments import synthetic as syn
from slackswap.models import Parallel
from slackswap.timeline.problem import Problem

SCALES = (0.3, 0.7, 1.5, 3.0, 6.0, 10.0)


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number >= 1; got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1; got {text!r}")
    return v


def _planner_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = planners.available()
    for n in names:
        if n not in known:
            raise argparse.ArgumentTypeError(f"unknown planner {n!r}; allowed: {', '.join(known)}")
    if not names:
        raise argparse.ArgumentTypeError(f"comma-separated planner names; got {text!r}")
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=_positive, default=200, help="random graphs (default 200)")
    ap.add_argument("--planners", type=_planner_names, default=[],
                    help="comma-separated planners to compare with brute's optimum")
    args = ap.parse_args(argv)
    tally = {n: {"optimum": 0, "slower": 0, "none": 0, "OPTIMAL": 0} for n in args.planners}
    hw = hw_mod.load("a100-80gb")
    cases = bad = lifted = proven_none = 0
    gaps = []
    for seed in range(args.graphs):
        g = syn.mixed_dag(seed, 4) if seed % 2 else syn.random_dag(seed, 4)
        c = CostModel.unit(g)
        sc = SCALES[seed % len(SCALES)]
        c = replace(c, d2h_s=tuple(v * sc for v in c.d2h_s), h2d_s=tuple(v * sc for v in c.h2d_s))
        m = 2 + seed % 3
        for stage in (0, 1):
            base = Problem.from_graph(g, c, math.inf, hw, parallel=Parallel(pp=2, stage=stage, microbatches=m))
            lo, hi = base.min_feasible_bytes, base.keep_all_peak
            for b in sorted({lo, (2 * lo + hi) // 3, (lo + 2 * hi) // 3, max(lo, hi - 1)}):
                p = base.with_budget(b)
                lb = lower_bound(p)[0]
                best = planners.get("brute").plan(p)
                opt = best.info.objective if best.info.status is Status.OPTIMAL else math.inf
                cases += 1
                if lb > opt:
                    bad += 1
                    print(f"VIOLATION {g.name} stage {stage} m {m} budget {b}: bound {lb} > optimum {opt}")
                if math.isinf(lb):
                    proven_none += 1
                elif lb > p.ideal_step_s * (1 + 1e-9):
                    lifted += 1
                if math.isfinite(opt):
                    gaps.append((opt - lb) / opt)
                    for name in args.planners:
                        plan = planners.get(name).plan(p)
                        got = plan.info.objective if plan.info.status in (Status.OPTIMAL, Status.FEASIBLE) else None
                        t = tally[name]
                        t["none" if got is None else "optimum" if got <= opt * (1 + 1e-9) else "slower"] += 1
                        if plan.info.status is Status.OPTIMAL:
                            t["OPTIMAL"] += 1
                            if got is None or got > opt * (1 + 1e-9):
                                bad += 1
                                print(f"FALSE OPTIMAL {name} {g.name} stage {stage} m {m} budget {b}: {got} > {opt}")
    print(f"{cases} cases ({args.graphs} graphs), {bad} violations; bound above the ideal step: {lifted}; "
          f"no plan fits, proven: {proven_none}")
    if gaps:
        print(f"gap of the bound to brute's optimum where a plan fits ({len(gaps)} cases): "
              f"median {statistics.median(gaps):.2%}, largest {max(gaps):.2%}, "
              f"zero on {sum(x <= 1e-9 for x in gaps)}")
    for name, t in tally.items():
        print(f"{name}: brute's optimum on {t['optimum']}, slower on {t['slower']}, no plan on {t['none']}; "
              f"says OPTIMAL on {t['OPTIMAL']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
