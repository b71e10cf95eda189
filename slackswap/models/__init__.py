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

from ..core.errors import ConfigError
from ..core.graph import Graph
from . import transformer as _transformer
from .hf_config import from_hf_config
from .parallel import Parallel, as_parallel
from .presets import available, load
from .spec import TransformerSpec

__all__ = ["Parallel", "TransformerSpec", "as_parallel", "available", "build", "from_hf_config", "load", "spec"]


def spec(name_or_spec: str | Path | TransformerSpec, /, **overrides) -> TransformerSpec:
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


def build(name_or_spec: str | Path | TransformerSpec, /, max_ops: int | None = _transformer.MAX_OPS,
          parallel=None, **overrides) -> Graph:
    """A ``Graph`` from a preset name, a ``TransformerSpec`` or a path to an HF ``config.json``.
    A graph estimated above ``max_ops`` ops (``transformer.MAX_OPS``; None: no limit) is refused
    with ``ConfigError`` before it is built (``Problem.build`` passes ``max_ops`` on).
    ``parallel``: a parallel setting (a ``Parallel``, a dict of its keys, a ``data/parallel``
    preset name or a ``.toml`` path; docs/parallel.md); None: one GPU.

    ``"hf:<name or config.json>"`` traces the HuggingFace model instead (needs the ``torch``
    extra; overrides: batch, seq, dtype, device, kernels, name; docs/trace.md).
    """
    parallel = as_parallel(parallel)
    if isinstance(name_or_spec, str) and name_or_spec.startswith("hf:"):
        if parallel is not None:
            raise ConfigError(f"parallel: a traced model ({name_or_spec!r}) is one GPU's graph; "
                              "give a preset, a TransformerSpec or a config.json to plan it in parallel")
        try:   # tracing needs torch and transformers: optional dependencies (the torch extra)
            from ..torch.hf_trace import build_graph, load_config
        except ModuleNotFoundError as exc:
            raise ConfigError(f"model {name_or_spec!r}: tracing needs {exc.name}; install the "
                              "extra: pip install 'slackswap[torch]'") from exc
        cfg, name = load_config(name_or_spec[3:])
        given = Path(name_or_spec[3:]).expanduser()   # the declared schema, before transformers sees it
        from_hf_config(given if given.suffix == ".json" or given.is_dir() else cfg)
        _check_traced_size(name_or_spec, cfg, max_ops)
        preset = load(name) if name in available() else None   # traced at its preset's shape
        return build_graph(name_or_spec[3:], default_shape=preset and (preset.batch, preset.seq), **overrides)
    return _transformer.build(spec(name_or_spec, **overrides), max_ops=max_ops, parallel=parallel)


def _check_traced_size(name: str, cfg: dict, max_ops: int | None) -> None:
    """Refuse a traced model whose config's layer count would give more than ``max_ops`` ops."""
    layers = next((cfg[k] for k in ("num_hidden_layers", "n_layer") if isinstance(cfg.get(k), int)), 0)
    estimate = layers * _transformer.TRACED_OPS_PER_LAYER
    if max_ops is not None and estimate > max_ops:
        raise ConfigError(f"model {name!r}: about {estimate:,} ops ({layers:,} layers), more than "
                          f"max_ops={max_ops:,}; pass max_ops=None (CLI --max-ops) to build it anyway")
