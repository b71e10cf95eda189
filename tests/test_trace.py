"""slackswap.torch.trace on small models run for real on CPU, checked against independent counts
(saved-tensor hooks and FlopCounterMode in the test), and the pipeline on traced graphs."""

import doctest
import importlib
import math
import subprocess
import sys

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from slackswap import bounds, planners
from slackswap.core import profile
from slackswap.core.errors import ConfigError
from slackswap.core.graph import Graph
from slackswap.core.plan import Decision, Plan
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem
from slackswap.torch import TraceInfo, measured_costs, trace
from slackswap.torch import hf_trace as hf


def independent_counts(model, inputs, loss_fn):
    """Saved bytes (storages saved for backward, each once, less parameters and step inputs),
    parameter count and forward / backward FLOPs, measured without the tracer."""
    args = tuple(inputs.values()) if isinstance(inputs, dict) else tuple(inputs)
    params = {p.untyped_storage().data_ptr(): p for p in model.parameters()}
    skip = set(params) | {t.untyped_storage().data_ptr() for t in args}
    skip |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    saved = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    model.train()
    with FlopCounterMode(display=False) as fwd:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn(model(**inputs) if isinstance(inputs, dict) else model(*inputs))
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    model.zero_grad(set_to_none=True)
    n_params = sum(p.numel() for p in params.values())
    return sum(saved.values()), n_params, fwd.get_total_flops(), bwd.get_total_flops()


SMALL = [("tiny-gpt2", 2, 64), ("tiny-bert", 2, 128), ("tiny-llama", 2, 128)]


@pytest.mark.parametrize("name, batch, seq", SMALL)
def test_small_hf_models_on_cpu_match_independent_counts(name, batch, seq):
    cfg, _ = hf.load_config(name)
    model = hf.build_model(cfg, device="cpu", dtype="fp32")
    inputs = hf.example_inputs(model, batch, seq, "cpu")
    saved, n_params, f_fwd, f_bwd = independent_counts(model, inputs, lambda o: o.loss)
    g = trace(model, inputs, device="cpu", name=name)
    assert isinstance(g, Graph) and isinstance(g.spec, TraceInfo)
    assert g.saved_bytes() == saved
    assert g.spec.params == n_params and g.static_bytes == 16 * n_params
    assert sum(op.fwd_flops for op in g.ops) == f_fwd > 0
    assert sum(op.bwd_flops for op in g.ops) == f_bwd > 0
    assert g.spec.unattributed_bwd_flops == 0
    assert g.layers == [0, 1]
    kinds = {op.kind for op in g.ops}
    assert {"matmul", "norm", "embedding", "loss"} <= kinds
    # on cpu every op is timed
    assert len(g.spec.op_times_s) == len(g.ops) and all(f >= 0 and b >= 0 for f, b in g.spec.op_times_s)


def test_pack_order_names_every_planning_tensor():
    cfg, _ = hf.load_config("tiny-gpt2")
    model = hf.build_model(cfg, device="cpu", dtype="fp32")
    inputs = hf.example_inputs(model, 2, 32, "cpu")
    calls = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: calls.append(t) or t, lambda t: t):
        model(**inputs).loss.backward()
    model.zero_grad(set_to_none=True)
    g = trace(model, inputs, device="cpu")
    info = g.spec
    assert len(info.pack_order) == len(info.pack_op) == len(calls)
    assert {t for t in info.pack_order if t >= 0} == {t.id for t in g.planning_tensors()}
    for tid, oid in zip(info.pack_order, info.pack_op, strict=True):
        if tid >= 0:
            assert tid in g.ops[oid].saves
    # parameters are never graph tensors: the first pack of a Linear-like op is marked -1
    n_param_packs = sum(any(c.untyped_storage().data_ptr() == p.untyped_storage().data_ptr()
                            for p in model.parameters()) for c in calls)
    assert info.pack_order.count(-1) >= n_param_packs > 0
    assert len(info.op_signature) == len(g.ops)
    assert all(s.startswith("aten.") for s in info.op_signature)


