"""Model presets: ``data/models/<name>.toml`` -> ``TransformerSpec`` (docs/models.md).

Every preset file lists every ``TransformerSpec`` field at top level plus a ``[sources]`` table
with the source of every number; the file is parsed by ``ModelFile`` (a missing, unknown or
mistyped key raises ``ConfigError`` naming the file and the key).

>>> load("gpt2-xl").param_count()
1557611200
>>> load("tiny", batch=4).batch
4
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, create_model

from ..core.errors import ConfigError, UnknownNameError
from ..core.paths import data_dir, user_path
from ..core.schema import Schema, parse
from .spec import SpecSchema, TransformerSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def models_dir() -> Path:
    return data_dir() / "models"


def available() -> list[str]:
    """Preset names, sorted (the stems of ``data/models/*.toml``)."""
    return sorted(p.stem for p in models_dir().glob("*.toml"))


def load(name: str, /, **overrides) -> TransformerSpec:
    """The preset ``name`` with ``overrides`` applied (validated: unknown fields raise)."""
    known = available()
    if not isinstance(name, str) or name not in known:
        raise UnknownNameError("model", name, known)
    return load_file(models_dir() / f"{name}.toml", **overrides)


def load_file(path: str | Path, /, **overrides) -> TransformerSpec:
    """A spec from any model TOML file in the preset format."""
    path = user_path(path)
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"model file: cannot read {path}: {exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path.name}: invalid TOML: {exc}") from None
    return spec_from_dict(raw, where=path.name, **overrides)


_SOURCED = [f for f in TransformerSpec.fields() if f not in ("name", "source")]
#: ``[sources]``: a non-empty source text for every number and setting
Sources = create_model("Sources", __base__=Schema,
                       **{f: (Annotated[str, Field(min_length=1)], ...) for f in _SOURCED})


class ModelFile(SpecSchema):
    """A preset file: every ``TransformerSpec`` field at top level, and ``[sources]``."""

    sources: Sources


def spec_from_dict(raw: dict, /, where: str = "", **overrides) -> TransformerSpec:
    """A spec from a preset document: exactly the spec fields plus ``[sources]`` covering them
    (``ModelFile``; ``ConfigError`` names ``where`` and the key)."""
    doc = parse(ModelFile, raw, where)
    spec = TransformerSpec(**doc.model_dump(exclude={"sources"}))
    return spec.replace(**overrides) if overrides else spec
