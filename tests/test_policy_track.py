"""What a step run with ``slackswap.torch.policy`` holds (``CheckpointPlanPolicy.track()``,
docs/policy.md, "What a policy run holds"), against the simulator's region schedule
(``simulated_saved_peak(..., regions=...)``, docs/regions.md, "Checkpointed regions")."""

import copy
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exec_models import build, checkpointed  # noqa: E402

from slackswap import Decision, Plan, Problem, planners  # noqa: E402
from slackswap.core.errors import ExecutionError, ParameterError, PlanError  # noqa: E402
from slackswap.timeline.regions import layer_regions  # noqa: E402
from slackswap.torch import policy, simulated_saved_peak, trace  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread
K, R, S = Decision.KEEP, Decision.RECOMPUTE, Decision.SWAP


def _traced(name):
    model, inputs = build(name)
    if name != "bert":   # checkpointing turns the KV cache off: trace the step as it will run
        inputs = dict(inputs, use_cache=False)
    g = trace(model, inputs, device="cpu")
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    return model, inputs, g, [p.grad for p in ref.parameters()]


def _run(model, inputs, name, pol, which):
    """One step of a copy of ``model`` with ``pol`` on every layer (``"layers"``) or on the first
    layer only (``"first"``), inside ``pol.track()``; returns the run and the model."""
    m = checkpointed(copy.deepcopy(model), name, pol, which)
    m.train()
    with pol.track() as run:
        m(**inputs).loss.backward()
    return run, m


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_a_policy_run_holds_the_saved_peak_of_its_region_schedule(name):
    """Per-layer regions: ``slack`` planned for them at 0.8 and 0.6 of the keep-all peak; then
    random plans, each with a random ``swap`` and either per-layer regions or the first layer
    alone. Every gradient is the plain step's, and the saved-activation peak the run holds equals
    the region schedule's exactly."""
    model, inputs, g, ref_grads = _traced(name)
    lay = layer_regions(g)
    first = {o: 0 for o, lab in lay.items() if lab == min(lay.values())}
    cases = []
    for budget in (0.8, 0.6):
        p = Problem.build(g, "a100-80gb", budget=budget).with_regions("layers")
        plan = planners.get("slack").plan(p)
        assert plan.info.status.value == "FEASIBLE", plan.info.message
        cases.append((plan, "save", "layers"))
    rng = random.Random(3)
    ids = [t.id for t in g.planning_tensors()]
    for _ in range(4):
        plan = Plan({t: rng.choice([K, R, S]) for t in ids})
        cases.append((plan, rng.choice(["save", "recompute"]), rng.choice(["layers", "first"])))
    for plan, swap, which in cases:
        pol = policy(plan, g, swap=swap)
        run, m = _run(model, inputs, name, pol, which)
        regions = lay if which == "layers" else first
        want = simulated_saved_peak(g, plan, regions=regions, swap=swap)
        assert run.peak_saved_bytes == want, (swap, which, plan.counts())
        assert run.replayed_calls > 0
        for (label, a), b in zip(m.named_parameters(), ref_grads, strict=True):
            assert torch.equal(a.grad, b), label


def test_the_peak_takes_the_problems_regions():
    model, inputs, g, _ = _traced("gpt2")
    p = Problem.build(g, "a100-80gb", budget=0.7).with_regions("layers", "recompute")
    plan = planners.get("slack").plan(p)
    got = simulated_saved_peak(g, plan, problem=p)
    assert got == simulated_saved_peak(g, plan, regions="layers", swap="recompute")
    run, _ = _run(model, inputs, "gpt2", policy(plan, g, swap="recompute"), "layers")
    assert run.peak_saved_bytes == got


def test_track_errors_are_one_line():
    model, inputs, g, _ = _traced("gpt2")
    plan = Plan({t.id: K for t in g.planning_tensors()})
    pol = policy(plan, g)
    m = copy.deepcopy(model)
    m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False,
                                                                        "context_fn": pol})
    with pytest.raises(ExecutionError, match="ran no backward pass inside the `with` block"):
        with pol.track():
            m(**inputs)
    run = pol.track()
    with pytest.raises(ExecutionError, match="already recording"), run, run:
        pass
    other = dict(inputs, input_ids=inputs["input_ids"][:, :-1], labels=inputs["labels"][:, :-1])
    with pytest.raises(ExecutionError, match="differ from the traced ones"), pol.track():
        m(**other).loss.backward()


def test_simulated_saved_peak_with_regions_refuses_bad_values():
    g = build_graph()
    plan = Plan({t.id: K for t in g.planning_tensors()})
    with pytest.raises(ParameterError, match="regions: must be 'layers' or a dict"):
        simulated_saved_peak(g, plan, regions="blocks")
    with pytest.raises(ParameterError, match="swap: must be one of save, recompute; got 'offload'"):
        simulated_saved_peak(g, plan, regions="layers", swap="offload")
    with pytest.raises(ParameterError, match="swap: only with regions"):
        simulated_saved_peak(g, plan, swap="save")
    with pytest.raises(ParameterError, match="regions\\[0\\]: a region label must be an int or a str"):
        simulated_saved_peak(g, plan, regions={0: float("nan")})
    t = next(iter(plan.decisions))
    with pytest.raises(PlanError, match="has hold points"):
        simulated_saved_peak(g, Plan({**plan.decisions, t: R}, hold_points={t: 0}), regions="layers")
    swap = Plan({**plan.decisions, t: S})
    with pytest.raises(ParameterError, match="issue_points: not with regions"):
        simulated_saved_peak(g, swap, regions="layers", issue_points={t: 0})


def build_graph():
    from slackswap import models

    return models.build("tiny")


def test_offload_holds_eagerly_what_recompute_holds():
    """Eager checkpointing recomputes what ``MUST_CPU_OFFLOAD`` would offload: a policy given
    ``swap="offload"`` holds the region schedule's peak with ``swap="recompute"``."""
    from slackswap.torch.checkpoint_policy import offload_supported

    if not offload_supported():
        pytest.skip("this PyTorch has no CheckpointPolicy.MUST_CPU_OFFLOAD")
    model, inputs, g, _ = _traced("gpt2")
    rng = random.Random(2)
    plan = Plan({t.id: rng.choice([K, S, R]) for t in g.planning_tensors()})
    pol = policy(plan, g, swap="offload")
    run, _ = _run(model, inputs, "gpt2", pol, "layers")
    assert pol.counts["offload"] > 0
    assert run.peak_saved_bytes == simulated_saved_peak(g, plan, regions="layers", swap="recompute")
