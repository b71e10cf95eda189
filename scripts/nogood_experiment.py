"""Experiment: does a no-good loop on the aggregated relaxation close the gap of a cut preset?

A combinatorial decomposition (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps", "tried and left out"): the master is the
aggregated MILP (``slackswap.mip.aggregate``, solved to optimality); each of its optimal decision
vectors is simulated (default issue points, D2H in production order) and then cut off by a
no-good row (at least one tensor's decision differs). The master's optimum is a lower bound on
every plan whose decisions were not yet cut off; the best simulated time is an upper value. The
loop would stop when the two meet. Cutting a vector off after one simulation assumes its default
issue points are its best ones, so a meeting would prove optimality only among plans with
default issue points.

    PYTHONPATH=. python scripts/nogood_experiment.py [--model tiny] [--layers 4] [--budget 0.7] \
        [--iterations 100] [--every 10]

Measured results: docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps".
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from slackswap import Decision, Plan, Problem, simulate
from slackswap.core.errors import SlackSwapError
from slackswap.mip.aggregate import build
from slackswap.planners.milp.milp_planner import _decisions


def nogood(agg, problem, dec) -> tuple[list, float]:
    """The row ``sum(differs) >= 1`` over the decisions ``dec``, as (terms, right-hand side)."""
    terms, rhs = [], 1.0
    for t in problem.planning_ids:
        x, s = agg.rec.get(t), agg.swap.get(t)
        if dec[t] is Decision.SWAP:
            terms.append((-1, s))
            rhs -= 1
        elif dec[t] is Decision.RECOMPUTE:
            terms.append((-1, x))
            rhs -= 1
        else:
            terms += [(1, v) for v in (x, s) if v is not None]
    return terms, rhs


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="preset (default tiny)")
    ap.add_argument("--layers", type=int, default=4, help="layers of the preset (default 4)")
    ap.add_argument("--budget", type=float, default=0.7, help="fraction of the keep-all peak (default 0.7)")
    ap.add_argument("--iterations", type=int, default=100, help="master solves (default 100)")
    ap.add_argument("--every", type=int, default=10, help="print every this many iterations (default 10)")
    a = ap.parse_args(argv)
    for name in ("layers", "iterations", "every"):
        if getattr(a, name) < 1:
            ap.error(f"--{name}: must be >= 1; got {getattr(a, name)}")
    warnings.filterwarnings("ignore", message="static memory")
    try:
        problem = Problem.build(a.model, "a100-80gb", a.budget, layers=a.layers)
    except (ValueError, SlackSwapError) as e:
        ap.error(f"--model/--layers/--budget: {e}")
    agg = build(problem, integral=True)
    if agg is None:
        ap.error("no step exceeds the budget under keep-all: keep-all is optimal, nothing to do")
    m, ideal = agg.model, problem.ideal_step_s
    best, seen, swapping, t0 = math.inf, set(), 0, time.perf_counter()
    print(f"{a.model}, {a.layers} layers, budget {a.budget}: {len(problem.planning_ids)} planning tensors")
    for it in range(a.iterations):
        obj = np.zeros(len(m.names))
        for v, c in m.obj.items():
            obj[v] = c
        res = milp(obj, constraints=LinearConstraint(m.csr(), m.lo, m.hi),
                   integrality=np.asarray(m.integer, int), bounds=Bounds(m.lb, m.ub),
                   options={"mip_rel_gap": 1e-7})
        if res.x is None:
            print(f"iteration {it}: master infeasible, every decision vector cut off")
            break
        low = ideal + (res.fun + m.obj_const) * agg.t0
        dec = _decisions(problem, res.x, agg.swap, agg.rec)
        key = tuple(sorted((t, d.value) for t, d in dec.items()))
        if key in seen:
            raise SystemExit(f"iteration {it}: the master repeated a cut-off vector (a bug)")
        seen.add(key)
        swapping += Decision.SWAP in dec.values()
        r = simulate(problem, Plan(dec), detail=False)
        val = r.step_time_s if r.feasible and r.fits else math.inf
        best = min(best, val)
        if it % a.every == 0 or low >= best * (1 - 1e-7) or it == a.iterations - 1:
            print(f"iteration {it}: master {low * 1e6:.4f} us, this vector {val * 1e6:.4f} us, "
                  f"best {best * 1e6:.4f} us, {time.perf_counter() - t0:.1f} s", flush=True)
        if low >= best * (1 - 1e-7):
            print("the bound meets the best vector (among plans with default issue points)")
            break
        terms, rhs = nogood(agg, problem, dec)
        m.add_ge(f"nogood[{it}]", terms, rhs)
    print(f"{len(seen)} decision vectors simulated, {swapping} of them with SWAP (timed at default "
          "issue points; without SWAP issue points do not matter)")


if __name__ == "__main__":
    main()
