"""Hand-computed unit-cost timelines (docs/timeline.md, "Worked example (unit costs)" and more), event by event."""

import dataclasses
import math

import pytest

from slackswap import CostModel, Decision, Graph, Op, Plan, PlanError, Problem, Tensor, simulate
from slackswap.experiments.synthetic import chain, residual_block

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE


def _problem(g, budget=math.inf, **kw):
    return Problem.from_graph(g, CostModel.unit(g, **kw), budget_bytes=budget)


def _plan(g, decisions, **kw):
    ids = [t.id for t in g.planning_tensors()]
    if isinstance(decisions, Decision):
        decisions = [decisions] * len(ids)
    return Plan(dict(zip(ids, decisions, strict=True)), **kw)


def _events(r):
    return [(e.stream, e.label, e.start, e.end) for e in r.events]


def test_chain_keep_all_is_ideal():
    g = chain(4, sizes=[2, 2, 2, 2])
    p = _problem(g)
    r = simulate(p, _plan(g, K))
    assert p.keep_all_peak == 8 and p.min_feasible_bytes == 6
    assert r.step_time_s == r.ideal_step_time_s == 8.0
    assert r.throughput_ratio == 1.0 and r.stall_s == 0 and r.recompute_s == 0
    assert [(e.label, e.start, e.end) for e in r.events if e.stream == "compute"] == [
        ("fwd:op0", 0, 1), ("fwd:op1", 1, 2), ("fwd:op2", 2, 3), ("fwd:op3", 3, 4),
        ("bwd:op3", 4, 5), ("bwd:op2", 5, 6), ("bwd:op1", 6, 7), ("bwd:op0", 7, 8),
        ("opt:optimizer", 8, 8)]
    assert r.peak_bytes == 8


def test_chain_recompute_all_rebuilds_once():
    g = chain(4, sizes=[2, 2, 2, 2])
    r = simulate(_problem(g), _plan(g, R))
    assert [(e.label, e.start, e.end) for e in r.events if e.stream == "compute"] == [
        ("fwd:op0", 0, 1), ("fwd:op1", 1, 2), ("fwd:op2", 2, 3), ("fwd:op3", 3, 4),
        ("rec:op0", 4, 5), ("rec:op1", 5, 6), ("rec:op2", 6, 7),
        ("bwd:op3", 7, 8), ("bwd:op2", 8, 9), ("bwd:op1", 9, 10), ("bwd:op0", 10, 11),
        ("opt:optimizer", 11, 11)]
    assert r.recompute_s == 3 and r.step_time_s == 11 and r.stall_s == 0
    # forward holds at most two activations (each freed after its consumer); backward rebuilds
    # a1..a3 and adds the gradient of a3: 8 bytes
    assert r.peak_bytes == 8


def test_chain_swap_all_worked_example():
    """The table in docs/timeline.md, "Worked example (unit costs)"."""
    g = chain(4, sizes=[2, 2, 2, 2])
    r = simulate(_problem(g, budget=6), _plan(g, S))
    assert _events(r) == [
        ("compute", "fwd:op0", 0, 1), ("compute", "fwd:op1", 1, 2), ("compute", "fwd:op2", 2, 3),
        ("compute", "fwd:op3", 3, 4), ("compute", "bwd:op3", 9, 10), ("compute", "bwd:op2", 11, 12),
        ("compute", "bwd:op1", 14, 15), ("compute", "bwd:op0", 15, 16),
        ("compute", "opt:optimizer", 16, 16),
        ("d2h", "d2h:a1", 1, 3), ("d2h", "d2h:a2", 3, 5), ("d2h", "d2h:a3", 5, 7),
        ("h2d", "h2d:a3", 7, 9), ("h2d", "h2d:a2", 9, 11), ("h2d", "h2d:a1", 12, 14)]
    assert r.step_time_s == 16 and r.throughput_ratio == 0.5
    assert r.peak_bytes == 6 and r.fits
    assert r.stall_fwd_s == 0 and r.stall_bwd_s == 8
    assert r.swapped_bytes == 6


