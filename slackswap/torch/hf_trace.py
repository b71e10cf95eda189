"""HuggingFace models by name or config, traced (docs/trace.md).

``build_graph("gpt2-xl")`` builds ``GPT2LMHeadModel`` from ``data/hf/gpt2-xl.json`` with random
weights (nothing is downloaded), on ``meta`` by default, and traces one training step.
``models.build("hf:gpt2-xl")`` and ``--model hf:gpt2-xl`` reach it at the shape of the model
preset of the same name (``data/models/gpt2-xl.toml``: batch 8, seq 1024; ``default_shape``);
configs without a preset default to batch 1 and the longest supported sequence.

>>> g = build_graph("tiny-gpt2", batch=2, seq=32)
>>> g.name, g.spec.model_name, g.spec.batch, g.spec.seq
('hf:tiny-gpt2', 'GPT2LMHeadModel', 2, 32)
"""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from pathlib import Path

import torch

from ..core.errors import ConfigError, UnknownNameError
from ..core.graph import Graph
from ..core.paths import data_dir
from .trace import DEVICES, trace

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
OVERRIDES = ("batch", "seq", "max_positions", "attention", "dtype", "device", "kernels", "name")
ATTENTIONS = {"flash": "sdpa", "eager": "eager"}


def hf_dir() -> Path:
    return data_dir() / "hf"


def available() -> list[str]:
    """Names of the shipped configs (the stems of ``data/hf/*.json``)."""
    return sorted(p.stem for p in hf_dir().glob("*.json"))


def config_path(name_or_path: str | Path) -> Path:
    """The config.json of a shipped name, a config.json path (``~`` expanded) or a folder."""
    text = str(name_or_path)
    if isinstance(name_or_path, str) and text in available():
        return hf_dir() / f"{text}.json"
    if text.endswith(".json") or Path(text).expanduser().is_dir():
        path = Path(text).expanduser()
        return path / "config.json" if path.is_dir() else path
    raise UnknownNameError("HF config", text, available() + ["<path>/config.json"])


def load_config(name_or_path: str | Path) -> tuple[dict, str]:
    """``(config dict, name)`` from a shipped name, a config.json path or a folder holding one."""
    path = config_path(name_or_path)
    try:
        cfg = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"config.json: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: expected a JSON text file; got binary data") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config.json: {path} is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model_type"), str):
        raise ConfigError(f"model_type: {path} must be a JSON object with a model_type")
    name = path.stem if path.stem != "config" else path.parent.name
    return cfg, name


