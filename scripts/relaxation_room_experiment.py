"""Experiment: can more branch-and-bound on the aggregated relaxation close the full-size gaps?

Beyond the exact model (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps") the certified bound is the aggregated MILP's dual
bound after ``aggregate_nodes`` nodes. Its best solution after those nodes is an upper value of
the relaxation's optimum, so no further node can raise the bound above it. This script prints,
per setting: the dual bound, that best solution, the incumbent of the ``milp`` planner with a
work-limited search (``--improve-sims``, no time limit: the same plan on any machine), the proven
gap, and the smallest gap the relaxation allows with that incumbent (incumbent against the
relaxation's best solution). Where that is above 0.1%, only a tighter relaxation or a faster
plan can close the gap.

    PYTHONPATH=. python scripts/relaxation_room_experiment.py [--nodes 20] [--improve-sims 2000] \
        [--only bert-large@0.3 ...]

Measured results: benchmarks/README.md, "Proven gaps at every budget".
"""

from __future__ import annotations

import argparse
import warnings

import _gap_settings as settings

from slackswap import planners
from slackswap.bounds import aggregate_bound


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20, help="aggregated MILP nodes (default 20, the planner's)")
    ap.add_argument("--improve-sims", type=int, default=2000, help="simulations of the incumbent search (default 2000)")
    ap.add_argument("--only", nargs="+", default=list(settings.SETTINGS), metavar="MODEL@BUDGET")
    a = ap.parse_args()
    if a.nodes < 1:
        ap.error(f"--nodes: must be >= 1; got {a.nodes}")
    if a.improve_sims < 0:
        ap.error(f"--improve-sims: must be >= 0; got {a.improve_sims}")
    warnings.filterwarnings("ignore", message="static memory")
    print("| setting | dual bound | relaxation's best solution | incumbent | proven gap | "
          "smallest gap the relaxation allows |")
    print("|---" * 6 + "|")
    for setting in a.only:
        problem = settings.problem(ap, setting)
        extra, agg, res = aggregate_bound(problem, integral=True, node_limit=a.nodes)
        ideal = problem.ideal_step_s
        if agg is None or res is None or res.fun is None:
            print(f"| {setting} | {(ideal + extra) * 1e3:.3f} ms | none | | | |", flush=True)
            continue
        best = ideal + (res.fun + agg.model.obj_const) * agg.t0
        plan = planners.get("milp", improve_sims=a.improve_sims, aggregate_nodes=a.nodes).plan(problem)
        inc = plan.info.objective
        print(f"| {setting} | {(ideal + extra) * 1e3:.3f} ms | {best * 1e3:.3f} ms | {inc * 1e3:.3f} ms | "
              f"{100 * plan.info.gap:.3f}% | {100 * max(0.0, inc - best) / inc:.3f}% |", flush=True)


if __name__ == "__main__":
    main()
