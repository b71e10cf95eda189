"""Simulator invariants on random plans over random small graphs (hypothesis)."""

import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slackswap import CostModel, Decision, Graph, Plan, Problem, simulate
from slackswap.experiments.synthetic import random_dag

DEC = [Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE]


@st.composite
def cases(draw):
    g = random_dag(draw(st.integers(0, 10_000)), n_ops=draw(st.integers(2, 7)), max_bytes=5)
    ids = [t.id for t in g.planning_tensors()]
    decisions = {t: draw(st.sampled_from(DEC)) for t in ids}
    scale = draw(st.sampled_from([0.25, 0.5, 1.0, 2.0]))
    base = CostModel.unit(g)
    costs = dataclasses.replace(base, d2h_s=tuple(x * scale for x in base.d2h_s),
                                h2d_s=tuple(x * scale for x in base.h2d_s))
    p0 = Problem.from_graph(g, costs)
    frac = draw(st.floats(0.0, 1.2))
    lo, hi = p0.min_feasible_bytes, p0.keep_all_peak
    budget = math.floor(lo + frac * (hi - lo)) if hi > lo else hi
    return p0.with_budget(max(budget, lo)), Plan(decisions)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_invariants(case):
    p, plan = case
    r = simulate(p, plan)
    if not r.feasible:
        assert r.reason and math.isinf(r.step_time_s)
        return
    assert r.fits and r.peak_bytes <= p.budget_bytes
    assert np.all(r.memory_bytes >= 0) and r.memory_bytes[-1] == 0
    assert np.all(np.diff(r.memory_times) >= 0)
    for stream in ("compute", "d2h", "h2d"):
        ev = sorted((e for e in r.events if e.stream == stream), key=lambda e: (e.start, e.end))
        for a, b in zip(ev, ev[1:], strict=False):
            assert b.start >= a.end - 1e-9, (stream, a, b)
        assert all(e.end >= e.start for e in ev)
    # every step that needs a swapped tensor starts after its copy back has ended
    from slackswap.timeline import compile_schedule

    sched = compile_schedule(p.graph, plan.decisions)
    h2d_end = {e.tensor: e.end for e in r.events if e.stream == "h2d"}
    d2h_end = {e.tensor: e.end for e in r.events if e.stream == "d2h"}
    compute = [e for e in r.events if e.stream == "compute"]
    assert len(compute) == sched.n_steps
    for s, uses in enumerate(sched.uses):
        for t in uses:
            assert compute[s].start >= h2d_end[t] - 1e-9
    for t in h2d_end:
        assert h2d_end[t] - p.costs.h2d_s[t] >= d2h_end[t] - 1e-9
    assert r.step_time_s >= p.ideal_step_s - 1e-9
    assert math.isclose(r.step_time_s, r.compute_s + r.recompute_s + r.stall_s, rel_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 7))
def test_keep_all_unlimited_is_ideal(seed, n):
    g = random_dag(seed, n_ops=n)
    p = Problem.from_graph(g, CostModel.unit(g, bwd_factor=2.0))
    r = simulate(p, Plan({t.id: Decision.KEEP for t in g.planning_tensors()}))
    assert r.step_time_s == p.ideal_step_s and r.throughput_ratio == 1.0
    assert r.peak_bytes == p.keep_all_peak


@settings(max_examples=100, deadline=None)
@given(cases(), st.sampled_from([0.1, 0.5, 0.9]))
def test_more_bandwidth_never_slower(case, factor):
    p, plan = case
    faster = dataclasses.replace(p.costs, d2h_s=tuple(x * factor for x in p.costs.d2h_s),
                                 h2d_s=tuple(x * factor for x in p.costs.h2d_s))
    q = Problem.from_graph(p.graph, faster, budget_bytes=p.budget_bytes)
    slow, fast = simulate(p, plan, detail=False), simulate(q, plan, detail=False)
    if slow.feasible:
        assert fast.feasible and fast.step_time_s <= slow.step_time_s + 1e-9


