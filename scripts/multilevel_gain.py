"""How often a multi-level plan (hold points, docs/timeline.md section 3) beats every single-level
plan on small random graphs, and a check that the bounds of ``slackswap.bounds`` stay below both.

For each instance (chains, random DAGs, residual blocks, mixed DAGs of 2-6 ops; random op times,
copy speeds and a budget between the floor and the keep-all peak) it enumerates every
single-level plan, and for every decision vector ``--holds`` random hold-point assignments
(each regenerable tensor gets a random stage, or none, with probability 0.3). Prints the counts
and the largest gain; exits 1 if a bound exceeds a plan that fits.

    python scripts/multilevel_gain.py --instances 300 --seed 0
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import random
import sys

from slackswap import CostModel, Decision, Plan, Problem, simulate
from slackswap.bounds import aggregate_bound, lower_bound
from slackswap.synthetic import chain, mixed_dag, random_dag, residual_block


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
    p = Problem(g, costs)
    lo, hi = p.min_feasible_bytes, p.keep_all_peak
    return p.with_budget(max(lo, math.floor(lo + rng.random() * (hi - lo))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=300, help="random instances (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holds", type=int, default=12, help="hold-point draws per decision vector (default 12)")
    a = ap.parse_args(argv)
    if a.instances < 1 or a.holds < 1:
        ap.error("--instances and --holds must be >= 1")
    rng = random.Random(a.seed)
    fitting = faster = only_ml = bad = 0
    best_gain = (0.0, None)
    for i in range(a.instances):
        p = instance(rng)
        g, ids = p.graph, p.planning_ids
        unsaved = [t.id for t in g.tensors if t.producer is not None and t.id not in set(ids)]
        opts = [[Decision.KEEP] + [Decision.SWAP] * g.tensors[t].swappable
                + [Decision.RECOMPUTE] * g.tensors[t].recomputable for t in ids]
        single = multi = math.inf
        for bits in itertools.product(*opts):
            dec = dict(zip(ids, bits, strict=True))
            r = simulate(p, Plan(dec), detail=False)
            if r.fits:
                single = min(single, r.step_time_s)
            regen = [t for t in ids if dec[t] is Decision.RECOMPUTE] + unsaved
            for _ in range(a.holds if regen else 0):
                hold = {t: rng.randint(0, len(g.ops) - 1) for t in regen if rng.random() < 0.7}
                r = simulate(p, Plan(dec, hold_points=hold), detail=False)
                if r.fits:
                    multi = min(multi, r.step_time_s)
        best = min(single, multi)
        if not math.isfinite(best):
            continue
        fitting += 1
        if multi < single:
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
    print(f"bound above a plan that fits: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
