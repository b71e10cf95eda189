"""slackswap.torch.apply: a real training step under a plan gives the unmodified step's gradients,
re-runs and swaps what the plan says, and holds the saved activations the simulator counts."""

import copy
import random
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exec_models import build, run_and_compare, traced_with_reference  # noqa: E402

from slackswap import Decision, Plan, PlanError, Problem, planners  # noqa: E402
from slackswap.core.errors import ConfigError, ExecutionError  # noqa: E402
from slackswap.timeline.schedule import compile_schedule  # noqa: E402
from slackswap.torch import (  # noqa: E402
    _ledger,  # noqa: E402
    apply,
    run_step,
    trace,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread (conftest.py)

_CACHE = {}


def _setup(name):
    if name not in _CACHE:
        model, inputs = build(name)
        graph, grads = traced_with_reference(model, inputs)
        _CACHE[name] = (model, inputs, graph, grads)
    return _CACHE[name]


def _plan(graph, kind):
    """(plan, problem): an all-same plan (no budget) or the slack plan at a budget fraction."""
    if kind in ("keep", "swap", "recompute"):
        return (Plan({t.id: Decision(kind) for t in graph.planning_tensors()}),
                Problem.build(graph, "a100-80gb", budget=None))
    problem = Problem.build(graph, "a100-80gb", budget=float(kind.removeprefix("slack")))
    return planners.get("slack").plan(problem), problem


CASES = [(m, k) for m in ("gpt2", "bert", "llama", "cnn")
         for k in ("keep", "recompute", "swap", "slack0.5", "slack0.3")]


@pytest.mark.parametrize("name,kind", CASES)
def test_plan_runs_exactly(name, kind):
    model, inputs, graph, ref_grads = _setup(name)
    plan, problem = _plan(graph, kind)
    stats = run_and_compare(model, plan, graph, inputs, problem, ref_grads, f"{name}/{kind}")
    sched = compile_schedule(graph, plan.decisions)
    assert stats.recomputed_ops == len(sched.recomputed)
    assert stats.swapped_bytes == sum(graph.tensors[t].bytes for t in plan.ids(Decision.SWAP))
    assert stats.fetched_bytes == stats.swapped_bytes
    issue = _ledger.resolved_issue_points(problem, plan)
    assert stats.peak_saved_bytes == _ledger.simulated_saved_peak(graph, plan, issue)
    if kind == "recompute":
        assert stats.recomputed_ops > 0
    if kind == "swap":
        assert stats.swapped_bytes == graph.saved_bytes()


def test_prefetch_follows_the_issue_points():
    model, inputs, graph, _ = _setup("gpt2")
    plan = Plan({t.id: Decision.SWAP for t in graph.planning_tensors()})
    first = _ledger.first_use_stages(graph, plan)
    early = {t: len(graph.ops) - 1 for t in first}       # everything at the first backward stage
    m = copy.deepcopy(model)
    with apply(m, plan, graph, issue_points=early) as run_early:
        m(**inputs).loss.backward()
    m = copy.deepcopy(model)
    with apply(m, plan, graph, issue_points=first) as run_late:
        m(**inputs).loss.backward()
    assert run_early.stats.prefetched == len(first)
    assert run_early.stats.peak_saved_bytes == _ledger.simulated_saved_peak(graph, plan, early)
    assert run_late.stats.peak_saved_bytes == _ledger.simulated_saved_peak(graph, plan, first)
    assert run_late.stats.peak_saved_bytes < run_early.stats.peak_saved_bytes


def test_dp_checkpoints_multi_level_plan_runs_exactly():
    # the traced GPT-2 at 42% of its keep-all peak: no single-level plan of dp-checkpoint fits
    model, inputs, graph, ref_grads = _setup("gpt2")
    problem = Problem.build(graph, "a100-80gb", budget=0.42)
    plan = planners.get("dp-checkpoint").plan(problem)
    assert plan.hold_points, "expected a multi-level plan at this budget"
    m = copy.deepcopy(model)
    stats = run_step(m, plan, graph, inputs, problem=problem)
    for (pname, p), g in zip(m.named_parameters(), ref_grads, strict=True):
        assert torch.equal(p.grad, g), f"gradient of {pname} differs"
    sched = compile_schedule(graph, plan.decisions, plan.hold_points)
    assert stats.recomputed_ops == len(sched.recomputed) > len(compile_schedule(graph, plan.decisions).recomputed)
    issue = _ledger.resolved_issue_points(problem, plan)
    assert stats.peak_saved_bytes == _ledger.simulated_saved_peak(graph, plan, issue)


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "cnn"])
def test_random_hold_points_run_as_the_simulator_schedules_them(name):
    """Random decisions and random hold points (on RECOMPUTE tensors and tensors no op saves):
    the same gradients, the schedule's re-runs, and its saved peak. On the CNN the run's peak may
    be lower: a graph op there spans two autograd nodes (batch norm, then its fused in-place
    ReLU), and the run frees the ReLU's saved output after the first of them, while the simulator
    holds every tensor an op saves through its whole stage."""
    model, inputs, graph, ref_grads = _setup(name)
    problem = Problem.build(graph, "a100-80gb", budget=None)
    rng = random.Random(7)
    planning = sorted(t.id for t in graph.planning_tensors())
    for trial in range(3):
        dec = {t: Decision.RECOMPUTE if trial == 0 else rng.choice([Decision.RECOMPUTE] * 2 + [Decision.KEEP, Decision.SWAP])
               for t in planning}
        eligible = [t.id for t in graph.tensors
                    if t.producer is not None and dec.get(t.id, Decision.RECOMPUTE) is Decision.RECOMPUTE]
        if trial == 0:     # every copy transient: each stage rebuilds what it reads
            holds = dict.fromkeys(eligible, 0)
        else:
            holds = {t: rng.randrange(len(graph.ops)) for t in rng.sample(eligible, rng.randint(1, len(eligible)))}
        plan = Plan(dec, hold_points=holds)
        m = copy.deepcopy(model)
        stats = run_step(m, plan, graph, inputs, problem=problem)
        for (pname, p), g in zip(m.named_parameters(), ref_grads, strict=True):
            assert torch.equal(p.grad, g), f"{name}, trial {trial}: gradient of {pname} differs"
        assert stats.recomputed_ops == len(compile_schedule(graph, dec, holds).recomputed)
        simulated = _ledger.simulated_saved_peak(graph, plan, _ledger.resolved_issue_points(problem, plan))
        if name == "cnn":
            assert stats.peak_saved_bytes <= simulated
        else:
            assert stats.peak_saved_bytes == simulated


