"""``apply(..., hold_budget=True)``: the host waits, before each step, for the device-to-host copies
whose sources the simulator releases by that step (docs/executor.md, "Holding the simulator's
budget on the device"). On CPU only the bookkeeping runs: which copies, at which step, and where in
the real step the executor waits for them; the CUDA tests (skipped without a GPU) measure the peak."""

import copy
import math

import pytest

from slackswap import CostModel, Decision, Plan, Problem, planners, simulate
from slackswap.core.errors import ConfigError, ParameterError
from slackswap.experiments.synthetic import chain
from slackswap.timeline.schedule import compile_schedule
from slackswap.torch import _ledger

torch = pytest.importorskip("torch")

from exec_models import run_and_compare  # noqa: E402

from slackswap.torch import apply, run_step, trace  # noqa: E402
from slackswap.torch.executor import Execution  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread (conftest.py)

S = Decision.SWAP


def test_hand_computed_chain_waits_for_its_copies():
    """docs/timeline.md, "Worked example (unit costs)": swap-all on the 4-op chain of 2-byte
    tensors (a1 = 1, a2 = 2, a3 = 3) at a 6-byte budget. D2H copies: a1 1-3, a2 3-5, a3 5-7.
    Step 3 (fwd op3) is reached at 3: a1's copy ended, released. Step 4 (bwd op3) is reached at
    4 with a2 and a3 pending (4 bytes) and the copies back of a3 and a2 (both issued at stage 3)
    and the gradient of a3 (6 bytes): 10 > 6, so it waits for a2 (8 bytes, still over) and a3
    (6 bytes). Nothing is pending after that."""
    g = chain(4, sizes=[2, 2, 2, 2])
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6)
    plan = Plan({t.id: S for t in g.planning_tensors()})
    issue = _ledger.resolved_issue_points(p, plan)
    assert issue == {1: 1, 2: 3, 3: 3}
    h = _ledger.hold_schedule(p, plan, issue)
    assert h.releases == {3: (1,), 4: (2, 3)}
    assert h.waited == {4: (2, 3)}
    assert h.waits() == [(3, 1), (4, 2), (4, 3)]
    assert h.fits and h.sim_peak == 6 and h.accounted_peak == 6


def test_a_plan_over_its_budget_is_followed_without_a_limit():
    """Swap a3 only, keep a1 and a2, at 6 bytes: fwd op3 needs 8 bytes, the plan does not fit.
    Without a limit nothing waits: a3's copy (3-5) has ended when step 5 (bwd op2) is reached
    at 5, where it is released."""
    g = chain(4, sizes=[2, 2, 2, 2])
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6)
    plan = Plan({1: Decision.KEEP, 2: Decision.KEEP, 3: S})
    assert not simulate(p, plan).feasible
    issue = _ledger.resolved_issue_points(p.with_budget(None), plan)
    h = _ledger.hold_schedule(p, plan, issue)
    assert not h.fits and h.waited == {} and h.releases == {5: (3,)}
    assert h.sim_peak == simulate(p.with_budget(None), plan).peak_bytes


def _mlp():
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(64, 64), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(64, 1))
    x = (torch.randn(32, 64, generator=torch.Generator().manual_seed(3)),)
    return net, x


@pytest.fixture(scope="module")
def mlp():
    net, x = _mlp()
    graph = trace(net, x, device="cpu")
    ref = copy.deepcopy(net)
    ref(*x).sum().backward()
    return net, x, graph, [p.grad for p in ref.parameters()]


def _swap_all(graph, budget):
    plan = Plan({t.id: S for t in graph.planning_tensors()})
    return plan, Problem.build(graph, "a100-80gb", budget=budget)


