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
    # checks between fields come from TransformerSpec and do not name the file yet
    ({**GPT2, "n_head": 5}, "!hidden: must be divisible by heads (5); got 64"),
    ({**LLAMA, "num_key_value_heads": 3}, "!kv_heads: must divide heads (4); got 3"),
    ({**GPT2, "vocab_size": 0}, "vocab_size: must be >= 1; got 0"),
    ({**GPT2, "model_type": "t5"}, "model_type: must be one of 'bert', 'gpt2', 'llama' or 'mistral'; got 't5'"),
]


@pytest.mark.parametrize("cfg,line", HF_ROWS)
def test_traced_config_checked_before_transformers(tmp_path, cfg, line):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    with pytest.raises(ConfigError) as exc:
        build(f"hf:{p}")
    assert str(exc.value) == (line[1:] if line.startswith("!") else f"{p}: {line}"), str(exc.value)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_build_on_missing_cuda_is_one_line():
    from slackswap.core.errors import ParameterError
    with pytest.raises(ParameterError) as exc:
        build("hf:tiny-gpt2", device="cuda:7")
    assert str(exc.value) == "models.build(device): device: CUDA is not available on this machine; got 'cuda:7'"
