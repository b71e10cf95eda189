"""The milp planner on simple chains, recompute only: the checkpointing recursion as plan and proof
(``slackswap/planners/_revolve.py``, docs/milp.md, "Simple chains, recompute only")."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from slackswap import CostModel, Problem, bounds, planners, simulate
from slackswap.core.errors import SlackSwapError
from slackswap.core.graph import Graph
from slackswap.core.plan import Decision, Plan, Status
from slackswap.experiments.synthetic import (
    chain,
    chain_multilevel_optimum,
    multilevel_optimum,
    random_suite,
    residual_block,
)
from slackswap.planners import _revolve
from slackswap.planners.dp import griewank_formula, revolve_extra_forwards
from slackswap.planners.milp import chain as _chain_path


def _unit(n, budget=None, **kw):
    g = chain(n, **kw)
    base = Problem.from_graph(g, CostModel.unit(g))
    return base if budget is None else base.with_budget(budget)


# ---- the recursion against Revolve ----

def test_hand_checked_revolve_values():
    """Griewank's F(l, s) (every forward step, the first sweep included) by hand: one slot
    reverses l steps in l(l-1)/2 forwards; F(10, 2) = 20 (t = 3: C(5, 2) = 10, 3 * 10 - C(5, 3));
    F(4, 2) = 4; F(16, 3) = 33 (t = 3: C(6, 3) = 20 >= 16, 3 * 16 - C(6, 4) = 48 - 15).
    The recursion on Revolve's slot model counts re-runs, the first sweep (l - 1 forwards) free."""
    for n, s, f in [(10, 1, 45), (7, 1, 21), (10, 2, 20), (4, 2, 4), (16, 3, 33), (5, 4, 4)]:
        assert griewank_formula(n, s) == f
        assert _revolve.solve(_revolve.revolve_needs(n, s)).reruns == f - (n - 1), (n, s)


def test_the_recursion_is_revolves_at_every_length_and_slot_count_up_to_64():
    """One table on Revolve's slot model, 64 steps and 63 slots: its entry for the reversal of
    ``[c, e)`` with ``k`` tensors held below ``x_c`` is Revolve's F(e - c, s) for the slots left,
    ``s = 63 - k - (c >= 1)`` (``x_c`` takes one but ``x_0``): every length 1-64 at every slot
    count, against the recurrence (``revolve_extra_forwards``, itself equal to the closed form:
    ``tests/test_chen_dp.py``)."""
    N = 64
    F, _, K = _revolve._table(_revolve.revolve_needs(N, N - 1))
    checked = 0
    for k in range(K + 1):
        for c in range(N):
            slots = N - 1 - k - (c >= 1)
            for e in range(c + 1, N + 1):
                want = revolve_extra_forwards(e - c, slots) if slots >= 0 else math.inf
                assert F[k, c, e] == want, (k, c, e)
                checked += 1
    assert checked > 130_000
    # the first sweep is free: T(0, 0) + (n - 1) = F(n, s), at every budget from one table
    for n in (10, 33, 64):
        sols = _revolve.solve(_revolve.revolve_needs(n, n - 1), fewer=range(n - 1))
        assert [s.reruns + n - 1 for s in sols] == [griewank_formula(n, n - 1 - d) for d in range(n - 1)]


def _sandwich(n):
    """The simulator's optimum on ``chain(n)`` at ``b`` bytes lies between Revolve's with ``b - 1``
    slots (a relaxation: every backward step holds its input, the held tensors and, but at the
    ends, two gradients) and with ``b - 3`` (every Revolve schedule fits: a re-run holds its
    input, its output and one gradient). One table serves every budget."""
    base = _unit(n)
    xs = _revolve.simple_chain(base)
    top = n + 1
    budgets = range(top, base.min_feasible_bytes - 1, -1)
    table_nd = _revolve.problem_needs(base.with_budget(top), xs)
    sols = _revolve.solve(table_nd, fewer=[top - b for b in budgets])
    for b, sol in zip(budgets, sols, strict=True):
        lo = griewank_formula(n, b - 1) - (n - 1)
        hi = griewank_formula(n, b - 3) - (n - 1) if b > 3 else math.inf
        assert lo <= sol.reruns <= hi, (n, b, lo, sol.reruns, hi)
    return base, budgets, sols


