"""Two corners of the PyTorch API: ``run_step`` returns the step's loss, and ``trace`` warns when
the model checkpoints itself (docs/executor.md, docs/trace.md)."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exec_models import build  # noqa: E402

from slackswap.core.errors import SlackSwapWarning  # noqa: E402
from slackswap.core.plan import Decision, Plan  # noqa: E402
from slackswap.torch import apply, run_step, trace  # noqa: E402


@pytest.fixture(scope="module")
def traced():
    model, inputs = build("gpt2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlackSwapWarning)   # no warning without checkpointing
        graph = trace(model, inputs, device="cpu")
    return model, inputs, graph


def test_run_step_returns_the_loss_of_the_planned_step(traced):
    model, inputs, graph = traced
    plan = Plan({t.id: Decision.RECOMPUTE for t in graph.planning_tensors()})
    stats = run_step(copy.deepcopy(model), plan, graph, inputs)
    assert isinstance(stats.loss, torch.Tensor) and not stats.loss.requires_grad
    plain = copy.deepcopy(model)(**inputs).loss.detach()
    assert torch.equal(stats.loss, plain)   # bitwise: the same kernels on the same values
    m = copy.deepcopy(model)
    with apply(m, plan, graph) as run:
        m(**inputs).loss.backward()         # under apply the loss is the caller's own
    assert run.stats.loss is None


def test_trace_warns_when_the_model_checkpoints_itself(traced):
    model, inputs, plain = traced
    model = copy.deepcopy(model)
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        enable()
    with pytest.warns(SlackSwapWarning, match="the model checkpoints itself .* disable it before tracing"):
        ckpt = trace(model, inputs, device="cpu")
    # what the warning is about: the checkpointed graph saves a small part of the plain one
    assert ckpt.saved_bytes() < 0.2 * plain.saved_bytes()
