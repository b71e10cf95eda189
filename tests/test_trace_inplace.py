"""What held-out models found in the tracer and the executor: in-place writes that read a tensor
made after the one they write (T5's ``scores += position_bias``, ``shift_tokens_right`` of BART
and T5 given only ``labels``), buffers a CPU trace advances, the message for a graph traced on
meta, and the public saved-activation peak (docs/trace.md, docs/executor.md)."""


import pytest

torch = pytest.importorskip("torch")

from exec_models import run_and_compare, traced_with_reference  # noqa: E402

from slackswap import Decision, Plan, Problem, planners  # noqa: E402
from slackswap.core.errors import ExecutionError, ParameterError, PlanError  # noqa: E402
from slackswap.timeline.schedule import compile_schedule  # noqa: E402
from slackswap.torch import _ledger, run_step, simulated_saved_peak, trace  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread

VOCAB, BATCH, SEQ = 64, 2, 8


class AddLater(torch.nn.Module):
    """``s = a(x); t = b(x); s += t``: the write reads ``t``, made after ``s``."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x):
        s = self.a(x)
        t = self.b(x)
        s += t
        return s.tanh()


def _labels():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}   # no decoder_input_ids: shifted from labels


def _t5():
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1,
                   num_decoder_layers=1, num_heads=2, dropout_rate=0.0, decoder_start_token_id=0,
                   pad_token_id=0)
    return T5ForConditionalGeneration(cfg), _labels()


def _bart():
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                     decoder_ffn_dim=64, max_position_embeddings=SEQ, dropout=0.0,
                     attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    return BartForConditionalGeneration(cfg), _labels()


def _add_later():
    return AddLater(), (torch.randn(3, 4, generator=torch.Generator().manual_seed(2)),)


_CACHE = {}


def _setup(name):
    if name not in _CACHE:
        if name != "add_later":
            pytest.importorskip("transformers")
        torch.manual_seed(0)
        model, inputs = {"add_later": _add_later, "t5": _t5, "bart": _bart}[name]()
        model.train()
        graph, grads = traced_with_reference(model, inputs)
        _CACHE[name] = (model, inputs, graph, grads)
    return _CACHE[name]


def _topological(graph):
    return all(graph.tensors[t].producer is None or graph.tensors[t].producer < op.id
               for op in graph.ops for t in op.inputs)


def test_a_write_reading_a_later_tensor_is_an_op_of_its_own():
    _, _, graph, _ = _setup("add_later")
    assert [op.name for op in graph.ops[:3]] == ["a:addmm", "b:addmm", "model:add_"]
    add = graph.ops[2]
    assert set(add.inputs) == set(graph.ops[0].outputs) | set(graph.ops[1].outputs)
    assert _topological(graph)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_t5_and_bart_given_only_labels_trace_on_meta_and_cpu(name):
    pytest.importorskip("transformers")
    model, inputs = {"t5": _t5, "bart": _bart}[name]()
    g = trace(model, inputs)                   # meta: the default
    assert _topological(g) and g.planning_tensors()
    _, _, g_cpu, _ = _setup(name)
    assert _topological(g_cpu)
    # shift_tokens_right: ``shifted[:, 1:] = labels[:, :-1].clone()`` writes the new_zeros
    # output with a clone made after it: an op of its own, reading both
    copy_ = next(op for op in g_cpu.ops if op.name == "model:copy_")
    assert sorted(g_cpu.tensors[t].producer for t in copy_.inputs) == [copy_.id - 2, copy_.id - 1]
    if name == "t5":
        # the encoder's layer 0 computes the position bias after its scores and adds it in place:
        # an op of its own (a later layer would reuse the bias, made before its scores: fused)
        adds = [op for op in g_cpu.ops if op.name.split(":")[1].startswith("add_")]
        assert [op.name for op in adds] == ["encoder.block.0.layer.0.SelfAttention:add_"]
        assert max(g_cpu.tensors[t].producer for t in adds[0].inputs) == adds[0].id - 1


def _plan(graph, kind):
    if kind in ("keep", "swap", "recompute"):
        return (Plan({t.id: Decision(kind) for t in graph.planning_tensors()}),
                Problem.build(graph, "a100-80gb", budget=None))
    problem = Problem.build(graph, "a100-80gb", budget=0.5)
    return planners.get("slack").plan(problem), problem


@pytest.mark.parametrize("name,kind", [("add_later", k) for k in ("keep", "swap", "recompute")]
                         + [(m, k) for m in ("t5", "bart") for k in ("recompute", "swap", "slack")])
def test_planned_steps_give_the_plain_gradients_bitwise(name, kind):
    model, inputs, graph, ref_grads = _setup(name)
    plan, problem = _plan(graph, kind)
    stats = run_and_compare(model, plan, graph, inputs, problem, ref_grads, f"{name}/{kind}")
    # every op the schedule re-runs, once (the in-place write reading a later tensor included)
    assert stats.recomputed_ops == len(compile_schedule(graph, plan.decisions).recomputed)
    assert stats.peak_saved_bytes == simulated_saved_peak(graph, plan, problem=problem)
    if kind == "recompute":
        assert stats.recomputed_ops > 0


def test_cpu_trace_leaves_batch_norm_statistics_unchanged():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                              torch.nn.Linear(8, 1))
    net.eval()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    g = trace(net, (torch.randn(5, 6),), device="cpu")
    assert g.ops and not net.training                     # traced in train mode, mode restored
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed by the trace"
    assert all(p.grad is None for p in net.parameters())
    # the plain step does advance them: the check above is not vacuous
    net.train()
    net(torch.randn(5, 6)).sum().backward()
    assert not torch.equal(net[1].running_mean, before["1.running_mean"])
    assert int(net[1].num_batches_tracked) == 1


def test_a_graph_traced_on_meta_says_so_first():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    x = (torch.randn(2, 4),)
    g = trace(net, x)                                     # meta, CUDA kernels: native_dropout
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
    with pytest.raises(ExecutionError) as e:
        run_step(net, plan, g, x)
    msg = str(e.value)
    assert msg.startswith("graph: traced on meta (kernels='cuda'), this step runs on cpu")
    assert "device='cpu'" in msg and "\n" not in msg
    g = trace(net, x, device="cpu")                       # traced where it runs: fine
    run_step(net, Plan({t.id: Decision.KEEP for t in g.planning_tensors()}), g, x)


def test_public_saved_peak_equals_the_private_count():
    model, inputs, graph, _ = _setup("add_later")
    plan, problem = _plan(graph, "swap")
    issue = _ledger.resolved_issue_points(problem, plan)
    want = _ledger.simulated_saved_peak(graph, plan, issue)
    assert simulated_saved_peak(graph, plan, problem=problem) == want
    assert simulated_saved_peak(graph, plan, issue_points=issue) == want
    first = _ledger.first_use_stages(graph, plan)
    assert simulated_saved_peak(graph, plan) == _ledger.simulated_saved_peak(graph, plan, first)


def test_public_saved_peak_refuses_bad_input_in_one_line():
    _, _, graph, _ = _setup("add_later")
    plan, problem = _plan(graph, "swap")
    swapped = plan.ids(Decision.SWAP)[0]
    other = Problem.build("tiny", budget=None)
    cases = [
        (ParameterError, dict(graph="g", plan=plan), "graph: expected a Graph"),
        (ParameterError, dict(graph=graph, plan="slack"), "plan: expected a Plan"),
        (PlanError, dict(graph=graph, plan=Plan({})), "plan.decisions"),
        (ParameterError, dict(graph=graph, plan=plan, problem=other), "problem: expected a Problem"),
        (ParameterError, dict(graph=graph, plan=plan, issue_points=[1]), "issue_points: expected a dict"),
        (PlanError, dict(graph=graph, plan=plan, issue_points={10**6: 0}), "not a tensor the plan swaps"),
        (PlanError, dict(graph=graph, plan=plan, issue_points={swapped: float("nan")}), "0.."),
        (PlanError, dict(graph=graph, plan=plan, issue_points={swapped: True}), "0.."),
    ]
    for err, kw, text in cases:
        with pytest.raises(err) as e:
            simulated_saved_peak(kw.pop("graph"), kw.pop("plan"), **kw)
        assert text in str(e.value) and "\n" not in str(e.value)
