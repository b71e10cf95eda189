"""Graphs from real PyTorch (optional extra ``torch``; docs/trace.md).

``trace(model, example_inputs, loss_fn=None, *, device="meta", layer_of=None)`` records one
forward + loss + backward and returns a ``Graph`` whose ``spec`` is a ``TraceInfo``.
``TraceInfo``, ``measured_costs`` and ``simulated_saved_peak`` import without torch; everything
else here needs it.
"""

from __future__ import annotations

from ..core.errors import ConfigError
from ._info import TraceInfo
from .accounting import simulated_saved_peak
from .measured_costs import measured_costs

try:
    from .trace import block_layers, trace
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without torch
    if exc.name not in ("torch", "transformers"):
        raise
    _missing = exc.name

    def trace(*args, **kwargs):
        raise ConfigError(f"slackswap.torch: needs {_missing}; install the extra: "
                          "pip install 'slackswap[torch]'")

    block_layers = trace

try:
    from .checkpoint_policy import policy
    from .executor import ExecStats, apply, run_step
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without torch
    if exc.name != "torch":
        raise
    apply = run_step = ExecStats = policy = trace

__all__ = ["ExecStats", "TraceInfo", "apply", "block_layers", "measured_costs", "policy",
           "run_step", "simulated_saved_peak", "trace"]
