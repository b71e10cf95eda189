"""The model zoo: presets, HuggingFace configs, and the graph builder (docs/models.md).

>>> from slackswap import models
>>> "gpt2-xl" in models.available()
True
>>> g = models.build("tiny", batch=1)
>>> g.spec.batch
1
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..graph import Graph
from . import transformer as _transformer
from .hf import from_hf_config
from .spec import TransformerSpec
from .zoo import available, load

__all__ = ["TransformerSpec", "available", "build", "from_hf_config", "load", "spec"]


def spec(name_or_spec: str | Path | TransformerSpec, **overrides) -> TransformerSpec:
    """The ``TransformerSpec`` of a preset name, a spec or a path to an HF ``config.json``, with
    ``overrides`` applied (files are read now)."""
    if isinstance(name_or_spec, TransformerSpec):
        return name_or_spec.replace(**overrides) if overrides else name_or_spec
    if isinstance(name_or_spec, (str, Path)):
        text = str(name_or_spec)
        if isinstance(name_or_spec, str) and text in available():
            return load(text, **overrides)
        if text.endswith(".json") or Path(text).expanduser().is_dir() or isinstance(name_or_spec, Path):
            return from_hf_config(name_or_spec, **overrides)
        return load(text, **overrides)  # raises UnknownNameError listing the presets
    raise ConfigError(f"model: expected a preset name, a TransformerSpec or a config.json "
                      f"path; got {type(name_or_spec).__name__}")


def build(name_or_spec: str | Path | TransformerSpec, max_ops: int | None = _transformer.MAX_OPS,
          **overrides) -> Graph:
    """A ``Graph`` from a preset name, a ``TransformerSpec`` or a path to an HF ``config.json``.
    A graph estimated above ``max_ops`` ops (``transformer.MAX_OPS``; None: no limit) is refused
    with ``ConfigError`` before it is built (``Problem.build`` passes ``max_ops`` on)."""
    return _transformer.build(spec(name_or_spec, **overrides), max_ops=max_ops)
