"""The workload fields of ``TransformerSpec`` (docs/models.md, "Workload"): what the MLM head
computes, the loss's logits and workspace, and what a fractional budget's 100% counts. Each is
checked on a hand-sized BERT (1 layer, h=8, V=50, 2 x 16 tokens) against bytes written out here."""

import dataclasses
import math

import pytest

from slackswap import models
from slackswap.core.errors import ConfigError
from slackswap.core.plan import Decision, Plan
from slackswap.models import TransformerSpec, build
from slackswap.timeline import simulate
from slackswap.timeline.problem import GRAD_BYTES_PER_PARAM, Problem

B, S, H, V = 2, 16, 8, 50


def toy(**kw):
    return TransformerSpec("toy-bert", "bert", layers=1, hidden=H, heads=2, ffn=32, vocab=V, seq=S,
                           batch=B, dropout=0.0, causal=False, type_vocab=2, pooler=True, head="mlm", **kw)


def tensor(g, name):
    return next(t for t in g.tensors if t.name == name)


def op(g, name):
    return next(o for o in g.ops if o.name == name)


@pytest.mark.parametrize("fraction, positions", [(0.25, 4), (0.3, 5), (0.15625, 3), (1.0, 16)])
def test_mlm_head_runs_on_the_gathered_positions_only(fraction, positions):
    g = build(toy(mlm_fraction=fraction))
    tok = B * positions                       # rows of the transform, decoder and loss
    assert tensor(g, "mlm.dense").bytes == tok * H * 2
    assert tensor(g, "mlm.gelu").bytes == tok * H * 2
    assert tensor(g, "logits").bytes == tok * V * 2
    assert op(g, "lm_head").fwd_flops == 2.0 * tok * H * V
    assert op(g, "loss").workspace_bytes == tok * V * 4
    names = {t.name for t in g.tensors}
    if positions < S:   # the gather, its int64 positions (saved for the scatter of its backward)
        assert tensor(g, "masked_positions").bytes == tok * 8
        gather = op(g, "mlm.gather")
        assert tensor(g, "mlm.gather").bytes == tok * H * 2
        assert [g.tensors[t].name for t in gather.saves] == ["masked_positions"]
    else:
        assert "mlm.gather" not in names and "masked_positions" not in names


def test_nvidia_bert_fraction_gathers_80_of_512_and_20_of_128():
    s = models.load("bert-large", mlm_fraction=0.15625)
    assert s.head_positions == 80 and s.replace(seq=128).head_positions == 20
    g = build(s)
    assert tensor(g, "logits").bytes == 32 * 80 * 30522 * 2


def test_logits_dtype_and_loss_workspace():
    tok = B * S
    assert tensor(build(toy(logits_dtype="fp32")), "logits").bytes == tok * V * 4
    assert op(build(toy(logits_dtype="fp32")), "loss").workspace_bytes == tok * V * 4
    assert op(build(toy(loss_workspace=False)), "loss").workspace_bytes == 0
    assert tensor(build(toy(loss_workspace=False)), "logits").bytes == tok * V * 2


def _saved_and_inputs(g):
    ids = {t for o in g.ops for t in o.saves} | {t.id for t in g.tensors if t.producer is None}
    return sum(g.tensors[t].bytes for t in ids)


def test_budget_base_under_each_meaning():
    s = toy(mlm_fraction=0.25)
    g = build(s)
    saved = _saved_and_inputs(g)                 # every saved tensor and step input: kept by keep-all
    logits = tensor(g, "logits").bytes           # 8 x 50 x 2 = 800
    ws = op(g, "loss").workspace_bytes           # 8 x 50 x 4 = 1600
    assert (logits, ws) == (800, 1600)

    def base(**kw):
        return Problem.build(s.replace(**kw), "a100-80gb", None).budget_base_bytes

    # step (today): the loss's backward holds everything saved, the logits' gradient and its workspace
    assert base() == saved + logits + ws == Problem.build(s, "a100-80gb", None).keep_all_peak
    # forward: the loss's forward step holds everything saved, its 4-byte output and its workspace
    assert base(budget_scope="forward") == saved + 4 + ws
    assert base(budget_scope="forward", budget_logits=False) == saved - logits + 4
    # parameter gradients: 2 bytes per parameter on top
    assert base(budget_param_grads=True) == base() + GRAD_BYTES_PER_PARAM * s.params_per_gpu()
    # step without logits: the keep-all peak of the same graph with the logits and loss workspace at 0
    zeroed = dataclasses.replace(
        g, tensors=tuple(dataclasses.replace(t, bytes=0) if t.kind == "logits" else t for t in g.tensors),
        ops=tuple(dataclasses.replace(o, workspace_bytes=0) if o.kind == "loss" else o for o in g.ops))
    p0 = Problem.build(zeroed, "a100-80gb", None)
    keep = Plan({t.id: Decision.KEEP for t in zeroed.planning_tensors()})
    assert base(budget_logits=False) == simulate(p0, keep).peak_bytes == 12608