def _stats_chain():
    """op0 -> a1 (4 B, statistics: no gradient) -> op1 -> a2 -> op2 -> a3 -> op3 -> a4 (1 B each);
    op i saves its input."""
    ts = [Tensor(0, "in", 0, None, kind="input"), Tensor(1, "a1", 4, 0, kind="stats"),
          Tensor(2, "a2", 1, 1), Tensor(3, "a3", 1, 2), Tensor(4, "a4", 1, 3)]
    ops = [Op(i, f"op{i}", i, "matmul", inputs=(i,), outputs=(i + 1,), saves=(i,)) for i in range(4)]
    return Graph("stats-chain", tuple(ops), tuple(ts))


def test_forward_waits_for_d2h_and_prefetch_waits_for_room():
    g = _stats_chain()
    p = _problem(g, budget=5)
    assert p.keep_all_peak == 7 and p.min_feasible_bytes == 5
    r = simulate(p, Plan({1: S, 2: K, 3: R}))
    comp = {e.label: (e.start, e.end) for e in r.events}
    assert comp["d2h:a1"] == (1, 5)
    # op2 would hold a1 (pending) + a2 + a3 = 6 > 5: it waits for a1's copy to end at 5
    assert comp["fwd:op2"] == (5, 6) and r.stall_fwd_s == 3
    assert comp["rec:op2"] == (7, 8) and comp["bwd:op3"] == (8, 9) and comp["bwd:op2"] == (9, 10)
    # a1 (4 B) only fits from stage 1 on: its copy starts when the compute stream reaches bwd op1
    assert comp["h2d:a1"] == (10, 14) and comp["bwd:op1"] == (14, 15) and comp["bwd:op0"] == (15, 16)
    assert r.stall_bwd_s == 4 and r.step_time_s == 16 and r.peak_bytes == 5 and r.fits
    # an explicit earlier issue point does not fit the budget: the plan becomes infeasible
    r2 = simulate(p, Plan({1: S, 2: K, 3: R}, issue_points={1: 3}))
    assert not r2.feasible and "rec op2) needs 6 bytes" in r2.reason
    assert r2.peak_bytes == 6 and not r2.fits
    # with room to spare the copy is issued at the start of the backward pass
    r3 = simulate(p.with_budget(None), Plan({1: S, 2: K, 3: R}))
    comp3 = {e.label: (e.start, e.end) for e in r3.events}
    assert comp3["fwd:op2"] == (2, 3) and comp3["h2d:a1"] == (5, 9)
    assert comp3["bwd:op1"] == (9, 10) and r3.step_time_s == 11 and r3.stall_bwd_s == 2


def test_infeasible_is_a_result_naming_the_step():
    g = chain(4, sizes=[2, 2, 2, 2])
    r = simulate(_problem(g, budget=6), _plan(g, R))
    assert not r.feasible and not r.fits and math.isinf(r.step_time_s)
    assert "bwd op3" in r.reason and "8 bytes" in r.reason and r.throughput_ratio == 0.0
    # the peak it reaches: the 8 bytes bwd op3 needs, over the 6-byte budget (docs/timeline.md)
    assert r.peak_bytes == 8 > r.budget_bytes and r.summary()["fits"] is False
    from slackswap.timeline import reference
    assert reference.simulate(_problem(g, budget=6), _plan(g, R)).peak_bytes == 8