def test_releases_follow_the_simulators_rule(mlp):
    """Each release is one the simulator makes: a natural one had its copy ended when the step was
    reached, a waited one had not and ended before the step started; after the releases every
    step fits; each source is released once, after its last forward use."""
    _, _, graph, _ = mlp
    plan, p = _swap_all(graph, 0.5)
    issue = _ledger.resolved_issue_points(p, plan)
    h = _ledger.hold_schedule(p, plan, issue)
    r = simulate(p, Plan(plan.decisions, issue_points=issue))
    assert r.fits and h.fits and h.waited and set(h.waited) < set(h.releases)
    steps = [e for e in r.events if e.stream == "compute"]
    d2h_end = {e.tensor: e.end for e in r.events if e.stream == "d2h"}
    sched = compile_schedule(graph, plan.decisions)
    seen = [t for _, t in h.waits()]
    assert len(seen) == len(set(seen))
    for s, ts in h.releases.items():
        reached = steps[s - 1].end
        for t in ts:
            assert sched.swap_fwd[t][1] < s
            if t in h.waited.get(s, ()):
                assert reached < d2h_end[t] <= steps[s].start
            else:
                assert d2h_end[t] <= reached
    assert h.accounted_peak <= p.budget_bytes and h.sim_peak == r.peak_bytes


def test_executor_waits_where_the_simulator_releases(mlp, monkeypatch):
    """The wait hook is called once per release, in the simulator's order, at the executor's
    last point before the step: in the forward pass after the last save of an op before it (no
    save of the step's own op yet), in the backward pass when the step's stage opens."""
    net, x, graph, _ = mlp
    plan, p = _swap_all(graph, 0.5)
    calls = []
    real = Execution._wait_copy

    def spy(self, step, tid):
        calls.append((step, tid, self.k, self.backward, self.stage))
        real(self, step, tid)

    monkeypatch.setattr(Execution, "_wait_copy", spy)
    m = copy.deepcopy(net)
    with apply(m, plan, graph, problem=p, hold_budget=True) as run:
        m(*x).sum().backward()
    want = run.held.waits()
    assert [(s, t) for s, t, *_ in calls] == want and len(want) == 6
    assert run.stats.held_copies == len(want)
    po = _ledger.pack_ops(graph)
    n = len(graph.ops)
    sched = compile_schedule(graph, plan.decisions)
    fwd = bwd = 0
    for s, _, k, backward, stage in calls:
        if s < n:                      # forward step s is op s
            assert not backward and max(po[:k]) < s and (k == len(po) or po[k] >= s)
            fwd += 1
        else:
            assert backward and stage[0] == sched.stage[s]
            bwd += 1
    assert fwd and bwd                 # the case waits on both sides


def test_without_hold_budget_nothing_waits(mlp, monkeypatch):
    net, x, graph, _ = mlp
    plan, p = _swap_all(graph, 0.5)
    monkeypatch.setattr(Execution, "_wait_copy", lambda *a: pytest.fail("waited"))
    m = copy.deepcopy(net)
    with apply(m, plan, graph, problem=p) as run:
        m(*x).sum().backward()
    assert run.held is None and run.stats.held_copies == 0


@pytest.mark.parametrize("kind", ["swap0.5", "slack0.5", "slack0.6"])
def test_gradients_and_counts_are_unchanged(mlp, kind):
    net, x, graph, grads = mlp
    if kind.startswith("swap"):
        plan, p = _swap_all(graph, 0.5)
    else:
        p = Problem.build(graph, "a100-80gb", budget=float(kind.removeprefix("slack")))
        plan = planners.get("slack").plan(p)
    a = run_and_compare(net, plan, graph, x, p, grads, kind)
    b = run_and_compare(net, plan, graph, x, p, grads, kind, hold_budget=True)
    assert (a.swapped_bytes, a.fetched_bytes, a.recomputed_ops, a.peak_saved_bytes) == \
        (b.swapped_bytes, b.fetched_bytes, b.recomputed_ops, b.peak_saved_bytes)
    issue = _ledger.resolved_issue_points(p, plan)
    assert b.held_copies == len(_ledger.hold_schedule(p, plan, issue).waits())


@pytest.mark.parametrize("bad", [1, 0, None, "yes", math.nan])
def test_hold_budget_must_be_a_bool(mlp, bad):
    net, _, graph, _ = mlp
    plan, p = _swap_all(graph, 0.5)
    with pytest.raises(ConfigError, match=r"^hold_budget: must be True or False; got "):
        apply(net, plan, graph, problem=p, hold_budget=bad)


def test_hold_budget_needs_the_problem(mlp):
    net, _, graph, _ = mlp
    plan, _ = _swap_all(graph, 0.5)
    with pytest.raises(ConfigError, match=r"^hold_budget: needs problem=\.\.\. .*got problem=None$"):
        apply(net, plan, graph, hold_budget=True)