def test_fractional_budget_is_a_fraction_of_the_base():
    s = toy(budget_param_grads=True)
    p = Problem.build(s, "a100-80gb", 0.5)
    assert p.budget_base_bytes == p.keep_all_peak + 2 * s.params_per_gpu()
    assert p.budget_bytes == 0.5 * p.budget_base_bytes
    assert p.with_budget(0.75).budget_bytes == 0.75 * p.budget_base_bytes
    assert p.with_budget("20KiB").budget_bytes == 20480         # bytes stay bytes


@pytest.mark.parametrize("name", ["bert-large", "gpt2-xl", "llama-7b"])
def test_defaults_are_the_meaning_before_the_fields(name):
    spec = models.load(name)
    assert (spec.mlm_fraction, spec.logits_dtype, spec.loss_workspace, spec.budget_scope,
            spec.budget_logits, spec.budget_param_grads) == (1.0, "activation", True, "step", True, False)
    g = build(spec)
    tok = spec.batch * spec.seq
    assert tensor(g, "logits").bytes == tok * spec.vocab * 2
    assert op(g, "loss").workspace_bytes == tok * spec.vocab * 4
    assert "mlm.gather" not in {o.name for o in g.ops}


@pytest.mark.parametrize("field, value, expected", [
    ("mlm_fraction", math.nan, "mlm_fraction: expected a finite number; got nan"),
    ("mlm_fraction", 0.0, "mlm_fraction: must be > 0; got 0"),
    ("mlm_fraction", 1.5, "mlm_fraction: must be <= 1"),
    ("logits_dtype", "fp16", "logits_dtype: must be one of 'activation' or 'fp32'; got 'fp16'"),
    ("loss_workspace", "yes", "loss_workspace:"),
    ("budget_scope", "backward", "budget_scope: must be one of 'step' or 'forward'; got 'backward'"),
    ("budget_logits", 1.5, "budget_logits:"),
    ("budget_param_grads", None, "budget_param_grads:"),
])
def test_bad_workload_values_are_one_line_errors(field, value, expected):
    with pytest.raises(ConfigError) as e:
        toy(**{field: value})
    assert str(e.value).startswith(expected) and "\n" not in str(e.value)


def test_workload_fields_that_do_not_apply_are_refused():
    with pytest.raises(ConfigError, match=r"^mlm_fraction: must be 1 for head 'lm'"):
        models.load("gpt2-xl", mlm_fraction=0.5)
    with pytest.raises(ConfigError, match=r"^logits_dtype: must be 'activation' for implementation 'hf'"):
        models.load("gpt2-xl", implementation="hf", logits_dtype="fp32")


def test_model_file_may_leave_workload_fields_out_but_not_their_sources(tmp_path):
    text = (models.presets.models_dir() / "tiny.toml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(("budget_scope", "mlm_fraction"))]
    (tmp_path / "a.toml").write_text("\n".join(lines) + "\n")
    spec = models.presets.load_file(tmp_path / "a.toml")
    assert (spec.budget_scope, spec.mlm_fraction) == ("step", 1.0)
    top = [ln for ln in text.splitlines() if not ln.startswith("budget_scope = \"our")]
    top = [ln.replace('budget_scope = "step"', 'budget_scope = "forward"') for ln in top]
    (tmp_path / "b.toml").write_text("\n".join(top) + "\n")
    with pytest.raises(ConfigError, match="budget_scope"):
        models.presets.load_file(tmp_path / "b.toml")