def _renumber(g: Graph, perm: list[int]) -> Graph:
    """Tensor ``t`` becomes ``perm[t]``; op order and the order inside op fields are kept."""
    m = perm.__getitem__
    tensors = [None] * len(g.tensors)
    for t in g.tensors:
        tensors[m(t.id)] = dataclasses.replace(t, id=m(t.id))
    ops = [dataclasses.replace(op, inputs=tuple(map(m, op.inputs)), outputs=tuple(map(m, op.outputs)),
                               saves=tuple(map(m, op.saves))) for op in g.ops]
    return Graph(g.name, tuple(ops), tuple(tensors))


@settings(max_examples=80, deadline=None)
@given(cases(), st.randoms(use_true_random=False))
def test_renumbering_changes_nothing(case, rnd):
    p, plan = case
    perm = list(range(len(p.graph.tensors)))
    rnd.shuffle(perm)
    g2 = _renumber(p.graph, perm)
    c = p.costs
    inv = {perm[i]: i for i in range(len(perm))}
    c2 = dataclasses.replace(c, d2h_s=tuple(c.d2h_s[inv[i]] for i in range(len(perm))),
                             h2d_s=tuple(c.h2d_s[inv[i]] for i in range(len(perm))))
    p2 = Problem.from_graph(g2, c2, budget_bytes=p.budget_bytes)
    plan2 = Plan({perm[t]: d for t, d in plan.decisions.items()})
    a, b = simulate(p, plan, detail=False), simulate(p2, plan2, detail=False)
    assert (a.feasible, a.step_time_s, a.peak_bytes, a.stall_s) == (b.feasible, b.step_time_s, b.peak_bytes, b.stall_s)
    assert p.keep_all_peak == p2.keep_all_peak and p.min_feasible_bytes == p2.min_feasible_bytes


@settings(max_examples=150, deadline=None, derandomize=True)
@given(cases(), st.randoms(use_true_random=False))
def test_fixing_some_issue_points_at_their_default_changes_nothing(case, rnd):
    """Partial issue points (docs/timeline.md 3): a plan giving some copies exactly the stage the
    default would choose is simulated exactly like the plan giving none."""
    from slackswap.timeline import issue_points

    p, plan = case
    auto = issue_points(p, plan)
    some = {t: k for t, k in auto.items() if rnd.random() < 0.5}
    part = dataclasses.replace(plan, issue_points=some)
    assert issue_points(p, part) == auto
    a, b = simulate(p, plan), simulate(p, part)
    assert (a.feasible, a.step_time_s, a.peak_bytes, a.stall_s) == (b.feasible, b.step_time_s, b.peak_bytes, b.stall_s)
    assert a.events == b.events


@settings(max_examples=100, deadline=None)
@given(cases())
def test_a_given_schedule_gives_the_same_result(case):
    """``simulate(..., schedule=...)`` (a search that compiled the schedule to prune by memory
    passes it on) gives exactly the result of compiling it inside."""
    from slackswap.timeline import compile_schedule

    p, plan = case
    sched = compile_schedule(p.graph, plan.decisions, plan.hold_points)
    for detail in (False, True):
        a, b = simulate(p, plan, detail=detail, schedule=sched), simulate(p, plan, detail=detail)
        for f in dataclasses.fields(a):
            if not f.compare:   # the run's copies, compared through what they give: the host peak
                continue
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y or (x != x and y != y), f.name
        assert a.host_peak_bytes == b.host_peak_bytes


def test_a_schedule_of_another_graph_is_refused():
    import pytest

    from slackswap.core.errors import PlanError
    from slackswap.timeline import compile_schedule

    p = Problem.build("tiny", "a100-80gb", 0.7)
    other = Problem.build("tiny", "a100-80gb", 0.7, layers=1)
    sched = compile_schedule(other.graph, {t: Decision.KEEP for t in other.planning_ids})
    with pytest.raises(PlanError, match="not a schedule of 'tiny'"):
        simulate(p, Plan({t: Decision.KEEP for t in p.planning_ids}), schedule=sched)
