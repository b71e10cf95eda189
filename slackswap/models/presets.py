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
from typing import Annotated, Literal

from pydantic import Field, create_model, model_validator

from ..core.errors import ConfigError, UnknownNameError
from ..core.paths import data_dir, user_path
from ..core.schema import Schema, parse
from .spec import BUDGET_SCOPES, LOGITS_DTYPES, WORKLOAD_FIELDS, SpecSchema, TransformerSpec

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


#: fields a file may leave out (with their defaults); a file that sets one gives its source too
OPTIONAL_FIELDS = (*WORKLOAD_FIELDS, "use_cache")
_SOURCED = [f for f in TransformerSpec.fields() if f not in ("name", "source") + OPTIONAL_FIELDS]
_Text = Annotated[str, Field(min_length=1)]
#: ``[sources]``: a non-empty source text for every number and setting (the workload fields may be
#: left out of a file, with their source: they then take their defaults, docs/models.md "Workload")
Sources = create_model("Sources", __base__=Schema,
                       **{f: (_Text, ...) for f in _SOURCED},
                       **{f: (_Text | None, None) for f in OPTIONAL_FIELDS})


class ModelFile(SpecSchema):
    """A preset file: every ``TransformerSpec`` field at top level (the workload fields optional),
    and ``[sources]``."""

    mlm_fraction: Annotated[float, Field(gt=0, le=1)] = 1.0
    logits_dtype: Literal[LOGITS_DTYPES] = "activation"
    loss_workspace: bool = True
    budget_scope: Literal[BUDGET_SCOPES] = "step"
    budget_logits: bool = True
    budget_param_grads: bool = False
    use_cache: bool = True
    sources: Sources

    @model_validator(mode="after")
    def _sourced(self):
        given = self.model_fields_set
        for f in OPTIONAL_FIELDS:
            if f in given and getattr(self.sources, f) is None:
                raise ValueError(f"sources.{f}: a file that sets {f} gives its source too")
        return self


def spec_from_dict(raw: dict, /, where: str = "", **overrides) -> TransformerSpec:
    """A spec from a preset document: exactly the spec fields plus ``[sources]`` covering them
    (``ModelFile``; ``ConfigError`` names ``where`` and the key)."""
    doc = parse(ModelFile, raw, where)
    spec = TransformerSpec(**doc.model_dump(exclude={"sources"}))
    return spec.replace(**overrides) if overrides else spec
