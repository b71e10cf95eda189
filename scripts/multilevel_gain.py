"""How often a multi-level plan (hold points, docs/timeline.md, "Backward: recompute, prefetch, gradients") beats every single-level
plan on small random graphs, and a check that the bounds of ``slackswap.bounds`` stay below both.

For each instance (chains, random DAGs, residual blocks, mixed DAGs of 2-6 ops; random op times,
copy speeds and a budget between the floor and the keep-all peak) the best single-level plan is
the exact MILP's and the best plan with any hold points that of the MILP with ``hold_points=True``
(docs/milp.md, "Potential steps"; both optimise issue points, with D2H in production order). Prints the counts and the largest gain; exits 1 if a
bound exceeds a plan that fits, or if the multi-level optimum is slower than the single-level one
(it searches a superset) or not proven. ``--exhaustive N`` also checks the multi-level optimum
against an exhaustive search over decisions and hold points
(``slackswap.experiments.synthetic.multilevel_optimum``) on every instance where that takes at most ``N``
simulations.

    python scripts/multilevel_gain.py --instances 300 --seed 0 [--exhaustive 6000]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys

from slackswap import CostModel, Problem, Status, planners, simulate
from slackswap.bounds import aggregate_bound, lower_bound
from slackswap.experiments.synthetic import (
    chain,
    mixed_dag,
    multilevel_optimum,
    random_dag,
    residual_block,
)


def instance(rng: random.Random) -> Problem:
    kind = rng.choice(["chain", "dag", "res", "mixed", "mixed"])
    if kind == "chain":
        n = rng.randint(2, 6)
        g = chain(n, sizes=[rng.randint(1, 5) for _ in range(n)])
    elif kind == "dag":
        g = random_dag(rng.randint(0, 5000), n_ops=rng.randint(3, 6), max_bytes=5)
    elif kind == "res":
        g = residual_block(tuple(rng.randint(1, 5) for _ in range(4)))
    else:
        g = mixed_dag(rng.randint(0, 10**6), rng.randint(3, 6))
        if len(g.planning_tensors()) > 6:
            g = chain(3, sizes=[1, 2, 1])
    scale, lat = rng.choice([0.25, 0.5, 1.0, 2.0, 4.0]), rng.choice([0.0, 0.0, 0.5])
    base = CostModel.unit(g, bwd_factor=rng.choice([1.0, 2.0]))
    costs = dataclasses.replace(base, fwd_s=tuple(float(rng.choice([0, 1, 1, 2])) for _ in g.ops),
                                d2h_s=tuple(x * scale + lat for x in base.d2h_s),
                                h2d_s=tuple(x * scale + lat for x in base.h2d_s))
    p = Problem.from_graph(g, costs)
    lo, hi = p.min_feasible_bytes, p.keep_all_peak
    return p.with_budget(max(lo, math.floor(lo + rng.random() * (hi - lo))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=300, help="random instances (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exhaustive", type=int, default=0, metavar="N",
                    help="check the MILP against exhaustive search where it takes <= N simulations (default 0: off)")
    a = ap.parse_args(argv)
    if a.instances < 1:
        ap.error("--instances must be >= 1")
    if a.exhaustive < 0:
        ap.error("--exhaustive must be >= 0")
    rng = random.Random(a.seed)
    fitting = faster = only_ml = bad = checked = 0
    best_gain = (0.0, None)
    for i in range(a.instances):
        p = instance(rng)
        g = p.graph
        opt = {}
        for hold in (False, True):
            mp = planners.get("milp", hold_points=hold).plan(p)
            if mp.info.status not in (Status.OPTIMAL, Status.INFEASIBLE):
                bad += 1
                print(f"instance {i} ({g.name}): milp(hold_points={hold}) {mp.info.status.value}: {mp.info.message}")
            fits = mp.info.status is Status.OPTIMAL
            opt[hold] = simulate(p, mp, detail=False).step_time_s if fits else math.inf
        single, multi = opt[False], opt[True]
        if a.exhaustive:
            best, _ = multilevel_optimum(p, max_plans=a.exhaustive)
            if best is not None:
                checked += 1
                if not math.isclose(best, multi, rel_tol=1e-9):     # inf only equals inf
                    bad += 1
                    print(f"instance {i} ({g.name}): exhaustive search {best:g} s, milp(hold_points=True) {multi:g} s")
        if multi > single * (1 + 1e-9):
            bad += 1
            print(f"instance {i} ({g.name}): multi-level optimum {multi:g} s above the single-level {single:g} s")
        best = min(single, multi)
        if not math.isfinite(best):
            continue
        fitting += 1
        if multi < single * (1 - 1e-9):
            faster += 1
            only_ml += math.isinf(single)
            if math.isfinite(single) and single / multi > best_gain[0]:
                best_gain = (single / multi, f"instance {i} ({g.name}): {single:g} s -> {multi:g} s")
        lbs = {"lower_bound": lower_bound(p)[0],
               "aggregate (integral)": p.ideal_step_s + aggregate_bound(p, integral=True, time_limit_s=10)[0]}
        for name, lb in lbs.items():
            if lb > best * (1 + 1e-9):
                bad += 1
                print(f"instance {i} ({g.name}): {name} {lb:g} s above a plan of {best:g} s")
    print(f"{a.instances} instances (seed {a.seed}), {fitting} with a plan that fits")
    print(f"a multi-level plan is faster than every single-level plan on {faster}; "
          f"on {only_ml} of them no single-level plan fits")
    if best_gain[1]:
        print(f"largest gain where both fit: {best_gain[1]} ({best_gain[0]:.2f}x)")
    if a.exhaustive:
        print(f"multi-level optimum checked against exhaustive search on {checked} instances")
    print(f"bound above a plan that fits, a multi-level optimum not proven, above the single-level or "
          f"unlike exhaustive search: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
