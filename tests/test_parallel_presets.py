"""The parallel presets from published configurations (docs/parallel.md, "Files"): each loads
with the published keys, builds with its model on a GPU of its source, and its static memory per
GPU is the one computed here from the parameter count by hand; malformed copies are refused."""

from __future__ import annotations

import warnings

import pytest

from slackswap import cli, models
from slackswap.core import hardware
from slackswap.core.errors import CapacityWarning, ConfigError
from slackswap.models import parallel as par
from slackswap.timeline.problem import Problem

# preset: (model, hardware of its source, GPUs of the published run, published keys)
PRESETS = {
    "gpt3-175b-tp8-pp8": ("gpt3-175b", "a100-80gb", 64,
                          dict(tp=8, sp=True, pp=8, microbatches=64, dp=1, zero=0)),
    "llama-2-70b-tp4-pp4": ("llama-2-70b", "h100-sxm", 1024,
                            dict(tp=4, sp=True, pp=4, microbatches=32, dp=64, zero=1)),
    "llama-2-7b-fsdp-8gpu": ("llama-2-7b", "a100-80gb", 8,
                             dict(tp=1, sp=False, pp=1, microbatches=1, dp=8, zero=3)),
}


def test_presets_listed():
    assert set(PRESETS) <= set(par.available())
    assert par.available() == sorted(par.available())


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_loads_with_published_keys_and_fits(name):
    model, hw, gpus, keys = PRESETS[name]
    p = par.load(name)
    assert {k: getattr(p, k) for k in keys} == keys
    assert p.gpus == gpus and p.schedule == "1f1b" and p.stage == 0 and p.name == name
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        prob = Problem.build(model, hw, budget=None, parallel=name)
    assert prob.memory_warnings == ()
    assert prob.graph.spec.tensor_parallel == keys["tp"]
    memory = hardware.load(hw).gpu.memory_bytes
    # a pipelined problem's keep-all peak is its 1F1B timeline's: stage 0 holds min(pp,
    # microbatches) micro-batches' activations at once, each all that its forward pass saved
    assert prob.keep_all_peak >= min(p.pp, p.microbatches) * prob.graph.saved_bytes()
    assert prob.static_bytes + prob.keep_all_peak <= memory


def test_gpt3_stage0_static_bytes_by_hand():
    """Stage 0 of 8 holds blocks 0-11 and the embeddings; per block, QKV, projection, fc1, fc2
    weights and the column biases (12h^2 + 7h) are split over t = 8, the two LayerNorms and two
    row biases (6h) replicated; the word embeddings split, the positions replicated; 16 bytes each
    (no ZeRO: dp = 1)."""
    h, t, v, s = 12288, 8, 51200, 2048
    psi = 12 * ((12 * h * h + 7 * h) // t + 6 * h) + v * h // t + s * h
    prob = Problem.build("gpt3-175b", "a100-80gb", budget=None, parallel="gpt3-175b-tp8-pp8")
    assert prob.static_bytes == 16 * psi
    assert round(prob.static_bytes / 2**30, 2) == 42.06


def test_llama70b_stage0_static_bytes_by_hand():
    """Stage 0 of 4 holds blocks 0-19 and the word embeddings; per block Q, O (h^2 each), K, V
    (h x 1024 each, 8 KV heads of 128) and gate, up, down (h x f each) are split over t = 4, the
    two RMSNorms (2h) replicated; ZeRO-1 over dp = 64: 2 + 2 bytes per parameter, and 12 sharded."""
    h, f, t, v, kv = 8192, 28672, 4, 32000, 8 * 128
    psi = 20 * ((2 * h * h + 2 * h * kv + 3 * h * f) // t + 2 * h) + v * h // t
    prob = Problem.build("llama-2-70b", "h100-sxm", budget=None, parallel="llama-2-70b-tp4-pp4")
    assert prob.static_bytes == 4 * psi + -(-12 * psi // 64)
    assert round(prob.static_bytes / 2**30, 2) == 16.94


def test_last_stage_holds_the_head():
    p = par.load("gpt3-175b-tp8-pp8").replace(stage=7)
    spec = models.load("gpt3-175b")
    first = par.load("gpt3-175b-tp8-pp8").static_bytes(spec)
    # tied embeddings: the last stage keeps its own copy of the word embeddings (Megatron-LM),
    # and the final LayerNorm instead of the position table
    assert p.static_bytes(spec) == first + 16 * (2 * 12288 - 2048 * 12288)


@pytest.mark.parametrize("edit, match", [
    (("microbatches = 64", "microbatches = 4"), "microbatches: must be >= pp \\(8\\) for the 1F1B schedule; got 4"),
    (("pp = 8", "pp = nan"), "pp: expected an integer"),
    (("\nsp = \"Korthikanti", "\nxsp = \"Korthikanti"), "sources: .*missing sp"),
])
def test_malformed_copy_is_one_line_naming_the_key(tmp_path, edit, match):
    text = (par.parallel_dir() / "gpt3-175b-tp8-pp8.toml").read_text()
    assert edit[0] in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError, match="bad.toml: " + match) as e:
        par.load(bad)
    assert "\n" not in str(e.value)


def test_preset_needs_a_model_it_divides(capsys):
    """A preset applied to a model it does not fit is refused on one line (exit code 2)."""
    rc = cli.main(["plan", "--model", "gpt2", "--parallel", "gpt3-175b-tp8-pp8"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "tp: must divide heads (12)" in err


def test_pipelined_stage_reports_its_host_peak_and_pinned_capacity():
    """A pipeline stage's step holds swapped copies of several micro-batches on the host: its
    host peak is counted over the unrolled micro-batches (more than one micro-batch's swapped
    bytes under swap-all, at most all of them), and a node whose pinned memory cannot hold it
    makes the step infeasible, naming node.pinned_capacity."""
    from slackswap import planners, simulate

    setting = {"tp": 2, "sp": True, "pp": 2, "microbatches": 4}
    p = Problem.build("tiny", "a100-80gb", 0.8, parallel=setting, layers=24)
    plan = planners.get("swap-all").plan(p)
    r = simulate(p, plan, detail=False)
    assert r.fits and r.microbatches == 4 and r.in_flight == 2
    one = r.swapped_bytes // 4
    assert one < r.host_peak_bytes <= r.swapped_bytes
    small = hardware.load("a100-80gb").with_node(pinned_capacity=r.host_peak_bytes)   # 4 GPUs copy
    q = Problem.build("tiny", small, 0.8, parallel=setting, layers=24)
    bad = simulate(q, plan, detail=False)
    assert not bad.fits and bad.reason.startswith("node.pinned_capacity: 4 GPU(s) x ")
