"""The cost model's data: ``CostModel`` (seconds per op and per transfer of one graph) and the
helpers every way of building one shares (``transfer_seconds``, ``optimizer_seconds``).
``costs`` builds cost models (analytical, measured, unit) and re-exports these names."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .errors import ConfigError, SlackSwapError
from .graph import Graph

MODES = ("analytical", "measured", "unit")


@dataclass(frozen=True)
class CostModel:
    """Seconds for every op (forward and backward) and every tensor transfer of one graph.

    ``d2h_s[t]`` and ``h2d_s[t]`` already include the per-transfer latency:
    ``latency + bytes / bandwidth``. ``duplex_factor`` (0 < f <= 1) scales the H2D bandwidth of a
    copy that starts while the D2H engine is busy (1.0 = full duplex).

    ``fwd_overhead_s`` / ``bwd_overhead_s``: the fixed cost per op (launch, autograd, hooks) that
    ``fwd_s`` / ``bwd_s`` already include, recorded so a profile can be written back with its
    kernel times and overhead apart (``with_op_overhead`` adds it; docs/profile.md).
    """

    mode: str
    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    d2h_s: tuple[float, ...]
    h2d_s: tuple[float, ...]
    optimizer_s: float = 0.0
    duplex_factor: float = 1.0
    fwd_overhead_s: float = 0.0
    bwd_overhead_s: float = 0.0

    def __post_init__(self):
        for name in ("fwd_s", "bwd_s", "d2h_s", "h2d_s"):
            vals = tuple(float(v) for v in getattr(self, name))
            if any(not v >= 0 for v in vals):
                raise SlackSwapError(f"CostModel.{name}: every time must be >= 0")
            object.__setattr__(self, name, vals)
        if not self.optimizer_s >= 0:
            raise SlackSwapError(f"CostModel.optimizer_s: must be >= 0, got {self.optimizer_s}")
        if not 0 < self.duplex_factor <= 1:
            raise SlackSwapError(f"CostModel.duplex_factor: must be in (0, 1], got {self.duplex_factor}")
        for name in ("fwd_overhead_s", "bwd_overhead_s"):
            _check_overhead(f"CostModel.{name}", getattr(self, name))

    def with_op_overhead(self, fwd_s: float = 0.0, bwd_s: float = 0.0) -> CostModel:
        """This cost model with ``fwd_s`` seconds added to every op's forward time (so also to
        every re-run of it) and ``bwd_s`` to every op's backward time: the fixed cost per op that
        per-kernel timings miss (docs/profile.md, "Per-op overhead"). 0 and 0 return ``self``.

        >>> from slackswap.core.graph import Graph, Op, Tensor
        >>> g = Graph("g", ops=(Op(0, "a", 0, "matmul", outputs=(0,)),), tensors=(Tensor(0, "x", 8, 0),))
        >>> CostModel.unit(g).with_op_overhead(0.25, 0.5).ideal_step_s
        2.75
        """
        _check_overhead("with_op_overhead: fwd_s", fwd_s)
        _check_overhead("with_op_overhead: bwd_s", bwd_s)
        if fwd_s == 0 and bwd_s == 0:
            return self
        return replace(self, fwd_s=tuple(x + fwd_s for x in self.fwd_s),
                       bwd_s=tuple(x + bwd_s for x in self.bwd_s),
                       fwd_overhead_s=self.fwd_overhead_s + fwd_s,
                       bwd_overhead_s=self.bwd_overhead_s + bwd_s)

    def check(self, graph: Graph) -> None:
        """Raise unless the arrays have one entry per op / tensor of ``graph``."""
        if len(self.fwd_s) != len(graph.ops) or len(self.bwd_s) != len(graph.ops):
            raise SlackSwapError(f"CostModel: has {len(self.fwd_s)} op times, graph {graph.name!r} has {len(graph.ops)} ops")
        if len(self.d2h_s) != len(graph.tensors) or len(self.h2d_s) != len(graph.tensors):
            raise SlackSwapError(f"CostModel: has {len(self.d2h_s)} transfer times, graph has {len(graph.tensors)} tensors")

    @property
    def ideal_step_s(self) -> float:
        """Keep-all with no memory limit: every forward, every backward, the optimizer (summed in
        the order the simulator runs them, so keep-all simulates to exactly this value)."""
        t = 0.0
        for x in self.fwd_s:
            t += x
        for x in reversed(self.bwd_s):
            t += x
        return t + self.optimizer_s

    @classmethod
    def unit(cls, graph: Graph, bwd_factor: float = 1.0, duplex_factor: float = 1.0) -> CostModel:
        """Unit costs: op 1 s forward, ``bwd_factor`` s backward, 1 s per byte transferred."""
        n = len(graph.ops)
        b = tuple(float(t.bytes) for t in graph.tensors)
        return cls("unit", (1.0,) * n, (float(bwd_factor),) * n, b, b, 0.0, duplex_factor)


def _check_overhead(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or not 0 <= value < math.inf:
        raise SlackSwapError(f"{field}: must be a finite number of seconds >= 0; got {value!r}")


#: Adam update traffic per static byte: read and write every byte of weights, gradients and
#: optimizer state once (an upper bound: gradients are only read). See ``optimizer_seconds``.
ADAM_TRAFFIC = 2.0


def optimizer_seconds(static_bytes: float, hardware, traffic: float = ADAM_TRAFFIC) -> float:
    """Adam update, memory bound: ``traffic * S / (hbm * eff_mem(traffic * S))``, S = static bytes."""
    moved = traffic * float(static_bytes)
    if moved <= 0:
        return 0.0
    gpu = hardware.gpu
    return float(moved / (gpu.hbm_bytes_per_s * gpu.memory_efficiency(moved)))


def copy_link(hardware, gpus: int = 1):
    """The link one GPU of a job of ``gpus`` GPUs copies over: ``hardware.copy_link(gpus)`` (the
    node's share, docs/hardware.md, "The node"), ``hardware.link`` for hardware without a node."""
    if getattr(hardware, "node", None) is None:
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ConfigError(f"gpus: must be a whole number >= 1 (the GPUs of the job); got {gpus!r}")
        return hardware.link
    return hardware.copy_link(gpus)


def transfer_seconds(graph: Graph, link):
    """``(d2h, h2d)`` seconds per tensor: ``latency + bytes / bandwidth``, 0 for 0-byte tensors."""
    nbytes = np.array([t.bytes for t in graph.tensors], dtype=float)
    return link.transfer_s(nbytes, "d2h"), link.transfer_s(nbytes, "h2d")
