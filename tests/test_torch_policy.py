"""slackswap.torch.policy: a plan as a selective activation checkpointing policy for
``torch.utils.checkpoint`` (docs/policy.md, "Selective checkpointing policy"): the plain step's
gradients bitwise, the plan's RECOMPUTE tensors re-run and its KEEP tensors not."""

import copy

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, checkpoint  # noqa: E402

from slackswap import Decision, Plan  # noqa: E402
from slackswap.core.errors import ConfigError, ExecutionError, ParameterError, PlanError  # noqa: E402
from slackswap.torch import policy, trace  # noqa: E402
from slackswap.torch.checkpoint_policy import offload_supported  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread


class Count(TorchDispatchMode):
    """Counts the aten calls dispatched while the backward pass runs (recomputes included)."""

    def __init__(self, names):
        super().__init__()
        self.names, self.backward = set(names), {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) in self.names and torch._C._current_graph_task_id() != -1:
            self.backward[str(func)] = self.backward.get(str(func), 0) + 1
        return func(*args, **(kwargs or {}))


def _mlp():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    g = trace(net, (x,), device="cpu")
    ref = copy.deepcopy(net)
    ref(x).sum().backward()
    return net, x, g, [p.grad for p in ref.parameters()]


def _tanh_outputs(g):
    """The planning tensors: the two tanh outputs, in forward order."""
    ids = [t.id for t in g.planning_tensors()]
    assert [g.ops[g.tensors[t].producer].name for t in ids] == ["1:tanh", "3:tanh"]
    return ids


@pytest.mark.parametrize("first,second,reruns", [
    (Decision.KEEP, Decision.KEEP, 0), (Decision.KEEP, Decision.RECOMPUTE, 1),
    (Decision.RECOMPUTE, Decision.KEEP, 1), (Decision.RECOMPUTE, Decision.RECOMPUTE, 2),
    (Decision.SWAP, Decision.RECOMPUTE, 1)])
def test_kept_tensors_are_saved_and_recomputed_ones_rerun(first, second, reruns):
    net, x, g, ref_grads = _mlp()
    a, b = _tanh_outputs(g)
    pol = policy(Plan({a: first, b: second}), g)      # swap="save": SWAP is kept
    count = Count(["aten.tanh.default", "aten.addmm.default"])
    with count:
        checkpoint(net, x, use_reentrant=False, context_fn=pol).sum().backward()
    for p, want in zip(net.parameters(), ref_grads, strict=True):
        assert torch.equal(p.grad, want)
    assert count.backward.get("aten.tanh.default", 0) == reruns
    # SAC replays the region up to the last tensor the backward needs: the two addmm before the
    # tanh outputs re-run whatever the plan (no op saves their outputs), the last one does not
    assert count.backward["aten.addmm.default"] == 2
    assert pol.counts["save"] == 2 - [first, second].count(Decision.RECOMPUTE)


def test_each_step_is_matched_from_the_start_of_the_trace():
    net, x, g, ref_grads = _mlp()
    a, b = _tanh_outputs(g)
    pol = policy(Plan({a: Decision.KEEP, b: Decision.RECOMPUTE}), g)
    for step in range(3):
        net.zero_grad(set_to_none=True)
        checkpoint(net, x, use_reentrant=False, context_fn=pol).sum().backward()
        assert pol.counts["save"] == step + 1
        assert all(torch.equal(p.grad, w) for p, w in zip(net.parameters(), ref_grads, strict=True))


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_per_layer_regions_of_an_hf_model_give_the_plain_gradients(name):
    pytest.importorskip("transformers")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from exec_models import build

    model, inputs = build(name)
    if name == "gpt2":   # checkpointing turns the KV cache off: trace the step as it will run
        inputs = dict(inputs, use_cache=False)
    g = trace(model, inputs, device="cpu")
    ref = copy.deepcopy(model)
    ref(**inputs).loss.backward()
    ids = [t.id for t in g.planning_tensors()]       # every other tensor kept, the rest recomputed
    plan = Plan({t: Decision.KEEP if i % 2 else Decision.RECOMPUTE for i, t in enumerate(ids)})
    pol = policy(plan, g)
    kw = {"use_reentrant": False, "context_fn": pol}
    if hasattr(model, "activation_checkpointing_enable"):     # transformers >= 5
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    model.train()
    model(**inputs).loss.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    # every call inside the layers got a policy; the plan keeps some, recomputes some
    assert pol.counts["save"] > 0 and pol.counts["recompute"] > 0


