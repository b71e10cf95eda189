"""What a sweep run depends on, resolved, and the on-disk cache keyed by it (docs/experiments.md, "Sweeps in Python").

A run's inputs are named in its ``RunSpec`` (a model preset, a hardware preset, a link, spec
overrides), but what it computes depends on what those names resolve to *now*: the model file, the
hardware and link files, the planner parameters, the cost mode and the package's code. The cache
key hashes all of that, so editing ``data/hardware/links/pcie5-x16.toml`` (or any model or
hardware file, or the code) makes every run that reads it miss the cache; a run whose names do not
resolve has no key and is never cached (it becomes an ERROR row anyway).

>>> a = setting_digest(*resolve("tiny", "a100-80gb", None, {}))
>>> a == setting_digest(*resolve("tiny", "a100-80gb", "pcie4-x16", {}))    # the preset's own link
True
>>> a == setting_digest(*resolve("tiny", "a100-80gb", "pcie5-x16", {}))
False
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from .. import __version__, models
from ..core import hardware as hw_mod
from ..core.errors import ConfigError

COST_MODE = "analytical"
"""The cost model of every sweep run (``costs.build(mode=...)``); part of every key."""


def _plain(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__, **{f.name: _plain(getattr(obj, f.name))
                                                    for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def digest(obj) -> str:
    """A short SHA-256 of ``obj``'s content (dataclasses field by field, dicts by sorted key)."""
    text = json.dumps(_plain(obj), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def load_hardware(hardware, link):
    """``hardware.load`` of a sweep's (hardware, link): link None (the preset's), a preset name,
    or a dict of ``Hardware.with_link`` changes (with an optional ``"link"`` preset)."""

    if link is None:
        return hw_mod.load(hardware)
    if isinstance(link, dict):
        link = dict(link)
        return hw_mod.load(hardware, link=link.pop("link", None), **link)
    return hw_mod.load(hardware, link=link)


@dataclasses.dataclass(frozen=True)
class TracedModel:
    """What a traced model (``"hf:<name or config.json>"``, docs/trace.md) resolves to: the config's
    content, the overrides and the versions of the libraries the trace runs (they decide what is
    saved), so an edited config or an upgraded ``transformers`` misses the cache."""

    model: str
    config: str
    overrides: str
    versions: str

    def build(self):
        return models.build(self.model, **json.loads(self.overrides))


def _traced(model: str, overrides: dict) -> TracedModel:
    try:   # torch and transformers: optional dependencies (the torch extra)
        import torch
        import transformers

        from ..torch.hf_trace import load_config
    except ModuleNotFoundError as exc:
        raise ConfigError(f"model {model!r}: tracing needs {exc.name}; install the extra: "
                          "pip install 'slackswap[torch]'") from exc
    cfg, _ = load_config(model[3:])
    return TracedModel(model, json.dumps(cfg, sort_keys=True), json.dumps(overrides or {}, sort_keys=True),
                       f"torch {torch.__version__}, transformers {transformers.__version__}")


def resolve(model, hardware, link, overrides: dict):
    """``(model, Hardware)`` of a setting, read from the files now (no caching): the model is a
    ``TransformerSpec``, or a ``TracedModel`` for ``"hf:..."`` names."""

    if isinstance(model, str) and model.startswith("hf:"):
        return _traced(model, overrides), load_hardware(hardware, link)
    return models.spec(model, **(overrides or {})), load_hardware(hardware, link)


def setting_digest(spec, hw, parallel=None) -> str:
    """The content of one problem without a budget: model spec, hardware with its link, cost mode
    and the parallel setting (a ``Parallel``; None, one GPU, adds nothing)."""
    doc = {"spec": spec, "hardware": hw, "cost_mode": COST_MODE}
    if parallel is not None:
        doc["parallel"] = parallel.as_dict()
    return digest(doc)


def code_digest() -> str:
    """A hash of the package's Python source (every ``slackswap/**/*.py``), read now."""
    root = Path(__file__).resolve().parents[1]   # the package: slackswap/
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def run_key(spec, setting: str, code: str) -> str:
    """The cache key of one run: its settings (``RunSpec``), the content they resolve to
    (``setting``), the package version and its code."""

    return digest({"run": dataclasses.asdict(spec), "setting": setting, "code": code, "version": __version__})


def read(cache_dir: Path | None, key: str | None, columns) -> dict | None:
    """The cached row of ``key``, or None (no cache, no key, missing or unreadable file)."""
    if cache_dir is None or key is None:
        return None
    p = cache_dir / f"{key}.json"
    if not p.exists():
        return None
    try:
        row = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return row if set(row) == set(columns) else None


def write(cache_dir: Path | None, key: str | None, row: dict) -> None:
    if cache_dir is None or key is None:
        return
    p = cache_dir / f"{key}.json"
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(row))
    tmp.replace(p)
