"""How tight is ``Problem.min_feasible_bytes``? Brute force on tiny random graphs.

    python scripts/floor_tightness.py --graphs 200

For each graph (``random_dag`` and ``mixed_dag`` from ``slackswap.experiments.synthetic``, 2-5 ops, unit
costs) it finds the smallest whole-byte budget at which some plan (every keep/swap/recompute
assignment, default issue points) fits, and compares it with the floor. Prints how often the two
are equal and the largest gap (bytes and fraction of the keep-all peak).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

from slackswap import CostModel, Decision, Plan, Problem, simulate
from slackswap.experiments.synthetic import mixed_dag, random_dag


def smallest_fitting_budget(g) -> int:
    """The smallest whole-byte budget at which some plan of ``g`` fits (brute force)."""
    free = Problem.from_graph(g, CostModel.unit(g), min_feasible_bytes=0)
    ids = [t.id for t in g.planning_tensors()]
    choices = [[Decision.KEEP] + [Decision.SWAP] * g.tensors[t].swappable
               + [Decision.RECOMPUTE] * g.tensors[t].recomputable for t in ids]
    plans = [Plan(dict(zip(ids, c, strict=True))) for c in itertools.product(*choices)]
    for b in range(1, free.keep_all_peak + 1):
        p = dataclasses.replace(free, budget_bytes=b)
        if any(simulate(p, plan, detail=False).fits for plan in plans):
            return b
    return free.keep_all_peak


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=200, help="graphs of each family (default 200)")
    args = ap.parse_args(argv)
    rows = []
    for seed in range(args.graphs):
        n = 2 + seed % 4
        for g in (random_dag(seed, n, max_bytes=5), mixed_dag(seed, n)):
            p = Problem.from_graph(g, CostModel.unit(g))
            rows.append((g.name, p.min_feasible_bytes, smallest_fitting_budget(g), p.keep_all_peak))
    equal = sum(f == b for _, f, b, _ in rows)
    worst = max(rows, key=lambda r: (r[2] - r[1]) / r[3])
    print(f"{len(rows)} graphs: floor == smallest fitting budget on {equal} ({equal / len(rows):.1%}); "
          f"never above it: {all(f <= b for _, f, b, _ in rows)}")
    print(f"largest gap: {worst[0]}, floor {worst[1]} B, smallest fitting {worst[2]} B, "
          f"keep-all {worst[3]} B ({(worst[2] - worst[1]) / worst[3]:.1%} of keep-all)")


if __name__ == "__main__":
    main()