@pytest.mark.parametrize("bad", [1, None, "on", math.nan])
def test_measure_refuses_a_bad_hold_budget(bad):
    from slackswap.torch.measure_step import measure

    net, x = _mlp()
    with pytest.raises(ParameterError, match=r"^measure: hold_budget: must be True, False or 'both'; got "):
        measure(net, x, hold_budget=bad, device="cpu")


def test_measure_runs_each_swapping_plan_both_ways(mlp):
    """``hold_budget="both"``: a second row, labelled ``hold``, for each plan that swaps (the same
    plan, so the same counts and simulated values); the CPU peak is the hooks' count either way."""
    from slackswap.torch.measure_step import measure

    net, x = _mlp()
    m = measure(net, x, budget=[0.5], repeats=1, trace_repeats=1, overhead=False, device="cpu",
                hold_budget="both")
    labels = [r.plan for r in m.rows]
    assert labels[:2] == ["keep-all", "recompute-all"] and any(r.hold_budget for r in m.rows)
    for r in m.rows:
        if r.hold_budget:
            plain = next(q for q in m.rows if q.plan + " hold" == r.plan)
            assert r.counts == plain.counts and r.counts["swap"] > 0
            assert (r.sim_step_s, r.sim_peak, r.peak) == (plain.sim_step_s, plain.sim_peak, plain.peak)
            assert r.accounted_peak is not None and plain.accounted_peak is None
        else:
            assert r.plan + " hold" in labels or r.counts["swap"] == 0


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("budget", [0.5, 0.3])
def test_cuda_peak_holds_the_budget(budget):
    """The goal of the mode: a small GPT-2 (2 layers of GPT-2 124M, batch 4, seq 256) planned with
    measured costs; for each plan that swaps and that the simulator says fits (``slack``, and
    swap-all where it fits), ``max_memory_allocated`` above the step's base is at most the budget
    and within 2% of the simulated peak with ``hold_budget=True``; gradients equal the plain
    step's."""
    from slackswap.torch import hf_models as zoo
    from slackswap.torch.measure_step import device_costs

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model, inputs = zoo.build("gpt2-124m", batch=4, seq=256, layers=2, vocab=1024)
    model = model.to(dev).train()
    inputs = {k: v.to(dev) for k, v in inputs.items()}
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    graph = trace(model, inputs, device="cuda")
    base = Problem.from_graph(graph, device_costs(graph, dev))
    p = base.with_budget(budget)
    cands = [planners.get("slack").plan(p), Plan({t: S for t in p.planning_ids})]
    ran = 0
    for plan in cands:
        sim = simulate(p, plan, detail=False)
        if not (plan.ids(S) and sim.fits):
            continue
        m = copy.deepcopy(model)
        for q in m.parameters():
            q.grad = torch.zeros_like(q)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        issue = _ledger.resolved_issue_points(p, plan)
        with apply(m, plan, graph, problem=p, issue_points=issue, hold_budget=True, track=False):
            m(**inputs).loss.backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated(dev) - before
        # what the run can reach if it holds the simulator's accounting (docs/executor.md)
        why = (plan.counts(), peak, sim.peak_bytes, _ledger.hold_schedule(p, plan, issue).accounted_peak,
               p.budget_bytes)
        assert peak <= p.budget_bytes, why
        assert abs(peak / sim.peak_bytes - 1) <= 0.02, why
        for a, b in zip(m.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
        ran += 1
    assert ran, "no plan that swaps fits this budget"


@cuda
def test_cuda_hold_budget_gives_the_plain_gradients():
    from exec_models import build

    model, inputs = build("gpt2")
    model, inputs = model.cuda(), {k: v.cuda() for k, v in inputs.items()}
    graph = trace(model, inputs, device="cuda")
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    plan = Plan({t.id: S for t in graph.planning_tensors()})
    p = Problem.build(graph, "a100-80gb", budget=None)
    m = copy.deepcopy(model)
    stats = run_step(m, plan, graph, inputs, problem=p, hold_budget=True)
    for a, b in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    waits = _ledger.hold_schedule(p, plan, _ledger.resolved_issue_points(p, plan)).waits()
    last = compile_schedule(graph, plan.decisions).n_steps - 1     # the optimizer step: not run
    assert stats.held_copies == sum(s < last for s, _ in waits) > 0