@pytest.mark.parametrize("lo,hi", [(2, 13), (13, 19), (19, 23), (23, 25)])
def test_chains_up_to_24_lie_between_revolve_bounds_at_every_budget(lo, hi):
    for n in range(lo, hi):
        _sandwich(n)


@pytest.mark.parametrize("n", [25, 26, 27, 28, 29, 30, 31, 32, 40, 48, 56, 64])
def test_longer_chains_lie_between_revolve_bounds_and_plans_simulate_to_the_bound(n):
    """...and the plan of every third budget simulates to exactly the recursion's value (the
    milp planner checks this for every plan it returns)."""
    base, budgets, sols = _sandwich(n)
    xs = _revolve.simple_chain(base)
    for b, sol in list(zip(budgets, sols, strict=True))[::3]:
        p = base.with_budget(b)
        dec, hold = _revolve.chain_plan(p, xs, sol)
        r = simulate(p, Plan(dec, hold_points=hold), detail=False)
        assert r.fits and r.recompute_s == sol.reruns, (n, b)
        assert bool(hold) == sol.multilevel


def test_one_table_gives_the_same_optimum_as_a_solve_per_budget():
    base = _unit(24)
    xs = _revolve.simple_chain(base)
    many = _revolve.solve(_revolve.problem_needs(base.with_budget(25), xs), fewer=range(23))
    for d, sol in enumerate(many):
        one = _revolve.solve(_revolve.problem_needs(base.with_budget(25 - d), xs))
        assert (one.reruns, one.keep, one.stored) == (sol.reruns, sol.keep, sol.stored), d


# ---- the recursion against brute force over every plan the simulator accepts ----

@pytest.mark.parametrize("n", [4, 5, 6])
def test_unit_chains_equal_the_brute_force_optimum_at_every_budget(n):
    base = _unit(n)
    xs = _revolve.simple_chain(base)
    for b in range(base.min_feasible_bytes, base.keep_all_peak + 1):
        p = base.with_budget(b)
        assert _revolve.solve(_revolve.problem_needs(p, xs)).reruns == chain_multilevel_optimum(p), b