def test_a_model_that_differs_from_its_trace_is_one_line():
    net, x, g, _ = _mlp()
    pol = policy(Plan({t.id: Decision.KEEP for t in g.planning_tensors()}), g)
    other = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU())
    with pytest.raises(ExecutionError) as e:
        checkpoint(other, x, use_reentrant=False, context_fn=pol)
    assert "aten.gelu.default matches no call of the traced forward" in str(e.value) and "\n" not in str(e.value)


def test_bad_arguments_name_the_field():
    net, x, g, _ = _mlp()
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
    for kw, err, text in [
        (dict(plan="slack", graph=g), ParameterError, "policy: plan: expected a Plan"),
        (dict(plan=Plan({}), graph=g), PlanError, "plan.decisions"),
        (dict(plan=plan, graph=g, swap="host"), ConfigError, "swap: must be one of save, offload, recompute"),
        (dict(plan=plan, graph=g, swap=float("nan")), ConfigError, "swap: must be one of"),
    ]:
        with pytest.raises(err) as e:
            policy(kw.pop("plan"), kw.pop("graph"), **kw)
        assert text in str(e.value) and "\n" not in str(e.value)


def test_swap_as_offload_or_recompute():
    net, x, g, ref_grads = _mlp()
    a, b = _tanh_outputs(g)
    plan = Plan({a: Decision.SWAP, b: Decision.KEEP})
    rec = policy(plan, g, swap="recompute")
    assert rec.policies.count(CheckpointPolicy.MUST_SAVE) == 1
    if offload_supported():
        off = policy(plan, g, swap="offload")
        assert off.policies.count(CheckpointPolicy.MUST_CPU_OFFLOAD) == 1
        # eager checkpointing does not offload: it recomputes the tensor (docs/policy.md)
        count = Count(["aten.tanh.default"])
        with count:
            checkpoint(net, x, use_reentrant=False, context_fn=off).sum().backward()
        assert count.backward.get("aten.tanh.default", 0) == 1
        assert all(torch.equal(p.grad, w) for p, w in zip(net.parameters(), ref_grads, strict=True))


def test_under_torch_compile_the_plain_gradients():
    """``torch.compile`` (the ``aot_eager`` backend: no C++ compiler, a few seconds on CPU) takes
    the policy as ``pol.context_fn``; it asks the policy while compiling the region."""
    net, x, g, ref_grads = _mlp()
    a, b = _tanh_outputs(g)
    pol = policy(Plan({a: Decision.KEEP, b: Decision.RECOMPUTE}), g)
    torch._dynamo.reset()
    step = torch.compile(lambda x: checkpoint(net, x, use_reentrant=False, context_fn=pol.context_fn),
                         backend="aot_eager")
    step(x).sum().backward()
    torch._dynamo.reset()
    assert all(torch.equal(p.grad, w) for p, w in zip(net.parameters(), ref_grads, strict=True))
    assert pol.counts["save"] >= 1 and pol.counts["recompute"] >= 1


def test_a_graph_that_is_not_a_trace_is_one_line():
    net, x, g, _ = _mlp()
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
    for bad in ("graph", None, 3.5):
        with pytest.raises(ParameterError) as e:
            policy(plan, bad)
        assert str(e.value).startswith("graph: expected the Graph of slackswap.torch.trace")


def test_a_graph_traced_on_meta_says_so_when_the_region_differs():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    x = torch.randn(2, 4)
    g = trace(net, (x,))                                  # meta: native_dropout
    pol = policy(Plan({t.id: Decision.KEEP for t in g.planning_tensors()}), g)
    with pytest.raises(ExecutionError) as e:
        checkpoint(net, x, use_reentrant=False, context_fn=pol)
    assert str(e.value).startswith("graph: traced on meta (kernels='cuda')")


def test_tensors_written_in_place_are_recomputed_not_cached():
    """The CNN's BatchNorm + in-place ReLU: selective checkpointing cannot cache an output that
    is written in place, so a keep-all plan recomputes those, lists them, and gives the plain
    gradients."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from exec_models import build

    model, (x,) = build("cnn")
    g = trace(model, (x,), device="cpu")
    ref = copy.deepcopy(model)
    ref(x).sum().backward()
    pol = policy(Plan({t.id: Decision.KEEP for t in g.planning_tensors()}), g)
    checkpoint(model, x, use_reentrant=False, context_fn=pol).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)
    norms = {g.tensors[t].producer for t in pol.not_saved}
    assert norms == {op.id for op in g.ops if op.name.endswith("native_batch_norm")}
    assert pol.counts["save"] > 0
