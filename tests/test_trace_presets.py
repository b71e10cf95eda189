"""Full-size HF presets traced on meta, held against the analytical presets; the CLI, sweeps and
bounds on traced graphs."""

import pandas as pd
import pytest

from slackswap import bounds, cli, experiments, models
from slackswap.core.errors import ConfigError, UnknownNameError
from slackswap.torch import hf_trace as hf

PRESETS = ["bert-large", "gpt2-xl", "llama-7b"]
COMPUTE = ("matmul", "attention")


def _flops(g, which):
    return sum(getattr(op, which) for op in g.ops if op.kind in COMPUTE)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_traces_fast_and_match_params_and_flops(name):
    t = models.build(f"hf:{name}")
    a = models.build(name)
    assert t.spec.device == "meta" and t.spec.trace_s < 30
    assert (t.spec.batch, t.spec.seq) == (a.spec.batch, a.spec.seq)
    # BertForPreTraining has the 2-way next-sentence classifier the analytical preset leaves out
    extra = 2 * a.spec.hidden + 2 if name == "bert-large" else 0
    assert t.spec.params == a.spec.param_count() + extra
    assert _flops(t, "fwd_flops") == _flops(a, "fwd_flops")
    assert _flops(t, "bwd_flops") == _flops(a, "bwd_flops")
    assert t.spec.unattributed_bwd_flops == 0
    assert t.layers == list(range(a.spec.layers))


def test_bert_large_saved_bytes_match_the_analytical_preset():
    # flash attention's RNG seed and offset (24 bytes per block) and the next-sentence loss
    t, a = models.build("hf:bert-large"), models.build("bert-large")
    assert t.saved_bytes() - a.saved_bytes() == 24 * 24 + 132


def test_hf_names_and_overrides():
    assert {"bert-large", "gpt2-xl", "llama-7b", "tiny-gpt2"} <= set(hf.available())
    g = models.build("hf:tiny-llama", batch=3, seq=16, dtype="fp32")
    assert (g.spec.batch, g.spec.seq, g.spec.dtype) == (3, 16, "fp32")
    assert models.build("hf:tiny-llama", batch=3, seq=16, dtype="fp32") is g  # cached
    with pytest.raises(ConfigError, match="tensor_parallel: not an option .* allowed: batch"):
        models.build("hf:tiny-gpt2", tensor_parallel=2)
    with pytest.raises(UnknownNameError, match="nosuch"):
        models.build("hf:nosuch")
    with pytest.raises(ConfigError, match="attention: must be one of flash, eager"):
        models.build("hf:tiny-gpt2", attention="ring")


def test_hf_config_path(tmp_path):
    p = tmp_path / "config.json"
    p.write_text((hf.hf_dir() / "tiny-bert.json").read_text())
    g = models.build(f"hf:{p}", seq=32, batch=2)
    assert g.name == f"hf:{tmp_path.name}" and g.spec.model_name == "BertForPreTraining"
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "gpt2", "architectures": ["NoSuchModel"], "n_layer": 2, "n_embd": 64, '
                   '"n_head": 4, "vocab_size": 100, "n_positions": 64}')
    with pytest.raises(ConfigError, match="architectures"):
        models.build(f"hf:{bad}", seq=8)


