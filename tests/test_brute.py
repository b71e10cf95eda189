"""The brute-force oracle: exhaustive, deterministic, refuses big problems, INFEASIBLE status."""

import itertools
import math

import pytest

from slackswap import CostModel, Decision, Plan, Problem, SlackSwapError, Status, planners, simulate
from slackswap.experiments.synthetic import chain, random_dag


def _problem(g, budget):
    return Problem.from_graph(g, CostModel.unit(g), budget_bytes=budget)


def test_brute_finds_the_best_of_all_plans():
    g = chain(4, sizes=[2, 2, 2, 2])
    p = _problem(g, 6)
    ids = p.planning_ids
    times = []
    for combo in itertools.product(list(Decision), repeat=len(ids)):
        r = simulate(p, Plan(dict(zip(ids, combo, strict=True))))
        if r.fits:
            times.append(r.step_time_s)
    bp = planners.get("brute").plan(p)
    assert bp.info.status is Status.OPTIMAL and bp.info.objective == min(times) == 9.0
    assert simulate(p, bp).step_time_s == 9.0
    assert bp.info.model_size["plans"] == 27


def test_brute_tie_break_prefers_keep():
    g = chain(4, sizes=[2, 2, 2, 2])
    bp = planners.get("brute").plan(_problem(g, math.inf))
    assert set(bp.decisions.values()) == {Decision.KEEP}


def test_brute_is_deterministic():
    p = _problem(random_dag(1, 6), 14)
    a, b = planners.get("brute").plan(p), planners.get("brute").plan(p)
    assert a.decisions == b.decisions


def test_brute_respects_flags():
    p = _problem(chain(4, sizes=[2, 2, 2, 2]), 6)
    bp = planners.get("brute", allow_swap=False).plan(p)
    assert Decision.SWAP not in bp.decisions.values()
    assert bp.info.model_size["plans"] == 8


def test_brute_refuses_big_problems():
    p = _problem(chain(14), math.inf)
    with pytest.raises(SlackSwapError, match="max_tensors"):
        planners.get("brute").plan(p)


def test_brute_infeasible_status():
    p = _problem(random_dag(2, 7), 18)
    bp = planners.get("brute").plan(p)
    assert bp.info.status is Status.INFEASIBLE and "no plan fits" in bp.info.message
