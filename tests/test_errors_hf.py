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