def test_residual_block_mixed_plan():
    """x (1 B) kept, h (2 B) recomputed, z (4 B) swapped; y (3 B) is never saved."""
    g = residual_block((1, 2, 3, 4))
    p = _problem(g)
    r = simulate(p, Plan({1: K, 2: R, 4: S}))
    comp = {e.label: (e.start, e.end) for e in r.events}
    assert comp["d2h:z"] == (4, 8)       # producer add ends at 4; 4 bytes at 1 s/B
    assert comp["h2d:z"] == (8, 12)      # issued at the start of backward (stage 4), after its D2H
    assert comp["bwd:loss"] == (12, 13)  # stall 12 - 5 = 7 s waiting for z
    assert comp["bwd:add"] == (13, 14)
    assert comp["rec:f"] == (14, 15)     # h rebuilt from the kept x just before g's backward
    assert comp["bwd:g"] == (15, 16)
    assert comp["bwd:f"] == (16, 17) and comp["bwd:embed"] == (17, 18)
    assert r.step_time_s == 18 and r.recompute_s == 1 and r.stall_bwd_s == 7
    # peak 9: backward of loss holds x, z and grad z (1 + 4 + 4); backward of add holds x,
    # grad z, grad x and grad y (1 + 4 + 1 + 3); forward never holds more than 8 (x, y, z)
    assert r.peak_bytes == 9


def test_plan_errors_are_clear():
    g = chain(3)
    p = _problem(g)
    with pytest.raises(PlanError, match="no decision"):
        simulate(p, Plan({1: K}))
    with pytest.raises(PlanError, match="not planning tensors"):
        simulate(p, Plan({1: K, 2: K, 3: K}))
    with pytest.raises(PlanError, match="unknown decision 'maybe'"):
        Plan({1: "maybe"})
    other = chain(3, sizes=[5, 5, 5], name="other")
    foreign = Plan({1: K, 2: K}, problem_key=_problem(other).key)
    with pytest.raises(PlanError, match="another problem"):
        simulate(p, foreign)
    with pytest.raises(PlanError, match="issue_points"):
        simulate(p, Plan({1: S, 2: K}, issue_points={1: 0}))  # first use of a1 is stage 1


def test_plan_json_round_trip(tmp_path):
    g = chain(4, sizes=[2, 2, 2, 2])
    p = _problem(g, budget=6)
    plan = Plan({1: S, 2: R, 3: K}, issue_points={1: 2}, planner="manual", problem_key=p.key)
    f = tmp_path / "plan.json"
    plan.save(f)
    back = Plan.load(f)
    assert back.decisions == plan.decisions and back.issue_points == plan.issue_points
    assert simulate(p, back).step_time_s == simulate(p, plan).step_time_s
    f.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        Plan.load(f)
    f.write_text('{"schema_version": 99, "decisions": {}}')
    with pytest.raises(PlanError, match="schema_version"):
        Plan.load(f)
    f.write_text('{"schema_version": 1, "decisions": {"1": "keep"}, "colour": 3}')
    with pytest.raises(PlanError, match="plan.json: colour: unknown key; allowed: d2h_order"):
        Plan.load(f)
    with pytest.raises(PlanError, match="does not exist"):
        Plan.load(tmp_path / "missing.json")


def test_chrome_trace_and_table():
    g = chain(4, sizes=[2, 2, 2, 2])
    r = simulate(_problem(g, budget=6), _plan(g, S))
    tr = r.to_chrome_trace()
    spans = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(r.events)
    assert {e["tid"] for e in spans} == {1, 2, 3}
    df = r.op_table()
    assert len(df) == len(r.events) and set(df.stream) == {"compute", "d2h", "h2d"}


def _tie_graph():
    """op1 reads (a, b) and is re-run for op2, which saves (b, r): a and b are both first read by
    the re-run, so they come back in op1's input order, a (10 B) before b."""
    T = [Tensor(0, "b", 1, 0), Tensor(1, "a", 10, 0), Tensor(2, "r", 1, 1)]
    ops = [Op(0, "op0", None, "matmul", outputs=(0, 1)),
           Op(1, "op1", None, "matmul", inputs=(1, 0), outputs=(2,), saves=(1,)),
           Op(2, "op2", None, "matmul", inputs=(2, 0), saves=(0, 2))]
    return Graph("tie", tuple(ops), tuple(T))


