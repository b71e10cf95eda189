"""Chen sqrt(n), Griewank's binomial optimum, and dp-checkpoint <= chen-greedy <= chen-sqrt."""

from __future__ import annotations

import math

import pytest

from slackswap import planners
from slackswap.core.costs import CostModel
from slackswap.core.plan import Decision, Plan, Status
from slackswap.experiments import synthetic
from slackswap.planners.dp import griewank_formula, revolve_extra_forwards
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem


@pytest.mark.parametrize("s", range(1, 7))
def test_griewank_table(s):
    for steps in range(1, 31):
        assert revolve_extra_forwards(steps, s) == griewank_formula(steps, s), (steps, s)


def test_griewank_known_values():
    # hand values: F(l, 1) = l(l-1)/2 (recompute from the input); F(l, s >= l-1) = l-1 (one sweep)
    assert [griewank_formula(n, 1) for n in (1, 2, 3, 4, 5)] == [0, 1, 3, 6, 10]
    assert griewank_formula(10, 9) == 9 and griewank_formula(4, 2) == 4
    assert revolve_extra_forwards(2, 0) == math.inf


@pytest.mark.parametrize("n", [16, 25, 36])
def test_chen_sqrt_homogeneous_chain(n):
    """k = sqrt(n) segments of m = n/k: a middle segment i holds i checkpoints (x0 included, 1 byte
    each), its m rebuilt tensors and 2 gradients; the last one m + k-1 + 1 gradient: n/k + k."""
    g = synthetic.chain(n, input_bytes=1)
    p = Problem.from_graph(g, CostModel.unit(g))
    plan = planners.get("chen-sqrt").plan(p)
    r = simulate(p, plan)
    k = round(math.sqrt(n))
    assert r.peak_bytes == n // k + k
    rec = plan.ids(Decision.RECOMPUTE)
    assert len(rec) == n - k                    # kept: the k-1 segment inputs after x0
    # exactly one extra forward per recomputed op: recompute time = forward time of their producers
    assert r.recompute_s == sum(p.costs.fwd_s[g.tensors[t].producer] for t in rec)


CHAINS = {
    "homog12": synthetic.chain(12, input_bytes=1),
    "hetero10": synthetic.chain(10, sizes=[3, 1, 4, 1, 5, 9, 2, 6, 5, 3]),
    "hetero14": synthetic.chain(14, sizes=[2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 1]),
}


def _hetero_costs(g):
    c = CostModel.unit(g)
    fwd = tuple(float(1 + (i * 7) % 4) for i in range(len(g.ops)))
    return CostModel("unit", fwd, c.bwd_s, c.d2h_s, c.h2d_s)


@pytest.mark.parametrize("cname", sorted(CHAINS))
@pytest.mark.parametrize("hetero_time", [False, True])
def test_dp_greedy_sqrt_ordering(cname, hetero_time):
    g = CHAINS[cname]
    base = Problem.from_graph(g, _hetero_costs(g) if hetero_time else CostModel.unit(g))
    checked = 0
    for frac in (0.35, 0.5, 0.7, 0.9):
        p = base.with_budget(max(base.min_feasible_bytes, int(frac * base.keep_all_peak)))
        t = {}
        for name in ("dp-checkpoint", "chen-greedy", "chen-sqrt"):
            plan = planners.get(name).plan(p)
            r = simulate(p, plan)
            assert (plan.info.status is Status.FEASIBLE) == r.fits
            t[name] = r.step_time_s if r.fits else math.inf
        assert t["dp-checkpoint"] <= t["chen-greedy"] <= t["chen-sqrt"], (frac, t)
        checked += math.isfinite(t["chen-sqrt"])
    assert checked >= 1   # at least one budget where all three fit


def test_dp_single_level_optimum_by_enumeration():
    """On a chain every checkpoint set is a plan; the DP's step equals the best fitting one."""
    import itertools

    g = CHAINS["hetero10"]
    base = Problem.from_graph(g, _hetero_costs(g))
    for frac in (0.4, 0.6):
        p = base.with_budget(max(base.min_feasible_bytes, int(frac * base.keep_all_peak)))
        ids = list(p.planning_ids)
        best = math.inf
        for bits in itertools.product((Decision.KEEP, Decision.RECOMPUTE), repeat=len(ids)):
            r = simulate(p, Plan(dict(zip(ids, bits, strict=True))))
            if r.fits:
                best = min(best, r.step_time_s)
        plan = planners.get("dp-checkpoint", multilevel=False).plan(p)
        assert simulate(p, plan).step_time_s == best
        plan = planners.get("dp-checkpoint").plan(p)   # multi-level only where nothing above fits
        assert bool(plan.hold_points) == math.isinf(best)
        assert simulate(p, plan).fits and (math.isinf(best) or simulate(p, plan).step_time_s == best)


def test_dp_unlimited_budget_is_keep_all():
    p = Problem.build("tiny", "a100-80gb", budget=None)
    plan = planners.get("dp-checkpoint").plan(p)
    assert plan.ids(Decision.RECOMPUTE) == [] and plan.info.objective == pytest.approx(p.ideal_step_s)