def test_cli_plans_a_traced_preset(capsys):
    assert cli.main(["plan", "--model", "hf:gpt2-xl", "--budget", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "Problem hf:gpt2-xl" in out and "simulated step" in out and "(fits)" in out
    assert cli.main(["graph", "hf:tiny-gpt2", "--seq", "32"]) == 0
    assert "seq 32, batch 1, flash attention" in capsys.readouterr().out


def test_sweep_and_bound_on_traced_graphs():
    df = experiments.sweep(["hf:tiny-gpt2"], "a100-80gb", [0.6, 0.8], ["slack", "chen-greedy"],
                           workers=1, progress=False)
    assert len(df) == 4 and df["model"].eq("hf:tiny-gpt2").all()
    slack = df[df["planner"] == "slack"]
    assert slack["fits"].all()
    assert (slack["step_time_s"] >= slack["lower_bound_s"] * (1 - 1e-9)).all()
    from slackswap.timeline.problem import Problem

    pr = Problem.build("hf:tiny-gpt2", "a100-80gb", budget=0.5)
    assert bounds.lower_bound(pr)[0] >= pr.ideal_step_s


def test_reproduce_on_traced_graphs(capsys, tmp_path):
    rc = cli.main(["reproduce", "--graphs", "traced", "--models", "tiny", "--budget", "0.9",
                   "--planners", "slack", "--workers", "1", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0 and "Throughput ratio" in out
    assert err.strip().splitlines()[0].startswith("[1/1] hf:tiny slack")
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert runs["model"].tolist() == ["tiny"] and runs["fits"].tolist() == [True]
    # the traced graph of the tiny preset, at the preset's batch and sequence length
    g = models.build("hf:tiny")
    assert (g.spec.batch, g.spec.seq, g.spec.params) == (2, 16, models.load("tiny").param_count())


def test_fidelity_doc_generator(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "update_fidelity.py"
    spec = importlib.util.spec_from_file_location("update_fidelity", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "fidelity.md"
    assert mod.main(["--no-reproduce", "--out", str(out)]) == 0
    text = out.read_text()
    for name in PRESETS:
        assert f"| {name} " in text and f"### {name}: analytical vs traced" in text
    # the BERT block differs only by flash attention's 24-byte RNG state
    assert "traced 545.250 MiB, analytical 545.250 MiB, difference +0.000 MiB (+24 B)" in text


def _per_layer(g):
    saved = {t.id for t in g.planning_tensors()}
    out = {}
    for t in g.tensors:
        if t.id in saved:
            layer = g.ops[t.producer].layer
            out[layer] = out.get(layer, 0) + t.bytes
    return out


@pytest.mark.parametrize("name", PRESETS)
def test_traced_presets_match_the_hf_setting_within_2_percent(name):
    """The analytical ``implementation="hf"`` setting against the trace of the same HF model at
    full size on meta: parameters, matmul + attention FLOPs, saved bytes of every block and
    outside the blocks, all saved bytes and the keep-all peak, each within 2%."""
    from slackswap.timeline.problem import Problem

    t = models.build(f"hf:{name}")
    h = models.build(name, implementation="hf")

    def close(x, y):
        return abs(x / y - 1) <= 0.02

    assert close(h.spec.param_count(), t.spec.params)
    assert close(_flops(h, "fwd_flops"), _flops(t, "fwd_flops"))
    assert close(_flops(h, "bwd_flops"), _flops(t, "bwd_flops"))
    lt, lh = _per_layer(t), _per_layer(h)
    assert set(lt) == set(lh)
    assert all(close(lh[k], lt[k]) for k in lt), (lh, lt)
    assert close(h.saved_bytes(), t.saved_bytes())
    pt, ph = (Problem.build(g, "a100-80gb", budget=None).keep_all_peak for g in (t, h))
    assert close(ph, pt)
    # ... while the fused default misses what HF saves in GPT-2 and Llama by far more than 2%
    if name != "bert-large":
        assert models.build(name).saved_bytes() < 0.8 * t.saved_bytes()


def test_editing_a_traced_models_config_misses_the_sweep_cache(tmp_path):
    """A traced model's cache key holds its config's content, not its name."""
    import json

    from slackswap.core.paths import data_dir
    from slackswap.experiments import RunSpec

    cfg = json.loads((data_dir() / "hf" / "tiny-gpt2.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    run = RunSpec(f"hf:{path}", "a100-80gb", None, 0.5, "slack", "slack")
    before = run.key()
    assert run.key() == before
    path.write_text(json.dumps({**cfg, "n_layer": cfg["n_layer"] + 1}))
    assert run.key() != before


def test_a_traced_model_with_a_million_layers_is_refused_before_it_is_built(tmp_path):
    import json
    import time

    from slackswap.core.errors import ConfigError
    from slackswap.core.paths import data_dir

    cfg = json.loads((data_dir() / "hf" / "tiny-gpt2.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "n_layer": 10**6}))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"about 60,000,000 ops \(1,000,000 layers\), more than max_ops=100,000"):
        models.build(f"hf:{path}")
    assert time.perf_counter() - t0 < 30   # refused from the config, not after building (generous)
