"""Experiment: from which plans should the milp planner's incumbent search start?

Beyond the exact model (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps", item 4) the search starts from the best of the
warm start, slack's switch variants and the aggregated MILP's decisions, and from the other of
the two candidates. This script runs ``pair_search`` for ``--limit`` seconds from each plan that
could be a start: every deterministic heuristic of the registry (single-level plans that fit),
slack's ``VARIANTS``, and the aggregated MILP's decisions (20 nodes), and prints, per setting,
each start's simulated time and where its search ends, best end first.

    PYTHONPATH=. python scripts/search_starts_experiment.py [--limit 8] [--only bert-large@0.3 ...]

Measured results and the conclusion: benchmarks/README.md, "Two starts at equal work".
"""

from __future__ import annotations

import argparse
import time
import warnings

import _gap_settings as settings

from slackswap import Plan
from slackswap.bounds import aggregate_bound
from slackswap.planners.milp.incumbent import pair_search, variants
from slackswap.planners.milp.milp_planner import _decisions, heuristic_plans
from slackswap.timeline import simulate


def starts(problem):
    """``[(label, Plan)]``: every plan the search could start from."""
    out = heuristic_plans(problem, exclude=("keep-all",)) + variants(problem, True, True, None)
    _, agg, res = aggregate_bound(problem, integral=True, node_limit=20)
    if agg is not None and res is not None and res.x is not None:
        out.append(("aggregated MILP", Plan(_decisions(problem, res.x, agg.swap, agg.rec))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=8.0, help="seconds of search per start (default 8)")
    ap.add_argument("--only", nargs="+", default=list(settings.SETTINGS), metavar="MODEL@BUDGET")
    a = ap.parse_args()
    if a.limit <= 0:
        ap.error(f"--limit: must be > 0 seconds; got {a.limit}")
    warnings.filterwarnings("ignore", message="static memory")
    for setting in a.only:
        problem = settings.problem(ap, setting)
        rows = []
        for label, plan in starts(problem):
            if plan.hold_points:
                continue
            r = simulate(problem, Plan(plan.decisions), detail=False)
            if not r.fits:
                continue
            _, s, moves, sims = pair_search(problem, dict(plan.decisions), r.step_time_s,
                                            max_sims=10**9, until=time.perf_counter() + a.limit)
            rows.append((s, label, r.step_time_s, moves, sims))
        print(f"{setting}:")
        for s, label, s0, moves, sims in sorted(rows, key=lambda x: x[0]):
            print(f"  {label:45s} start {s0 * 1e3:9.2f} ms -> {s * 1e3:9.2f} ms ({moves} moves, {sims} simulations)",
                  flush=True)


if __name__ == "__main__":
    main()
