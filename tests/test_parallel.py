"""Parallel settings (docs/parallel.md): keys and their checks, ZeRO static memory, tensor- and
sequence-parallel activations against Korthikanti et al. 2022, their communication, pipeline
stages, and the default setting leaving every result as it was."""

from __future__ import annotations

import math
import warnings

import pytest

from slackswap import cli, models
from slackswap.core import costs, hardware
from slackswap.core.errors import CapacityWarning, ConfigError, ParameterError, UnknownNameError
from slackswap.models import Parallel, TransformerSpec, as_parallel
from slackswap.models import parallel as par
from slackswap.models.parallel import zero_static_bytes
from slackswap.timeline.problem import Problem


# ---------------------------------------------------------------- ZeRO static memory
def test_zero_paper_example_exact():
    """Rajbhandari et al. 2020, Fig. 1: Ψ = 7.5 B parameters, N = 64 GPUs, K = 12: 120 / 31.4 /
    16.6 / 1.9 GB per GPU for stages 0-3; the formulas exactly, the figure's rounding too."""
    psi, n = 7_500_000_000, 64
    want = [16 * psi, 4 * psi + 12 * psi // n, 2 * psi + 14 * psi // n, 16 * psi // n]
    got = [sum(zero_static_bytes(psi, n, z).values()) for z in range(4)]
    assert got == want == [120_000_000_000, 31_406_250_000, 16_640_625_000, 1_875_000_000]
    assert [round(x / 1e9, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]
    assert zero_static_bytes(psi, n, 2) == {"weights": 2 * psi, "gradients": 2 * psi // n,
                                            "optimizer": 12 * psi // n, "gathered": 0}
    assert zero_static_bytes(psi, n, 3, unit=10)["gathered"] == 2 * 2 * 10   # two units, 2 bytes


def test_llama_zero3_over_8_gpus_fits_an_a100():
    """Llama-7B: 100.41 GiB of state on one GPU (warned); ZeRO-3 over 8 GPUs: 16Ψ/8 plus two
    gathered blocks, and with keep-all activations it fits 80 GiB (no warning)."""
    spec = models.load("llama-7b")
    one = models.build(spec)
    assert one.static_bytes == 16 * spec.param_count() > hardware.load("a100-80gb").gpu.memory_bytes
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        p = Problem.build(spec, "a100-80gb", budget=None, parallel={"dp": 8, "zero": 3})
    block = spec.param_breakdown()["blocks"] // spec.layers
    assert p.static_bytes == 16 * spec.param_count() // 8 + 2 * 2 * block
    assert p.static_bytes + p.keep_all_peak <= hardware.load("a100-80gb").gpu.memory_bytes
    assert p.memory_warnings == ()
    assert (p.graph.ops, p.graph.tensors) == (one.ops, one.tensors)   # activations: as on one GPU


@pytest.mark.parametrize("zero, name", [(1, None), (2, "shard_grad_op"), (3, "full_shard")])
def test_zero_stages_of_a_model_and_fsdp_names(zero, name):
    s = models.load("gpt2")
    psi = s.param_count()
    p = Parallel(dp=4, zero=name or zero)
    assert p.zero == zero
    b = p.static_breakdown(s)
    assert b["optimizer"] == -(-12 * psi // 4)
    assert b["gradients"] == (-(-2 * psi // 4) if zero >= 2 else 2 * psi)
    assert b["weights"] == (-(-2 * psi // 4) if zero == 3 else 2 * psi)
    assert models.build(s, parallel=p).static_bytes == p.static_bytes(s) == sum(b.values())
    assert Parallel(dp=4, zero=zero, optimizer_bytes=4).static_breakdown(s)["optimizer"] == -(-4 * psi // 4)


# ---------------------------------------------------------------- Korthikanti et al. 2022
def gpt3_like(**kw) -> TransformerSpec:
    """A GPT-3 175B layer (Korthikanti et al. 2022, Table 3: h = 12288, a = 96, s = 2048), micro-
    batch 1, two layers, eager attention with dropout: the setting of their Table 2."""
    return TransformerSpec("gpt3-like", "gpt2", layers=2, hidden=12288, heads=96, ffn=4 * 12288,
                           vocab=51200, seq=2048, batch=1, attention="eager", dropout=0.1, **kw)


def layer_bytes(g, layer: int, selective: bool = False) -> int:
    """Saved bytes produced in one block, without the LayerNorm statistics (the paper leaves them
    out); ``selective``: without the tensors selective recomputation recomputes (softmax output,
    attention-dropout mask and output: the ``5as^2b`` term), docs/parallel.md."""
    saved = {t.id for t in g.planning_tensors()}
    core = (".attn.softmax", ".attn.dropout")
    return sum(g.tensors[t].bytes for op in g.ops if op.layer == layer for t in op.outputs
               if t in saved and g.tensors[t].kind != "stats" and not (selective and op.name.endswith(core)))


@pytest.mark.parametrize("selective", [False, True])
@pytest.mark.parametrize("t, sp", [(1, False), (8, False), (8, True)])
def test_korthikanti_table2_exact(t, sp, selective):
    """Table 2 / eq. 1-5: sbh(34 + 5as/h) (t = 1), sbh(10 + 24/t + 5as/(ht)) (tensor parallel),
    sbh/t (34 + 5as/h) (tensor + sequence parallel); selective recomputation drops the 5as/h term.
    Exact bytes per layer, both layers; the LayerNorm statistics (2 x 8 bytes per token, divided by
    t under sequence parallelism) are the one documented addition."""
    s = gpt3_like()
    g = models.build(s, parallel=Parallel(tp=t, sp=sp))
    sbh, a, seq, b = s.seq * s.batch * s.hidden, s.heads, s.seq, s.batch
    s2 = 0 if selective else 5 * a * seq * seq * b // t
    if t == 1:
        paper = 34 * sbh + s2
    elif not sp:
        paper = sbh * (10 + 24 // t) + s2
    else:
        paper = 34 * sbh // t + s2
    stats = 2 * 8 * seq * b // (t if sp else 1)
    saved = {x.id for x in g.planning_tensors()}
    for layer in (0, 1):
        assert layer_bytes(g, layer, selective) == paper
        assert sum(g.tensors[x].bytes for op in g.ops if op.layer == layer for x in op.outputs
                   if x in saved and g.tensors[x].kind == "stats") == stats


def test_tp_and_sp_communication_per_layer():
    """Megatron: without sp, two all-reduces forward and two backward per layer; with sp, an
    all-gather and a reduce-scatter in place of each (the same bytes forward) and the backward's
    extra all-gather of each saved shard. Ring volumes: all-reduce 2(t-1)/t n, the others (t-1)/t n."""
    s, t = gpt3_like(), 8
    n = s.seq * s.batch * s.hidden * s.act_bytes
    hw = hardware.load("a100-80gb")
    for sp, fwd, bwd in ((False, 4, 4), (True, 4, 6)):
        g = models.build(s, parallel=Parallel(tp=t, sp=sp))
        comm = [op for op in g.ops if op.kind == "comm" and op.layer == 1]
        assert len(comm) == 4
        assert sum(op.fwd_bytes for op in comm) == fwd * (t - 1) * n // t
        assert sum(op.bwd_bytes for op in comm) == bwd * (t - 1) * n // t
        assert not any(op.saves or op.fwd_flops or op.bwd_flops for op in comm)
        f, bw = costs.op_seconds(g, hw)
        for op in comm:
            assert f[op.id] == op.fwd_bytes / 300e9 and bw[op.id] == op.bwd_bytes / 300e9
    g1 = models.build(s, parallel=Parallel(tp=t, sp=True))
    assert not any(op.kind == "comm" for op in models.build(s.replace(tensor_parallel=8)).ops)
    assert sum(op.fwd_flops for op in g1.ops if op.layer == 1) == pytest.approx(
        sum(op.fwd_flops for op in models.build(s).ops if op.layer == 1 and op.kind in ("matmul", "attention")) / t
        + sum(op.fwd_flops for op in g1.ops if op.layer == 1 and op.kind not in ("matmul", "attention")))


def test_tp_needs_a_gpu_to_gpu_bandwidth():
    assert hardware.load("gh200").gpu.p2p_bytes_per_s is None
    assert hardware.load("h100-sxm").gpu.p2p_bytes_per_s == 450e9
    with pytest.raises(ParameterError, match="parallel: tp = 2 needs a GPU-to-GPU bandwidth; hardware gh200"):
        Problem.build("tiny", "gh200", parallel={"tp": 2})
    with pytest.raises(ConfigError, match="gpu.p2p_bandwidth: not given"):
        costs.analytical(models.build("tiny", parallel={"tp": 2}), hardware.load("gh200"))
    Problem.build("tiny", "gh200", parallel={"dp": 2, "zero": 1})   # no tensor parallelism: fine


# ---------------------------------------------------------------- the default changes nothing
@pytest.mark.parametrize("name", ["tiny", "bert-large"])
@pytest.mark.parametrize("setting", [None, {}, {"dp": 1, "tp": 1, "pp": 1}, Parallel(), "default"])
def test_default_setting_changes_nothing(name, setting):
    base = Problem.build(name, "a100-80gb", budget=None)
    p = Problem.build(name, "a100-80gb", budget=None, parallel=Parallel() if setting == "default" else setting)
    assert (p.graph.ops, p.graph.tensors, p.graph.static_bytes) == (base.graph.ops, base.graph.tensors,
                                                                   base.graph.static_bytes)
    assert p.costs == base.costs and p.keep_all_peak == base.keep_all_peak
    assert p.min_feasible_bytes == base.min_feasible_bytes and p.summary() == base.summary()


# ---------------------------------------------------------------- pipeline stages
def test_pipeline_stages_split_layers_and_parameters():
    s = models.load("gpt2")   # 12 layers, tied embeddings
    stages = [models.build(s, parallel=Parallel(pp=3, stage=i)) for i in range(3)]
    assert [g.layers for g in stages] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert stages[0].ops[0].kind == "embedding" and stages[0].ops[-1].kind != "loss"
    assert stages[1].tensors[0].name == "stage_input" and stages[2].ops[-1].kind == "loss"
    psi = [Parallel(pp=3, stage=i).stage_params(s)[0] for i in range(3)]
    assert sum(psi) == s.param_count() + s.vocab * s.hidden   # the last stage's copy of the tied table
    assert psi[0] > psi[1] and [g.static_bytes for g in stages] == [16 * x for x in psi]
    # a middle stage saves what its blocks save on one GPU, except its last block's output: that
    # one is sent to the next stage (whose received input the first block keeps)
    whole = models.build(s)
    sent = 2 * s.tokens * s.hidden
    assert stages[1].saved_bytes() == sum(b for i, b in _per_layer(whole).items() if 4 <= i <= 7) - sent


def _per_layer(g) -> dict:
    saved = {t.id for t in g.planning_tensors()}
    out: dict = {}
    for op in g.ops:
        if op.layer is not None:
            out[op.layer] = out.get(op.layer, 0) + sum(g.tensors[t].bytes for t in op.outputs if t in saved)
    return out


# ---------------------------------------------------------------- keys, files and errors
@pytest.mark.parametrize("setting, match", [
    ({"tp": 3}, "parallel: tp: must divide heads \\(4\\)"),
    ({"pp": 3}, "parallel: pp: must divide layers \\(2\\) of tiny; got 3"),
    ({"pp": 2, "microbatches": 1}, "parallel: microbatches: must be >= pp \\(2\\)"),
    ({"pp": 2, "stage": 2}, "parallel: stage: must be in 0 .. pp - 1 = 1; got 2"),
    ({"sp": True}, "parallel: sp: sequence parallelism needs tp > 1"),
    ({"zero": 3}, "parallel: zero: stage 3 shards over dp; needs dp > 1"),
    ({"zero": 4, "dp": 2}, "parallel: zero: expected a ZeRO stage 0, 1, 2 or 3, or one of 'no_shard', 'shard_grad_op', 'full_shard'; got 4"),
    ({"dp": math.nan}, "parallel: dp: expected an integer"),
    ({"dp": True}, "parallel: dp: expected an integer"),
    ({"dp": 0}, "parallel: dp: must be >= 1; got 0"),
    ({"schedule": "interleaved"}, "parallel: schedule: must be one of '1f1b'; got 'interleaved'"),
    ({"optimizer_bytes": -1}, "parallel: optimizer_bytes: must be >= 0"),
    ({"tensor": 2}, "parallel: tensor: unknown key; allowed: dp, zero, tp, sp, pp"),
    ("no-such-setting", "unknown parallel setting 'no-such-setting'; known: gpt3-175b-tp8-pp8, llama-2-70b-tp4-pp4, llama-2-7b-fsdp-8gpu"),
    (3, "parallel: expected a dict of dp, zero"),
])
def test_bad_settings_one_line_naming_the_key(setting, match):
    with pytest.raises((ConfigError, UnknownNameError), match=match) as e:
        models.build("tiny", parallel=setting)
    assert "\n" not in str(e.value)


def test_tp_dividing_heads_but_not_seq_under_sp():
    with pytest.raises(ConfigError, match="parallel: sp: seq \\(15\\) of tiny must be divisible by tp \\(2\\)"):
        models.build("tiny", seq=15, parallel={"tp": 2, "sp": True})
    with pytest.raises(ConfigError, match="parallel: tp: the model tiny sets tensor_parallel = 2"):
        models.build("tiny", tensor_parallel=2, parallel={"tp": 4})


def test_preset_files_are_sourced_and_load():
    assert par.available() == ["gpt3-175b-tp8-pp8", "llama-2-70b-tp4-pp4", "llama-2-7b-fsdp-8gpu", "megatron-tp8-sp"]
    f = par.load("llama-2-7b-fsdp-8gpu")
    assert (f.dp, f.zero, f.tp, f.name) == (8, 3, 1, "llama-2-7b-fsdp-8gpu")
    m = as_parallel("megatron-tp8-sp")
    assert (m.tp, m.sp, m.dp) == (8, True, 1)
    assert models.build("llama-2-7b", parallel="megatron-tp8-sp").spec.tensor_parallel == 8


def test_file_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text('dp = 8\nzero = 3\n[sources]\ndp = "x"\n')
    with pytest.raises(ConfigError, match="p.toml: sources: every key set needs a source; missing zero"):
        par.load(bad)
    bad.write_text('dp = "eight"\n')
    with pytest.raises(ConfigError, match="p.toml: dp: expected an integer; got 'eight'"):
        par.load(bad)
    bad.write_text('dp = nan\n')
    with pytest.raises(ConfigError, match="p.toml: dp: expected an integer"):
        par.load(bad)


@pytest.mark.parametrize("text, match", [
    ("dp=8,zero=9", "--parallel: zero: expected a ZeRO stage 0, 1, 2 or 3"),
    ("dp=8,dp=4", "--parallel: dp: given twice"),
    ("dp8", "unknown parallel setting 'dp8'"),
    ("dp=8,", "--parallel: expected KEY=VALUE pairs"),
    ("tp=3", "parallel: tp: must divide heads"),
])
def test_cli_bad_parallel_is_one_line_exit_2(capsys, text, match):
    assert cli.main(["plan", "--model", "tiny", "--parallel", text]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_graph_with_parallel(capsys):
    assert cli.main(["graph", "tiny", "--parallel", "tp=2,sp=true", "--hardware", "a100-80gb"]) == 0
    out = capsys.readouterr().out
    g = models.build("tiny", parallel={"tp": 2, "sp": True})
    assert f"{len(g.ops)} ops" in out


def test_cli_plan_with_parallel(capsys):
    assert cli.main(["plan", "--model", "tiny", "--parallel", "dp=2,zero=3", "--planner", "keep-all"]) == 0
    out = capsys.readouterr().out
    p = Problem.build("tiny", parallel={"dp": 2, "zero": 3})
    assert "static memory" in out and str(p).splitlines()[2].strip() in out


# ---------------------------------------------------------------- sweeps
def test_sweep_over_parallel_settings():
    from slackswap import experiments

    df = experiments.sweep(["tiny"], ["a100-80gb"], [0.5], ["keep-all"], workers=1, progress=False, bound=False,
                           parallel=[None, {"dp": 2, "zero": 3}, {"tp": 2, "sp": True}])
    assert df["parallel"].tolist() == ["", '{"dp": 2, "zero": 3}', '{"sp": true, "tp": 2}']
    one = Problem.build("tiny", budget=0.5)
    tp = Problem.build("tiny", budget=0.5, parallel={"tp": 2, "sp": True})
    assert df["budget_bytes"].tolist() == [one.budget_bytes, one.budget_bytes, tp.budget_bytes]
    assert df["ideal_step_time_s"].iloc[2] == tp.ideal_step_s


def test_sweep_file_parallel_key_checked_before_any_run():
    from slackswap.experiments.sweepfiles import sweep_from_dict

    doc = {"models": "tiny", "budgets": [0.5], "planners": ["keep-all"]}
    cfg = sweep_from_dict({**doc, "parallel": ["llama-2-7b-fsdp-8gpu", {"tp": 2}]})
    assert cfg["parallel"] == ["llama-2-7b-fsdp-8gpu", {"tp": 2}]
    with pytest.raises(ConfigError, match="sweep: parallel\\[1\\]: zero: expected a ZeRO stage"):
        sweep_from_dict({**doc, "parallel": [{"dp": 2}, {"dp": 2, "zero": 7}]})
    with pytest.raises(ConfigError, match="sweep: parallel\\[1\\]: expected each value once"):
        sweep_from_dict({**doc, "parallel": [{"dp": 2}, {"dp": 2}]})
    with pytest.raises(ConfigError, match="sweep: parallel: dp: expected an integer"):
        sweep_from_dict({**doc, "parallel": {"dp": math.inf}})


def test_cli_compare_with_parallel(capsys):
    assert cli.main(["compare", "--model", "tiny", "--parallel", "tp=2", "--planners", "keep-all"]) == 0
    out = capsys.readouterr().out
    p = Problem.build("tiny", parallel={"tp": 2})
    assert f"({p.budget_bytes / 2**30:.2f} GiB)" in out


def test_problem_carries_its_setting():
    p = Problem.build("tiny", parallel="llama-2-7b-fsdp-8gpu")
    assert p.parallel.dp == 8 and p.summary()["parallel"] == p.parallel.describe()
    assert "parallel: dp=8 zero=3 tp=1 sp=false pp=1 microbatches=1 stage=0" in str(p)
    assert Problem.build("tiny", parallel={}).parallel is None and "parallel" not in Problem.build("tiny").summary()


def test_settings_only_for_models_the_builder_shards():
    g = models.build("tiny")
    with pytest.raises(ParameterError, match="Problem.build\\(parallel\\): a Graph is already one GPU's graph"):
        Problem.build(g, parallel={"dp": 2})
    with pytest.raises(ConfigError, match="parallel: a traced model \\('hf:tiny-gpt2'\\) is one GPU's graph"):
        models.build("hf:tiny-gpt2", parallel={"tp": 2})
    Problem.build(g, parallel=None)   # no setting: as before


@pytest.mark.parametrize("key, value, match", [
    ("sp", "yes", "sp: expected true or false; got 'yes'"),
    ("zero", True, "zero: expected a ZeRO stage 0, 1, 2 or 3, or one of .no_shard., .shard_grad_op., .full_shard.; got True"),
    ("microbatches", 2.5, "microbatches: expected an integer"),
    ("stage", -1, "stage: must be >= 0; got -1"),
])
def test_malformed_values_of_each_key(key, value, match):
    with pytest.raises(ConfigError, match=match) as e:
        Parallel(**{key: value})
    assert str(e.value).startswith("parallel: ") and "\n" not in str(e.value)


def test_cli_robustness_sweep_refuses_parallel(capsys):
    assert cli.main(["robustness", "--sweep", "data/sweeps/slack_margin.toml", "--parallel", "dp=2"]) == 2
    assert "expected no --parallel with a sweep file" in capsys.readouterr().err


def test_cli_compare_with_a_parallel_file(capsys, tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\ntp = 2\n[sources]\ntp = "our test setting"\n')
    assert cli.main(["compare", "--model", "tiny", "--parallel", str(f), "--planners", "keep-all"]) == 0
    p = Problem.build("tiny", parallel=str(f))
    assert p.parallel.tp == 2 and f"({p.budget_bytes / 2**30:.2f} GiB)" in capsys.readouterr().out
