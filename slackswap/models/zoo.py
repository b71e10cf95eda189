"""Model presets: ``data/models/<name>.toml`` -> ``TransformerSpec`` (DESIGN.md sections 2 and 7).

Every preset file lists every ``TransformerSpec`` field at top level plus a ``[sources]`` table
with the source of every number; missing or unknown keys raise ``ConfigError`` naming the key.

>>> load("gpt2-xl").param_count()
1557611200
>>> load("tiny", batch=4).batch
4
"""

from __future__ import annotations

import sys
from pathlib import Path

from .._paths import data_dir, user_path
from ..errors import ConfigError, UnknownNameError
from .spec import TransformerSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def models_dir() -> Path:
    return data_dir() / "models"


def available() -> list[str]:
    """Preset names, sorted (the stems of ``data/models/*.toml``)."""
    return sorted(p.stem for p in models_dir().glob("*.toml"))


def load(name: str, **overrides) -> TransformerSpec:
    """The preset ``name`` with ``overrides`` applied (validated: unknown fields raise)."""
    known = available()
    if name not in known:
        raise UnknownNameError("model", name, known)
    return load_file(models_dir() / f"{name}.toml", **overrides)


def load_file(path: str | Path, **overrides) -> TransformerSpec:
    """A spec from any model TOML file in the preset format."""
    path = user_path(path)
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"model file: cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"model file {path.name}: invalid TOML: {exc}") from exc
    return spec_from_dict(raw, where=path.name, **overrides)


def spec_from_dict(raw: dict, where: str = "model", **overrides) -> TransformerSpec:
    """Check that ``raw`` has exactly the spec fields (+ ``[sources]`` covering them)."""
    fields = TransformerSpec.fields()
    raw = dict(raw)
    sources = raw.pop("sources", None)
    for k in raw:
        if k not in fields:
            raise ConfigError(f"{k}: unknown key in {where}; allowed: {', '.join(fields)}, sources")
    for k in fields:
        if k not in raw:
            raise ConfigError(f"{k}: missing key in {where} (every field must be given)")
    if not isinstance(sources, dict):
        raise ConfigError(f"sources: {where} needs a [sources] table giving the source of every field")
    sourced = [f for f in fields if f not in ("name", "source")]
    for k in sources:
        if k not in sourced:
            raise ConfigError(f"sources.{k}: unknown key in {where}; allowed: {', '.join(sourced)}")
    for k in sourced:
        if not isinstance(sources.get(k), str) or not sources[k]:
            raise ConfigError(f"sources.{k}: missing source text in {where}")
    spec = TransformerSpec(**raw)
    return spec.replace(**overrides) if overrides else spec
