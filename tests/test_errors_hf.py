"""HF config paths for tracing (hf:...): one line naming the file."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import json  # noqa: E402

from slackswap.core.errors import ConfigError  # noqa: E402
from slackswap.models import build  # noqa: E402
from slackswap.torch.hf_trace import load_config  # noqa: E402

GPT2 = dict(model_type="gpt2", n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64)
LLAMA = dict(model_type="llama", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128, vocab_size=100, max_position_embeddings=64)


def test_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "cfg.json").write_text(json.dumps(GPT2))
    cfg, name = load_config("~/cfg.json")
    assert cfg == GPT2 and name == "cfg"


def test_binary_file_is_one_line(tmp_path):
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(ConfigError) as exc:
        load_config(str(p))
    assert str(exc.value) == f"{p}: expected a JSON text file; got binary data"


def test_missing_file_is_one_line(tmp_path):
    p = tmp_path / "none.json"
    with pytest.raises(ConfigError) as exc:
        load_config(str(p))
    assert str(exc.value) == f"config.json: cannot read {p}: No such file or directory"

HF_ROWS = [
    ({**LLAMA, "hidden_size": None}, "hidden_size: missing required key"),
    ({**GPT2, "n_layer": -1}, "n_layer: must be >= 1; got -1"),
    ({**GPT2, "n_head": 5}, "n_head: must divide n_embd (64); got 5"),
    ({**LLAMA, "num_attention_heads": 5}, "num_attention_heads: must divide hidden_size (64); got 5"),
    ({**LLAMA, "num_key_value_heads": 3}, "num_key_value_heads: must divide num_attention_heads (4); got 3"),
    ({**GPT2, "n_embd": "64"}, "n_embd: expected an integer; got '64'"),
    ({**GPT2, "vocab_size": 0}, "vocab_size: must be >= 1; got 0"),
    ({**GPT2, "model_type": "t5"}, "model_type: must be one of 'bert', 'gpt2', 'llama' or 'mistral'; got 't5'"),
]


@pytest.mark.parametrize("cfg,line", HF_ROWS)
def test_traced_config_checked_before_transformers(tmp_path, cfg, line):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    with pytest.raises(ConfigError) as exc:
        build(f"hf:{p}")
    assert str(exc.value) == f"{p}: {line}", str(exc.value)


@pytest.mark.parametrize("prefix", ["hf:", ""])
def test_seq_beyond_positions_is_one_line(tmp_path, prefix):
    """``seq`` longer than the config's position table, traced (hf:) or from the config."""
    p = tmp_path / "m.json"
    p.write_text(json.dumps({**GPT2, "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(ConfigError) as exc:
        build(f"{prefix}{p}", seq=100000)
    assert str(exc.value) == (f"{p}: seq: must be <= n_positions (64), the config's position count "
                              "(max_positions= raises it); got 100000")


@pytest.mark.parametrize("prefix", ["hf:", ""])
def test_seq_beyond_positions_with_max_positions_builds(tmp_path, prefix):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({**LLAMA, "architectures": ["LlamaForCausalLM"]}))
    assert build(f"{prefix}{p}", seq=128, max_positions=128, batch=1).spec.seq == 128


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_build_on_missing_cuda_is_one_line():
    from slackswap.core.errors import ParameterError
    with pytest.raises(ParameterError) as exc:
        build("hf:tiny-gpt2", device="cuda:7")
    assert str(exc.value) == "models.build(device): device: CUDA is not available on this machine; got 'cuda:7'"


# ---------------------------------------------------------------- the command line: same lines
@pytest.mark.parametrize("cfg,line", HF_ROWS)
def test_cli_traced_config_is_one_line_exit_2(tmp_path, capsys, cfg, line):
    from slackswap.cli import main
    p = tmp_path / "m.json"
    p.write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    assert main(["plan", "--model", f"hf:{p}"]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {p}: {line}\n"


def _cli_files(tmp):
    (tmp / "bin.json").write_bytes(b"\xff\xfe\x00\x81")
    (tmp / "m.json").write_text(json.dumps({**GPT2, "architectures": ["GPT2LMHeadModel"]}))
    return tmp


CLI_ROWS = [
    (["plan", "--model", "hf:{tmp}/none.json"], "config.json: cannot read {tmp}/none.json: No such file or directory"),
    (["plan", "--model", "hf:{tmp}/bin.json"], "{tmp}/bin.json: expected a JSON text file; got binary data"),
    (["plan", "--model", "hf:{tmp}/m.json", "--seq", "100000"],
     "{tmp}/m.json: seq: must be <= n_positions (64), the config's position count "
     "(max_positions= raises it); got 100000"),
    (["compare", "--model", "{tmp}/m.json", "--seq", "100000"],
     "{tmp}/m.json: seq: must be <= n_positions (64), the config's position count "
     "(max_positions= raises it); got 100000"),
]


@pytest.mark.parametrize("argv,line", CLI_ROWS)
def test_cli_hf_file_is_one_line_exit_2(tmp_path, capsys, argv, line):
    from slackswap.cli import main
    tmp = _cli_files(tmp_path)
    assert main([a.format(tmp=tmp) for a in argv]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {line.format(tmp=tmp)}\n"


# ---------------------------------------------------------------- valid configs are still accepted
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def valid_configs(draw):
    heads = draw(st.integers(1, 4))
    hidden = heads * draw(st.sampled_from([8, 16]))
    layers, vocab, positions = draw(st.integers(1, 2)), draw(st.integers(2, 128)), draw(st.integers(8, 64))
    if draw(st.booleans()):
        return dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_layer=layers, n_embd=hidden,
                    n_head=heads, vocab_size=vocab, n_positions=positions)
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    return dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=hidden,
                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                intermediate_size=2 * hidden, vocab_size=vocab, max_position_embeddings=positions)


def _write(cfg) -> str:
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".json")
    with open(fd, "w") as f:
        json.dump(cfg, f)
    return path


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_configs(), st.data())
def test_valid_configs_build_a_graph(cfg, data):
    import os
    path = _write(cfg)
    try:
        positions = cfg.get("n_positions") or cfg["max_position_embeddings"]
        seq = data.draw(st.integers(1, positions))
        g = build(path, seq=seq, batch=1)
        assert g.spec.seq == seq and len(g.ops) > 0
    finally:
        os.unlink(path)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_configs())
def test_valid_configs_trace(cfg):
    import os
    path = _write(cfg)
    try:
        g = build(f"hf:{path}", seq=8, batch=1)
        assert g.spec.seq == 8 and len(g.ops) > 0
    finally:
        os.unlink(path)
