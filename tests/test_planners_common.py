"""One table-driven suite over every registered planner (every planner under one contract)."""

from __future__ import annotations

import copy
import functools

import pytest

from slackswap import planners
from slackswap.core.costs import CostModel
from slackswap.core.errors import SlackSwapError, UnknownNameError
from slackswap.core.plan import Decision, Plan, Status, validate
from slackswap.experiments import synthetic
from slackswap.planners import FunctionPlanner, Tags
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem


def _unit(g):
    return Problem.from_graph(g, CostModel.unit(g))


#: The problems of the suite, built on first use (not at collection, where building one would
#: compile the simulator's core in every worker before the run's shared warm-up has cached it).
_BUILDERS = {
    "chain6": lambda: _unit(synthetic.chain(6, sizes=[2, 1, 3, 1, 2, 1])),
    "residual": lambda: _unit(synthetic.residual_block(sizes=(2, 3, 1, 2))),
    "dag3": lambda: _unit(synthetic.random_dag(3, n_ops=6)),
    "dag7": lambda: _unit(synthetic.random_dag(7, n_ops=6)),
    "tiny": lambda: Problem.build("tiny", "a100-80gb", budget=None),
}


@functools.cache
def _problem(name):
    return _BUILDERS[name]()


NAMES = planners.available()


def _budgets(p):
    """No limit, half the keep-all peak (or the floor) and just above the smallest feasible."""
    lo = p.min_feasible_bytes
    return [None, max(lo, int(0.5 * p.keep_all_peak)), lo + 1]


#: Parameters for planners whose defaults suit research runs rather than a test suite: work
#: limits, never seconds, so two runs give the same plan on any machine under any load. The milp
#: planner's exact model on ``tiny`` (30 planning tensors) at the smallest feasible budget runs for
#: minutes: there it takes the aggregated path with its LP bound and a 20-simulation incumbent
#: search; the exact model is still built and solved on the synthetic problems (at most 7
#: planning tensors) and in tests/test_milp*.py.
PARAMS = {"milp": {"max_exact_tensors": 16, "aggregate_nodes": 0, "improve_sims": 20}}


def _get(name):
    return planners.get(name, **PARAMS.get(name, {}))


@pytest.mark.parametrize("pname", sorted(_BUILDERS))
@pytest.mark.parametrize("name", NAMES)
def test_planner_contract(name, pname):
    base = _problem(pname)
    if name == "brute" and len(base.planning_ids) > planners.get("brute").max_tensors:
        with pytest.raises(SlackSwapError, match="max_tensors"):   # refuses, clearly, up front
            planners.get("brute").plan(base)
        return
    for budget in _budgets(base):
        p = base.with_budget(budget)
        before = (copy.deepcopy(p.graph), copy.deepcopy(p.costs), p.budget_bytes, p.keep_all_peak)
        a = _get(name).plan(p)
        b = _get(name).plan(p)
        assert (p.graph, p.costs, p.budget_bytes, p.keep_all_peak) == before      # not mutated
        assert set(a.decisions) == set(p.planning_ids)                             # every tensor once
        validate(p, a)                                                             # swappable/recomputable
        assert a.decisions == b.decisions                                          # deterministic
        assert a.info.status in (Status.FEASIBLE, Status.OPTIMAL, Status.INFEASIBLE, Status.NO_PLAN_FOUND,
                                 Status.TIME_LIMIT)
        r = simulate(p, a)
        if a.info.status in (Status.FEASIBLE, Status.OPTIMAL, Status.TIME_LIMIT):
            assert r.fits and r.peak_bytes <= p.budget_bytes
        else:                   # INFEASIBLE, NO_PLAN_FOUND: the plan returned does not fit
            assert not r.fits


@pytest.mark.parametrize("name", NAMES)
def test_planner_has_name_and_tags(name):
    pl = planners.get(name)
    assert pl.name == name and isinstance(pl.tags, Tags)


@pytest.mark.parametrize("name", NAMES)
def test_fixed_respects_flags(name):
    """Non-swappable / non-recomputable tensors are never swapped / recomputed."""
    g = synthetic.chain(5, sizes=[2, 2, 2, 2, 2])
    t = list(g.tensors)
    t[1] = type(t[1])(1, "a1", 2, 0, swappable=False, recomputable=False)
    t[3] = type(t[3])(3, "a3", 2, 2, recomputable=False)
    g2 = type(g)("chain-flags", g.ops, tuple(t))
    p = _unit(g2).with_budget(_unit(g2).min_feasible_bytes + 1)
    plan = _get(name).plan(p)
    validate(p, plan)
    assert plan.decisions[1] is Decision.KEEP


def test_unknown_name_lists_known():
    with pytest.raises(UnknownNameError) as e:
        planners.get("nope")
    for n in ("keep-all", "chen-sqrt", "dp-checkpoint", "capuchin"):
        assert n in str(e.value)


def test_duplicate_register_raises():
    with pytest.raises(SlackSwapError, match="already registered"):
        planners.register("keep-all", lambda: None)


def test_bad_parameters_raise():
    with pytest.raises(SlackSwapError, match="min_swap_bytes"):
        planners.get("swap-all", min_swap_bytes=-1)
    with pytest.raises(SlackSwapError, match="min_swap_bytes"):
        planners.get("capuchin", min_swap_bytes=1.5)
    with pytest.raises(SlackSwapError, match="max_rounds"):
        planners.get("dp-checkpoint", max_rounds=0)
    with pytest.raises(SlackSwapError, match="keep-all: foo: unknown parameter; allowed: none"):
        planners.get("keep-all", foo=1)
    with pytest.raises(SlackSwapError, match="swap-all: foo: unknown parameter; allowed: min_swap_bytes"):
        planners.get("swap-all", foo=1)


def test_function_planner_wraps_a_function():
    p = _problem("chain6")
    fp = FunctionPlanner("all-rec", lambda pr, d: {t: d for t in pr.planning_ids}, d=Decision.RECOMPUTE)
    plan = fp.plan(p)
    assert isinstance(plan, Plan) and plan.planner == "all-rec"
    assert set(plan.ids(Decision.RECOMPUTE)) == set(p.planning_ids)
