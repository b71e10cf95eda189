"""HF config paths for tracing (hf:...): one line naming the file."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from slackswap.core.errors import ConfigError  # noqa: E402
from slackswap.torch.hf_trace import load_config  # noqa: E402


def test_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "cfg.json").write_text('{"model_type": "gpt2"}')
    cfg, name = load_config("~/cfg.json")
    assert cfg == {"model_type": "gpt2"} and name == "cfg"


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