@pytest.mark.parametrize("seed", range(8))
def test_chains_with_workspaces_sizes_and_costs_equal_the_brute_force_optimum(seed):
    """Activations of 1-4 bytes (the state counts held bytes in units of their common divisor),
    a step input of 0-2 bytes, some workspaces, forward costs of 1-4 s per op: the recursion's
    optimum is the brute-force optimum over every KEEP/RECOMPUTE plan with any hold points, and
    its plan simulates to it."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 6))
    g0 = chain(n, sizes=[int(v) for v in rng.integers(1, 5, n)], input_bytes=int(rng.integers(0, 3)))
    ws = [int(rng.integers(0, 3)) * int(rng.random() < 0.4) for _ in range(n)]
    g = Graph(g0.name, tuple(replace(op, workspace_bytes=w) for op, w in zip(g0.ops, ws, strict=True)), g0.tensors)
    c = CostModel.unit(g)
    base = Problem.from_graph(g, replace(c, fwd_s=tuple(float(v) for v in rng.integers(1, 5, n))))
    xs = _revolve.simple_chain(base)
    assert xs is not None
    for b in range(base.min_feasible_bytes, base.keep_all_peak + 1):
        p = base.with_budget(b)
        sol = _revolve.solve(_revolve.problem_needs(p, xs))
        assert sol.reruns == chain_multilevel_optimum(p), b
        if math.isfinite(sol.reruns):
            dec, hold = _revolve.chain_plan(p, xs, sol)
            r = simulate(p, Plan(dec, hold_points=hold), detail=False)
            assert r.fits and r.recompute_s == pytest.approx(sol.reruns, rel=1e-12)


def test_sizes_with_a_common_divisor_count_in_its_units():
    """Sizes 2, 4, 6: the state counts 2-byte units; doubling every size and the budget (less the
    step input) gives the same optimum as sizes 1, 2, 3."""
    small = _unit(7, None, sizes=[1, 2, 3, 1, 2, 3, 1])
    big = _unit(7, None, sizes=[2, 4, 6, 2, 4, 6, 2])
    xs = _revolve.simple_chain(small)
    assert _revolve.problem_needs(big.with_budget(20), xs).slot == 2.0
    for b in range(small.min_feasible_bytes, small.keep_all_peak + 1):
        one = _revolve.solve(_revolve.problem_needs(small.with_budget(b), xs))
        two = _revolve.solve(_revolve.problem_needs(big.with_budget(2 * b), xs))
        assert one.reruns == two.reruns, b


def test_proven_optima_of_the_exact_milp_with_hold_points():
    """The exact MILP over every plan (``hold_points=True``) proved these optima on unit chains
    (benchmarks/README.md, "Multi-level recompute (Revolve)", bench_revolve.py --milp): the
    recursion finds the same."""
    proven = {10: [28, 9, 5, 4, 3, 2, 1], 20: [153, 42, 24, 18, 13, 12, 11]}
    for n, want in proven.items():
        base = _unit(n)
        xs = _revolve.simple_chain(base)
        got = [_revolve.solve(_revolve.problem_needs(base.with_budget(b), xs)).reruns for b in range(3, 10)]
        assert got == want, n


# ---- the milp planner ----

@pytest.mark.parametrize("n,fraction,reruns", [(32, 0.1, 435), (48, 0.25, 36), (48, 0.1, 212), (64, 0.1, 134)])
def test_milp_proves_checkmates_chain(n, fraction, reruns):
    """Checkmate's chain (unit costs, recompute only) at 25% and 10% of the peak: OPTIMAL, bound =
    objective = the simulated step; at n = 32 and 10% no single-level plan fits (the exact model
    alone said INFEASIBLE), the optimum is multi-level."""
    p = _unit(n, fraction)
    mp = planners.get("milp", allow_swap=False).plan(p)
    r = simulate(p, mp)
    assert mp.info.status is Status.OPTIMAL, mp.info.message
    assert r.fits and r.recompute_s == reruns
    assert mp.info.objective == mp.info.lower_bound == r.step_time_s == p.ideal_step_s + reruns
    assert mp.info.gap == 0.0 and "checkpointing recursion" in mp.info.message
    assert "any hold points" in mp.info.message
    assert r.step_time_s <= simulate(p, planners.get("dp-checkpoint").plan(p)).step_time_s


def test_milp_says_infeasible_only_when_the_recursion_proves_it():
    """chain(4) with a 2-byte workspace on op 0, at its 3-byte floor (keep-all needs 4): every
    re-run of op 0 holds its workspace, x_1 and a gradient, so no plan fits (brute force agrees);
    the floor looks at one step at a time and misses it."""
    g0 = chain(4)
    g = Graph(g0.name, (replace(g0.ops[0], workspace_bytes=2),) + g0.ops[1:], g0.tensors)
    p = Problem.from_graph(g, CostModel.unit(g), 3)
    assert p.min_feasible_bytes == 3 and chain_multilevel_optimum(p) == math.inf
    mp = planners.get("milp", allow_swap=False).plan(p)
    assert mp.info.status is Status.INFEASIBLE and "checkpointing recursion" in mp.info.message
    assert not simulate(p, mp).fits


def test_the_chain_path_applies_only_to_simple_chains_without_swap():
    p = _unit(5, 3)
    assert _revolve.simple_chain(p) is not None
    assert _chain_path.applies(p, allow_swap=False, allow_recompute=True)
    assert _chain_path.applies(p, allow_swap=True, allow_recompute=True) is None     # swaps allowed: the MILP
    assert _chain_path.applies(p, allow_swap=False, allow_recompute=False) is None
    off = planners.get("milp", allow_swap=False, chain_recursion=False).plan(p)
    assert "checkpointing recursion" not in off.info.message
    assert _revolve.simple_chain(_unit(6, 6, sizes=[1, 2, 1, 1, 1, 1])) is not None    # sizes may differ
    g = residual_block((2, 1, 3, 2))
    assert _revolve.simple_chain(Problem.from_graph(g, CostModel.unit(g))) is None


def test_no_budget_keeps_everything():
    p = _unit(300)
    mp = planners.get("milp", allow_swap=False).plan(p)
    assert mp.info.status is Status.OPTIMAL and mp.info.objective == p.ideal_step_s
    assert not mp.ids(Decision.RECOMPUTE)


def test_write_lp_builds_the_model_instead(tmp_path):
    p = _unit(4, 3)
    path = tmp_path / "chain.lp"
    mp = planners.get("milp", allow_swap=False, write_lp=str(path)).plan(p)
    assert path.exists() and "checkpointing recursion" not in mp.info.message


def test_no_swappable_tensor_is_recompute_only_too():
    g0 = chain(10)
    g = Graph(g0.name, g0.ops, tuple(replace(t, swappable=False) for t in g0.tensors))
    p = Problem.from_graph(g, CostModel.unit(g), 4)
    mp = planners.get("milp").plan(p)
    assert mp.info.status is Status.OPTIMAL and "checkpointing recursion" in mp.info.message


def test_the_exact_path_returns_a_fitting_multi_level_plan_not_infeasible():
    """chain(12) at 5 bytes with the recursion off: no single-level plan fits (the exact model
    proves it), dp-checkpoint's multi-level plan does: FEASIBLE with it, the bound below it, never
    INFEASIBLE (the recursion proves that plan optimal)."""
    p = _unit(12, 5)
    assert not simulate(p, planners.get("dp-checkpoint", multilevel=False).plan(p)).fits
    mp = planners.get("milp", allow_swap=False, chain_recursion=False).plan(p)
    r = simulate(p, mp)
    assert mp.info.status is Status.FEASIBLE, mp.info.message
    assert mp.hold_points and r.fits and mp.info.objective == r.step_time_s
    assert "no plan without hold points fits" in mp.info.message
    assert mp.info.lower_bound <= r.step_time_s
    best = planners.get("milp", allow_swap=False).plan(p)
    assert best.info.status is Status.OPTIMAL and best.info.objective == r.step_time_s


def test_chain_recursion_is_a_checked_bool():
    with pytest.raises(SlackSwapError, match="chain_recursion") as e:
        planners.get("milp", chain_recursion="sometimes")
    assert "\n" not in str(e.value)


# ---- allow_swap=False: bounds among the plans without SWAP ----

def test_the_no_swap_view_bounds_every_plan_without_swap_and_is_stronger():
    """``chain.without_swaps``: the capacity bound of the problem with every tensor unswappable
    is at most the best plan without SWAP, hold points included (``multilevel_optimum`` on that
    problem enumerates every KEEP/RECOMPUTE vector and the hold points of its regenerated
    tensors), and above the bound over every plan on most instances (swaps cannot free memory
    there: recomputation must)."""
    checked = stronger = 0
    for inst in random_suite(16, seed=3, max_tensors=5):
        p = inst.problem
        q = _chain_path.without_swaps(p)
        assert q.key == p.key and not any(t.swappable for t in q.graph.tensors)
        best, _ = multilevel_optimum(q, max_plans=500)
        if best is None:
            continue
        checked += 1
        cb = bounds.capacity_bound(q)
        assert cb <= best * (1 + 1e-9), p.graph.name
        stronger += cb > bounds.capacity_bound(p) * (1 + 1e-9)
    assert checked >= 4 and stronger >= 2, (checked, stronger)


def test_milp_without_swap_reports_the_no_swap_bound():
    """A random DAG (not a chain) beyond the exact path: the planner's certified bound is at least
    the no-swap capacity bound, above the every-plan one, and at most its plan's time."""
    inst = next(i for i in random_suite(24, seed=3) if i.shape == "random")
    p = inst.problem
    mp = planners.get("milp", allow_swap=False, max_exact_tensors=0, aggregate_nodes=0, improve_sims=0).plan(p)
    r = simulate(p, mp)
    assert r.fits and not mp.ids(Decision.SWAP), mp.info.message
    q = _chain_path.without_swaps(p)
    assert bounds.capacity_bound(q) * (1 - 1e-9) <= mp.info.lower_bound <= r.step_time_s * (1 + 1e-9)
    assert mp.info.lower_bound > bounds.capacity_bound(p) * (1 + 1e-9)
