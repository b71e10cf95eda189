"""The pipeline bound (``slackswap.bounds.pipeline``) against brute force on tiny pipeline stages.

    python scripts/pipeline_bound_check.py --graphs 200

For each of ``--graphs`` random 4-op graphs (``synthetic.random_dag`` and ``synthetic.mixed_dag``,
alternately, unit costs, copies 0.3 to 10 times a unit), pp = 2, stages 0 and 1, 2 to 4
micro-batches, at four budgets from the smallest feasible one to just below the keep-all peak:
brute's best shared plan (every keep / swap / recompute vector, simulated on the pipeline)
against ``lower_bound``. Prints the cases, the violations (a bound above brute's optimum: must be
0), the cases where the bound proves more than the pipeline's ideal step, where it proves that no
plan fits (brute agrees), and the bound's gap to the optimum (median and largest)."""

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=_positive, default=200, help="random graphs (default 200)")
    args = ap.parse_args(argv)
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
    print(f"{cases} cases ({args.graphs} graphs), {bad} violations; bound above the ideal step: {lifted}; "
          f"no plan fits, proven: {proven_none}")
    if gaps:
        print(f"gap of the bound to brute's optimum where a plan fits ({len(gaps)} cases): "
              f"median {statistics.median(gaps):.2%}, largest {max(gaps):.2%}, "
              f"zero on {sum(x <= 1e-9 for x in gaps)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
