"""The compiled simulator (``timeline.simulate``) against the reference implementation
(``timeline.reference``) on many random plans: same feasibility and reason, same PlanError text,
peaks and bytes equal, times within 1e-12 relative, same events and memory curve, same issue
points; and the compiled schedule against ``compile_schedule``.

Plans are random KEEP / SWAP / RECOMPUTE decisions with random issue points, D2H orders and hold
points, on the 'tiny' preset, a one-layer Llama and the synthetic graphs, under budgets from
below the smallest fitting one to no limit, with full- and half-duplex copies."""

import dataclasses
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from slackswap import CostModel, Decision, Plan, Problem
from slackswap.core.errors import PlanError
from slackswap.experiments.synthetic import chain, mixed_dag, random_dag, residual_block
from slackswap.timeline import _core, compile_schedule, reference
from slackswap.timeline.simulate import _KINDS, issue_points, simulate

REL = 1e-12
TIMES = ("step_time_s", "compute_s", "recompute_s", "stall_fwd_s", "stall_bwd_s")


def _close(x: float, y: float) -> bool:
    return x == y or abs(x - y) <= REL * max(abs(x), abs(y))


def _outcome(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except PlanError as e:
        return e


def assert_same(p, plan, detail=True, schedule=None):
    """simulate and reference.simulate agree on ``plan`` (or raise the same PlanError)."""
    a = _outcome(simulate, p, plan, detail=detail, schedule=schedule)
    b = _outcome(reference.simulate, p, plan, detail=detail, schedule=schedule)
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert (type(a), str(a)) == (type(b), str(b))
        return a
    assert (a.feasible, a.reason, a.peak_bytes, a.budget_bytes, a.swapped_bytes, a.counts) == \
        (b.feasible, b.reason, b.peak_bytes, b.budget_bytes, b.swapped_bytes, b.counts)
    assert a.ideal_step_time_s == b.ideal_step_time_s
    for f in (*TIMES, "peak_bytes", "swapped_bytes"):   # the same Python types (printed the same)
        assert type(getattr(a, f)) is type(getattr(b, f)), f
    for f in TIMES:
        assert _close(getattr(a, f), getattr(b, f)), (f, getattr(a, f), getattr(b, f))
    assert len(a.events) == len(b.events)
    for x, y in zip(a.events, b.events, strict=True):
        assert (x.stream, x.label, x.kind, x.op, x.tensor) == (y.stream, y.label, y.kind, y.op, y.tensor)
        assert _close(x.start, y.start) and _close(x.end, y.end), (x, y)
    assert np.array_equal(a.memory_bytes, b.memory_bytes)
    assert a.memory_times.shape == b.memory_times.shape
    assert all(_close(x, y) for x, y in zip(a.memory_times.tolist(), b.memory_times.tolist(), strict=True))
    return a


def random_plan(rng, p, sched_of=compile_schedule):
    """Random decisions (allowed ones only), then for the swapped tensors random issue points on
    about half of them (sometimes one after the first use: a PlanError), sometimes a random D2H
    order, and random hold points on regenerated tensors."""
    g = p.graph
    decisions = {}
    for t in p.planning_ids:
        ten = g.tensors[t]
        allowed = [Decision.KEEP] + [Decision.SWAP] * ten.swappable + [Decision.RECOMPUTE] * ten.recomputable
        decisions[t] = allowed[rng.integers(len(allowed))]
    n = len(g.ops)
    hold = {}
    if rng.random() < 0.4:
        regen = [t.id for t in g.tensors if t.producer is not None
                 and decisions.get(t.id, Decision.RECOMPUTE) is Decision.RECOMPUTE]
        for t in regen:
            if rng.random() < 0.5:
                hold[int(t)] = int(rng.integers(0, n))
    sched = sched_of(g, decisions, hold)
    issue = {}
    if rng.random() < 0.5:
        for t, (u, _) in sched.swap_bwd.items():
            if rng.random() < 0.5:
                ju = sched.stage[u]
                lo = ju - 1 if rng.random() < 0.03 and ju > 0 else ju
                issue[t] = int(rng.integers(lo, n))
    order = None
    swaps = sorted(sched.swap_fwd)
    if swaps and rng.random() < 0.3:
        order = tuple(int(t) for t in rng.permutation(swaps))
    return Plan(decisions, issue_points=issue, d2h_order=order, hold_points=hold)


def _problems():
    """(problem, number of random plans) on small graphs of every shape."""
    out = []
    hw = "a100-80gb"
    tiny = Problem.build("tiny", hw, None)
    one = Problem.build("llama-7b", hw, None, layers=1)
    graphs = [chain(6, sizes=[2, 1, 3, 2, 2, 1]), residual_block((2, 1, 3, 2))]
    graphs += [random_dag(s, n_ops=7, max_bytes=5) for s in range(4)]
    graphs += [mixed_dag(s, n_ops=7) for s in range(6)]
    for i, g in enumerate(graphs):
        base = CostModel.unit(g)
        scale = (0.25, 0.5, 1.0, 2.0)[i % 4]
        costs = dataclasses.replace(base, d2h_s=tuple(x * scale for x in base.d2h_s),
                                    h2d_s=tuple(x * scale + 0.5 * (i % 2) for x in base.h2d_s))
        out.append((Problem.from_graph(g, costs), 40))
    out += [(tiny, 30), (one, 6)]
    return out


def _budgets(p, rng):
    """From below the smallest fitting budget (the floor) to above the keep-all peak, and none."""
    lo, hi = p.min_feasible_bytes, p.keep_all_peak
    fr = [0.0, 0.1, 0.3, 0.6, 1.0, 1.2, rng.random()]
    return [p.with_budget(None)] + [p.with_budget(max(lo, math.floor(lo + f * (hi - lo)))) for f in fr]


def test_random_plans_match_the_reference():
    rng = np.random.default_rng(0)
    checked = {"feasible": 0, "infeasible": 0, "error": 0}
    for p0, n_plans in _problems():
        variants = [p0, dataclasses.replace(p0, costs=dataclasses.replace(p0.costs, duplex_factor=0.4))]
        for v in variants:
            budgets = _budgets(v, rng)
            for _ in range(n_plans):
                plan = random_plan(rng, v)
                p = budgets[rng.integers(len(budgets))]
                r = assert_same(p, plan, detail=bool(rng.random() < 0.5))
                checked["error" if isinstance(r, Exception) else "feasible" if r.feasible else "infeasible"] += 1
    # the random plans reach every outcome
    assert min(checked.values()) >= 5, checked


def test_a_given_schedule_and_issue_points_match_the_reference():
    rng = np.random.default_rng(1)
    for p0, n_plans in _problems()[::3]:
        budgets = _budgets(p0, rng)
        for _ in range(n_plans // 2):
            plan = random_plan(rng, p0)
            p = budgets[rng.integers(len(budgets))]
            sched = compile_schedule(p.graph, plan.decisions, plan.hold_points)
            assert_same(p, plan, schedule=sched)
            a = _outcome(issue_points, p, plan)
            b = _outcome(reference.issue_points, p, plan)
            assert str(a) == str(b) if isinstance(b, Exception) else a == b


def test_compiled_schedule_matches_compile_schedule():
    """compile_core gives the steps, stages and fixed intervals (as a multiset) of compile_schedule."""
    rng = np.random.default_rng(2)
    for p, _ in _problems():
        ga = _core.graph_arrays(p.graph)
        for _ in range(10):
            plan = random_plan(rng, p)
            s = compile_schedule(p.graph, plan.decisions, plan.hold_points)
            dec = np.zeros(len(p.graph.tensors), np.int64)
            for t, d in plan.decisions.items():
                dec[t] = _core.DECISION_CODE[d]
            hold = np.full(len(p.graph.tensors), ga.n - 1, np.int64)
            for t, k in plan.hold_points.items():
                hold[t] = k
            _, enc_dec, enc_hold = _core.encode(ga, plan.decisions, plan.hold_points)   # what simulate reads
            assert np.array_equal(enc_dec, dec) and np.array_equal(enc_hold, hold)
            (kind, op, stage, need_pos, stage_first, iva, ivf, ivb, first_use, last_use,
             hq) = _core.compile_core(ga.n, ga.producer, ga.bytes, ga.requires_grad, ga.last_fwd,
                                      ga.in_ptr, ga.in_idx, ga.out_ptr, ga.out_idx, ga.sv_ptr,
                                      ga.sv_idx, ga.ws, dec, hold)
            assert [_KINDS[k] for k in kind] == s.kinds
            assert op.tolist() == s.ops and stage.tolist() == s.stage
            assert stage_first.tolist() == [s.stage_first_step[k] for k in range(ga.n)]
            assert sorted(zip(iva.tolist(), ivf.tolist(), ivb.tolist(), strict=True)) == \
                sorted(iv[:3] for iv in s.intervals)
            assert hq.tolist() == s.h2d_queue()
            assert {t: (first_use[t], last_use[t]) for t in s.swap_bwd} == s.swap_bwd
            pos = {t: i for i, t in enumerate(hq.tolist())}
            assert need_pos.tolist() == [max((pos[t] for t in u), default=-1) for u in s.uses]


def _schedule_memory(p, dec) -> list[float]:
    """The bound ``memory_bound`` gives, summed from ``compile_schedule``'s schedule step by step:
    the fixed lives, then each swapped tensor over its forward life and its backward uses."""
    sched = compile_schedule(p.graph, dec)
    mem = [float(x) for x in sched.static_memory()]
    for t, (a, b) in (*sched.swap_fwd.items(), *sched.swap_bwd.items()):
        for s in range(a, b + 1):
            mem[s] += p.graph.tensors[t].bytes
    return mem


def test_memory_bound_equals_the_compiled_schedules_sum():
    """``memory_bound`` (the searches' prefilter, on the core's schedule) gives, step by step, the
    bytes of ``compile_schedule``'s schedule (``_schedule_memory``) on random decisions."""
    from slackswap.timeline.simulate import memory_bound

    rng = np.random.default_rng(3)
    swapped = 0
    for p, _ in _problems():
        for _ in range(10):
            dec = dict(random_plan(rng, p).decisions)
            swapped += any(d is Decision.SWAP for d in dec.values())
            a = memory_bound(p, dec)
            assert a.dtype == np.float64 and a.tolist() == _schedule_memory(p, dec)
    assert swapped >= 20


def test_bad_plans_raise_the_reference_messages():
    p = Problem.build("tiny", "a100-80gb", 0.6)
    swaps = {t: Decision.SWAP for t in p.planning_ids}
    sched = compile_schedule(p.graph, swaps)
    t = max(sched.swap_bwd, key=lambda t: sched.stage[sched.swap_bwd[t][0]])
    ju = sched.stage[sched.swap_bwd[t][0]]
    assert ju > 0
    late = Plan(swaps, issue_points={t: ju - 1})
    with pytest.raises(PlanError, match="is after the first backward use") as e:
        simulate(p, late)
    with pytest.raises(PlanError) as r:
        reference.simulate(p, late)
    assert str(e.value) == str(r.value)
    for bad in (Plan(swaps, d2h_order=(t,)), Plan(swaps, hold_points={t: 0}),
                Plan({**swaps, t: Decision.KEEP}, issue_points={t: ju})):
        assert isinstance(assert_same(p, bad), PlanError)
    # the last-produced copy first: every other copy waits behind it
    assert_same(p, Plan(swaps, d2h_order=tuple(reversed(sched.d2h_queue(p.graph)))))


_NO_JIT = """
import numpy as np, sys
sys.path.insert(0, {tests!r})
from test_simulate_core import _problems, _budgets, random_plan, assert_same
from slackswap.timeline import _core
assert not hasattr(_core.time_core, "py_func"), "the core is still compiled"
rng = np.random.default_rng(3)
for p0, _ in _problems()[:8]:
    budgets = _budgets(p0, rng)
    for _ in range(6):
        assert_same(budgets[rng.integers(len(budgets))], random_plan(rng, p0))
print("ok")
"""


def test_the_core_runs_as_python_with_numba_jit_disabled():
    """NUMBA_DISABLE_JIT=1 (for debugging the core) runs the same code as Python: same results."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    code = _NO_JIT.format(tests=os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