def test_a_plan_for_another_graph_is_refused():
    model, inputs, graph, _ = _setup("cnn")
    other = _setup("bert")[2]
    plan = Plan({t.id: Decision.KEEP for t in other.planning_tensors()})
    with pytest.raises(PlanError, match="planning tensors"):
        apply(model, plan, graph)
    keyed = Plan({t.id: Decision.KEEP for t in graph.planning_tensors()}, problem_key="0123456789abcdef")
    with pytest.raises(PlanError, match="another graph"):
        apply(model, keyed, graph)


def test_a_model_that_no_longer_matches_its_trace_is_refused():
    model, inputs, graph, _ = _setup("cnn")
    plan = Plan({t.id: Decision.RECOMPUTE for t in graph.planning_tensors()})
    changed = copy.deepcopy(model)
    changed[1] = torch.nn.GELU()                      # tanh -> gelu: another aten op
    with pytest.raises(ExecutionError, match="aten op 1 of the step is aten.gelu"):
        run_step(changed, plan, graph, inputs)
    bigger = (torch.randn(4, 3, 16, 16),)             # other shapes: other saved bytes
    with pytest.raises(ExecutionError, match="bytes"):
        run_step(copy.deepcopy(model), plan, graph, bigger)


def test_doctests():
    """slackswap.torch.executor's examples run (at least its 9) and pass."""
    import doctest

    from slackswap.torch import executor

    r = doctest.testmod(executor)
    assert r.failed == 0 and r.attempted >= 9, r