def build_model(cfg: dict, *, device: str = "meta", dtype: str = "bf16",
                attention: str = "flash") -> torch.nn.Module:
    """The model class named by ``cfg["architectures"][0]`` with random weights on ``device``;
    ``attention``: ``"flash"`` (HF's ``sdpa``) or ``"eager"`` (HF's own softmax attention)."""
    import transformers  # optional dependency (transformers)

    if dtype not in DTYPES:
        raise ConfigError(f"dtype: must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if device not in DEVICES:
        raise ConfigError(f"device: must be one of {', '.join(DEVICES)}; got {device!r}")
    if attention not in ATTENTIONS:
        raise ConfigError(f"attention: must be one of {', '.join(ATTENTIONS)}; got {attention!r}")
    cfg = dict(cfg)
    arch = (cfg.pop("architectures", None) or [None])[0]
    cls = getattr(transformers, arch, None) if isinstance(arch, str) else None
    if cls is None or not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
        raise ConfigError(f"architectures: must name a transformers model class (e.g. "
                          f"GPT2LMHeadModel); got {arch!r}")
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    config._attn_implementation = ATTENTIONS[attention]
    with torch.device(device):
        model = cls(config)
    return model.to(DTYPES[dtype])


def example_inputs(model: torch.nn.Module, batch: int, seq: int, device: str = "meta") -> dict:
    """Token ids (all 0) for ``model.forward`` plus ``labels`` (and ``token_type_ids``,
    ``next_sentence_label`` where the forward takes them), so the output carries the loss."""
    params = inspect.signature(model.forward).parameters
    ids = torch.zeros(batch, seq, dtype=torch.long, device=device)
    inputs = {"input_ids": ids}
    if "token_type_ids" in params and getattr(model.config, "type_vocab_size", 0):
        inputs["token_type_ids"] = torch.zeros_like(ids)
    if "labels" in params:
        inputs["labels"] = ids.clone()
    if "next_sentence_label" in params:
        inputs["next_sentence_label"] = torch.zeros(batch, dtype=torch.long, device=device)
    return inputs


POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")


def _max_positions(cfg: dict) -> int:
    for k in POSITION_KEYS:
        if isinstance(cfg.get(k), int):
            return cfg[k]
    raise ConfigError("max_position_embeddings: the config gives no sequence length; pass seq=")


def check_seq(cfg: dict, seq, where: str) -> None:
    """Refuse a sequence longer than the config's position count (a learned position table has no
    row for it), naming the file and the config's key."""
    key = next((k for k in POSITION_KEYS if isinstance(cfg.get(k), int) and not isinstance(cfg[k], bool)), None)
    if key is not None and isinstance(seq, int) and not isinstance(seq, bool) and seq > cfg[key]:
        raise ConfigError(f"{where}: seq: must be <= {key} ({cfg[key]}), the config's position count "
                          f"(max_positions= raises it); got {seq}")


def build_graph(name_or_path: str | Path, default_shape: tuple[int, int] | None = None, **overrides) -> Graph:
    """Trace the HF model ``name_or_path`` (a shipped name or a config.json path).

    ``overrides``: ``batch``, ``seq`` (default: ``default_shape``, which ``models.build("hf:...")``
    sets to the model preset of the same name; else 1 and the longest supported sequence), ``max_positions`` (sets the config's position count),
    ``attention`` (``"flash"``: HF sdpa, default; ``"eager"``), ``dtype`` (bf16), ``device``
    (meta), ``kernels`` (see ``trace``), ``name`` (default ``"hf:<name>"``). Traces are cached
    in-process.
    """
    for k in overrides:
        if k not in OVERRIDES:
            raise ConfigError(f"{k}: not an option of a traced HF model; allowed: "
                              f"{', '.join(OVERRIDES)}")
    if overrides.get("device", "meta") != "meta":
        from ._check import check_device
        check_device(overrides["device"], "models.build(device)")
    cfg, name = load_config(name_or_path)
    if "max_positions" in overrides:
        keys = [k for k in ("max_position_embeddings", "n_positions", "n_ctx") if k in cfg]
        for k in keys or ["max_position_embeddings"]:
            cfg[k] = overrides["max_positions"]
    shape = default_shape
    batch = overrides.get("batch", shape[0] if shape else 1)
    seq = overrides["seq"] if "seq" in overrides else shape[1] if shape else _max_positions(cfg)
    for k, v in (("batch", batch), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{k}: must be a positive int, got {v!r}")
    check_seq(cfg, seq, str(config_path(name_or_path)))
    key = json.dumps(cfg, sort_keys=True)
    return _cached(key, name, batch, seq, overrides.get("attention", "flash"),
                   overrides.get("dtype", "bf16"),
                   overrides.get("device", "meta"), overrides.get("kernels", "auto"),
                   overrides.get("name") or f"hf:{name}")


@lru_cache(maxsize=16)
def _cached(key, name, batch, seq, attention, dtype, device, kernels, gname) -> Graph:
    from transformers.utils import logging as hf_logging  # optional dependency (transformers)

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "loss_type=None ..." and similar notes on random models
    try:
        model = build_model(json.loads(key), device=device, dtype=dtype, attention=attention)
        g = trace(model, example_inputs(model, batch, seq, device), device=device, name=gname,
                  kernels=kernels)
    finally:
        hf_logging.set_verbosity(level)
    info = g.spec.__class__(**{**g.spec.__dict__, "batch": batch, "seq": seq,
                               "source": f"HF config {name} ({type(model).__name__})"})
    return Graph(g.name, ops=g.ops, tensors=g.tensors, static_bytes=g.static_bytes, spec=info)