def test_keep_all_at_unlimited_budget_simulates_to_the_ideal_step():
    g = hf.build_graph("tiny-gpt2", batch=2, seq=64)
    pr = Problem.build(g, "a100-80gb", budget=None)
    res = simulate(pr, Plan({t: Decision.KEEP for t in pr.planning_ids}))
    assert res.feasible and res.step_time_s == pytest.approx(pr.ideal_step_s, rel=1e-12)
    assert res.peak_bytes == pr.keep_all_peak


def test_meta_trace_uses_gpu_kernels():
    g = hf.build_graph("tiny-gpt2", batch=2, seq=64)
    assert g.spec.device == "meta" and g.spec.kernels == "cuda" and g.spec.op_times_s is None
    kinds = [op.kind for op in g.ops]
    # per block: residual and MLP dropout (attention dropout runs inside flash), + embeddings
    assert kinds.count("attention") == 2 and kinds.count("dropout") == 2 * 2 + 1
    att = next(op for op in g.ops if op.kind == "attention")
    # flash saves q/k/v (one storage), out, fp32 log-sum-exp, rng state; no s x s tensor
    assert max(g.tensors[t].bytes for t in att.saves) < 2 * 64 * 64 * 3 * 2 + 1
    masks = [g.tensors[t] for op in g.ops if op.kind == "dropout" for t in op.saves]
    assert masks and all(t.kind == "mask" for t in masks)  # 1-byte native_dropout masks
    eager = hf.build_graph("tiny-gpt2", batch=2, seq=64, attention="eager")
    assert eager.spec.attention == "eager" and eager.saved_bytes() > g.saved_bytes()


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu_(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(x.flatten(1))


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                                 torch.nn.GELU(), torch.nn.Linear(64, 1)), (16, 32)),
    (SmallCNN, (4, 3, 16, 16)),
])
def test_models_without_blocks_trace_and_plan(make, shape, tmp_path):
    model = make()
    x = torch.randn(*shape)
    loss_fn = lambda out, *_: out.pow(2).mean()  # noqa: E731
    saved, n_params, f_fwd, f_bwd = independent_counts(model, (x,), lambda o: loss_fn(o))
    g = trace(model, (x,), loss_fn, device="cpu")
    assert g.saved_bytes() == saved and g.spec.params == n_params
    assert sum(op.fwd_flops for op in g.ops) == f_fwd
    assert sum(op.bwd_flops for op in g.ops) == f_bwd
    assert "matmul" in {op.kind for op in g.ops}
    pr = Problem.build(g, "a100-80gb", budget=None)
    pr = pr.with_budget(max(pr.min_feasible_bytes, int(0.6 * pr.keep_all_peak)))
    res = simulate(pr, planners.get("slack").plan(pr))
    assert res.feasible and res.peak_bytes <= pr.budget_bytes
    assert bounds.lower_bound(pr)[0] <= res.step_time_s * (1 + 1e-9)
    for name in ("capuchin", "chen-greedy", "dp-checkpoint"):  # plans and scores; may not fit
        assert simulate(pr, planners.get(name).plan(pr)).step_time_s > 0
    # measured costs from the CPU timings
    cm = measured_costs(g)
    pm = Problem.from_graph(g, cm)
    assert pm.ideal_step_s == pytest.approx(sum(f + b for f, b in g.spec.op_times_s))
    # ... in the profile format of docs/profile.md, read back without the tracer
    g2, cm2 = profile.load(profile.save(tmp_path / "step.json", g, cm))
    assert len(g2.ops) == len(g.ops) and g2.saved_bytes() == g.saved_bytes()
    assert cm2.fwd_s == pytest.approx(cm.fwd_s) and cm2.bwd_s == pytest.approx(cm.bwd_s)