def test_an_untraced_graph_is_refused():
    from slackswap.experiments.synthetic import chain

    g = chain(3, sizes=[2, 2, 2])
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
    with pytest.raises(ExecutionError, match="not a traced graph"):
        apply(torch.nn.Linear(2, 2), plan, g)


def test_buffers_are_written_once_under_recompute():
    model, inputs, graph, _ = _setup("cnn")
    plan = Plan({t.id: Decision.RECOMPUTE for t in graph.planning_tensors()})
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    run_step(a, plan, graph, inputs)
    b(*inputs).float().sum().backward()
    for (n, x), y in zip(a.named_buffers(), b.buffers(), strict=True):
        assert torch.equal(x, y), f"buffer {n} differs after re-runs"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("host_lead", [None, 1])
@pytest.mark.parametrize("kind", ["swap", "recompute", "slack0.5"])
def test_cuda_streams_give_the_plain_gradients(kind, host_lead):
    model, inputs = build("gpt2")
    model, inputs = model.cuda(), {k: v.cuda() for k, v in inputs.items()}
    graph = trace(model, inputs, device="cuda")
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    plan, problem = _plan(graph, kind)
    m = copy.deepcopy(model)
    stats = run_step(m, plan, graph, inputs, problem=problem, host_lead=host_lead)
    for p, q in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0)
    assert stats.swapped_bytes == sum(graph.tensors[t].bytes for t in plan.ids(Decision.SWAP))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_op_times_are_gpu_times_without_the_synchronize_latency():
    # the traced time of a matmul against the same kernel run back to back (events around 20
    # launches): a per-op synchronize would add its latency to every op
    model = torch.nn.Linear(2048, 2048, bias=False).cuda()
    x = torch.randn(2048, 2048, device="cuda")
    model(x).sum().backward()                  # warm-up: cuBLAS handle and workspace
    graph = trace(model, (x,), device="cuda")
    times = graph.spec.op_times_s
    assert all(f >= 0 and b >= 0 for f, b in times)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        start.record()
        for _ in range(20):
            model(x)
        end.record()
    end.synchronize()
    ref = start.elapsed_time(end) / 1e3 / 20
    mm = [i for i, o in enumerate(graph.ops) if o.kind == "matmul"]
    assert mm and all(0.5 * ref < times[i][0] < 2 * ref for i in mm), (times, ref)


def test_recompute_chains_deeper_than_the_python_recursion_limit():
    # recompute-all on a 400-op chain: rebuilding the last tensor rebuilds every one before it,
    # a recursion of several frames per op (gpt2-355m at 24 layers hit the default limit)
    net = torch.nn.Sequential(*[torch.nn.Tanh() for _ in range(400)])
    x = (torch.randn(3, 5, requires_grad=True),)
    graph = trace(net, x, device="cpu")
    plan = Plan({t.id: Decision.RECOMPUTE for t in graph.planning_tensors()})
    limit = sys.getrecursionlimit()
    x[0].grad = None                          # the trace's backward wrote one
    stats = run_step(net, plan, graph, x)
    grad = x[0].grad.clone()
    x[0].grad = None
    net(*x).sum().backward()
    torch.testing.assert_close(grad, x[0].grad, rtol=0, atol=0)
    assert stats.recomputed_ops >= 399
    assert sys.getrecursionlimit() == limit   # restored after the step


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_host_lead_must_be_a_positive_integer(bad):
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    x = (torch.randn(2, 4),)
    graph = trace(net, x, device="cpu")
    plan = Plan({t.id: Decision.KEEP for t in graph.planning_tensors()})
    with pytest.raises(ConfigError, match=r"host_lead: must be None or an integer >= 1; got"):
        apply(net, plan, graph, host_lead=bad)