def test_h2d_tie_follows_the_order_the_first_reader_lists_its_inputs():
    g = _tie_graph()
    p = _problem(g)
    plan = Plan({0: S, 1: S, 2: R})
    r = simulate(p, plan)
    ev = {e.label: (e.start, e.end) for e in r.events}
    # d2h b 1-2, d2h a 2-12; h2d a 12-22, then h2d b 22-23; rec op1 waits for both
    assert ev["h2d:a"] == (12, 22) and ev["h2d:b"] == (22, 23)
    assert ev["rec:op1"] == (23, 24) and r.step_time_s == 27
    # the exact MILP, with the decisions fixed, times the same plan identically
    from slackswap.mip.backends import solve_highs
    from slackswap.mip.formulation import build

    built = build(p)
    m = built.model
    for t, d in plan.decisions.items():
        for dd, cols in ((K, built.keep), (S, built.swap), (R, built.rec)):
            if t in cols:
                m.lb[cols[t]] = m.ub[cols[t]] = float(d is dd)
    res = solve_highs(m)
    assert res.status == "optimal" and math.isclose(res.objective * built.tau, r.step_time_s, rel_tol=1e-9)


def test_partial_issue_points_count_each_fixed_copy_once():
    """Swap-all chain of "Worked example (unit costs)" at 6 bytes: defaults a3 -> stage 3, a2 -> 3, a1 -> 1. Fixing a3
    (or a2) at that stage leaves the other copies where they were: 16 s as with no issue points."""
    g = chain(4, sizes=[2, 2, 2, 2])
    p = _problem(g, budget=6)
    plan = _plan(g, S)
    fixes = ({3: 3}, {2: 3}, {1: 1}, {1: 1, 3: 3})
    assert simulate(p, plan).step_time_s == 16
    assert [simulate(p, _plan(g, S, issue_points=f)).step_time_s for f in fixes] == [16] * 4

    from slackswap.timeline import issue_points

    assert issue_points(p, plan) == {1: 1, 2: 3, 3: 3}
    assert all(issue_points(p, _plan(g, S, issue_points=f)) == {1: 1, 2: 3, 3: 3} for f in fixes)


def test_h2d_copy_starts_at_the_ready_time_of_its_issue_step():
    """docs/timeline.md 4: an H2D copy starts no earlier than the ready time of the first step of
    its issue stage (reached, then done waiting for memory), never merely when it is reached."""
    from slackswap.experiments.synthetic import mixed_dag
    from slackswap.timeline import issue_points

    g = mixed_dag(4220, 7)
    c = CostModel.unit(g)
    c = dataclasses.replace(c, d2h_s=tuple(2 * v for v in c.d2h_s), h2d_s=tuple(2 * v for v in c.h2d_s))
    p = Problem.from_graph(g, c, budget_bytes=17)
    plan = Plan({2: S, 3: S, 4: S, 6: K, 8: K})
    assert issue_points(p, plan)[2] == 5
    r = simulate(p, plan)
    ev = {e.label: (e.start, e.end) for e in r.events}
    # bwd op5 (first step of stage 5) is reached at 9, when bwd op6 ends, but holds 18 bytes
    # until t4's source is released at 10 (d2h t4 8-10): it is ready at 10, and so is t2's copy
    assert ev["bwd:op6"][1] == 9 and ev["d2h:t4"] == (8, 10)
    assert ev["bwd:op5"][0] == 10 and ev["h2d:t2"] == (10, 14)
    assert r.peak_bytes <= 17 and r.step_time_s == 21


def test_docs_state_one_h2d_start_rule():
    """The rule for when an H2D copy may start is stated once (docs/timeline.md, "Memory and the budget", the
    ready time) and used by name in "Backward: recompute, prefetch, gradients" and in docs/milp.md."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    tl, milp = (docs / "timeline.md").read_text(), (docs / "milp.md").read_text()
    assert "reaches the first step" not in tl
    assert "ready time of the first step of t's issue stage (\"Memory and the budget\")" in tl
    assert len(re.findall(r"The step's \*\*ready time\*\*", tl)) == 1
    assert "h2d_start[t] >= ready[first active step of stage k]" in milp
    assert "`ready[s]` (the\n**ready time** of step s, docs/timeline.md, \"Memory and the budget\"" in milp