def test_cnn_inplace_relu_is_fused_into_its_producer():
    g = trace(SmallCNN(), (torch.randn(2, 3, 16, 16),), lambda o, *_: o.sum(), device="cpu")
    assert "aten.relu_.default" in g.spec.aten_ops
    assert not any(s.startswith("aten.relu_") for s in g.spec.op_signature)


def test_layer_of_callback_and_block_default():
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(3)])
    g = trace(model, (torch.randn(2, 8),), device="cpu")
    assert [op.layer for op in g.ops if op.kind == "matmul"] == [0, 1, 2]
    g2 = trace(model, (torch.randn(2, 8),), device="cpu", layer_of=lambda path: 7 if path else None)
    assert {op.layer for op in g2.ops if op.kind == "matmul"} == {7}


def test_bad_arguments_name_the_field():
    m = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigError, match="device: must be one of meta, cpu, cuda"):
        trace(m, (torch.randn(1, 2),), device="tpu")
    with pytest.raises(ConfigError, match="example_inputs"):
        trace(m, torch.randn(1, 2))
    with pytest.raises(ConfigError, match="kernels"):
        trace(m, (torch.randn(1, 2),), kernels="triton")
    with pytest.raises(ConfigError, match="device: the model lives on meta"):
        trace(torch.nn.Linear(2, 2, device="meta"), (torch.randn(1, 2),), device="cpu")
    with pytest.raises(ConfigError, match="loss_fn"):
        trace(m, (torch.randn(1, 2),), lambda out, *_: out, device="cpu")


@pytest.mark.parametrize("module, least", [("trace", 5), ("hf_trace", 2), ("measured_costs", 2)])
def test_doctests(module, least):
    """The module's examples run (at least ``least`` of them) and pass."""
    r = doctest.testmod(importlib.import_module(f"slackswap.torch.{module}"))
    assert r.failed == 0 and r.attempted >= least, r


def test_package_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import slackswap, slackswap.models, slackswap.timeline.problem\n"
        "from slackswap.torch import TraceInfo, trace, measured_costs, simulated_saved_peak\n"
        "from slackswap.core.errors import ConfigError\n"
        "from slackswap import Decision, Plan\n"
        "g = slackswap.models.build('tiny')\n"
        "assert g.name == 'tiny'\n"
        "keep = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})\n"
        "assert simulated_saved_peak(g, keep) == g.saved_bytes()\n"
        "for f in (lambda: trace(None, ()), lambda: slackswap.models.build('hf:tiny-gpt2')):\n"
        "    try:\n"
        "        f()\n"
        "    except ConfigError as e:\n"
        "        assert 'torch' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError('no error')\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_measured_costs_needs_times():
    g = hf.build_graph("tiny-gpt2", batch=2, seq=64)
    with pytest.raises(ConfigError, match="no measured op times"):
        measured_costs(g)
    assert math.isinf(Problem.build(g, "a100-80gb", budget=None).budget_bytes)


def test_aten_ops_are_those_of_a_plain_run():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    cfg, _ = hf.load_config("tiny-gpt2")
    model = hf.build_model(cfg, device="cpu", dtype="fp32")
    inputs = hf.example_inputs(model, 2, 16, "cpu")
    model.train()
    # as a runtime applying a plan runs it: under saved-tensor hooks (without hooks autograd
    # dispatches a detach for some saved outputs)
    with Log() as log, torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert model(**inputs).loss.requires_grad
    g = trace(model, inputs, device="cpu")
    assert list(g.spec.aten_ops) == log.ops


def test_backward_bytes_count_kernels_not_views():
    # y = x W^T without bias; the backward's only kernel is the weight-gradient mm
    # ([8, 4] @ [4, 16] -> [8, 16], fp32); the transposes around it are views and move no bytes
    g = trace(torch.nn.Linear(8, 16, bias=False), (torch.randn(4, 8),), device="cpu")
    assert sum(op.bwd_bytes for op in g.ops) == 4 * (8 * 4 + 4 * 16 + 8 * 16)
    assert sum(op.bwd_flops for op in g.ops) == 2 * 8 * 4 * 16
