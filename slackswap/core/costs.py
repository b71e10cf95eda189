"""CostModel: a Graph (+ Hardware) -> seconds per op and per transfer (docs/models.md, "FLOPs and bytes").

Three modes:

* ``"unit"``: every forward op 1 s, every backward op ``bwd_factor`` s (default 1), a transfer of
  b bytes b s (no latency), optimizer 0 s. Exact small numbers for hand-worked tests.
* ``"analytical"``: roofline with efficiencies from the hardware file.
* ``"measured"``: per-op times read from a profile file (see docs/profile.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SlackSwapError
from .graph import Graph

MODES = ("analytical", "measured", "unit")


@dataclass(frozen=True)
class CostModel:
    """Seconds for every op (forward and backward) and every tensor transfer of one graph.

    ``d2h_s[t]`` and ``h2d_s[t]`` already include the per-transfer latency:
    ``latency + bytes / bandwidth``. ``duplex_factor`` (0 < f <= 1) scales the H2D bandwidth of a
    copy that starts while the D2H engine is busy (1.0 = full duplex).
    """

    mode: str
    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    d2h_s: tuple[float, ...]
    h2d_s: tuple[float, ...]
    optimizer_s: float = 0.0
    duplex_factor: float = 1.0

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


def build(graph: Graph, hardware=None, mode: str = "analytical", profile=None, **kw) -> CostModel:
    """Build the cost model of ``graph`` in ``mode`` (one of ``MODES``)."""
    if mode == "unit":
        return CostModel.unit(graph, **kw)
    if mode == "analytical":
        if hardware is None:
            raise SlackSwapError("costs.build: mode 'analytical' needs a hardware")
        return analytical(graph, hardware, **kw)
    if mode == "measured":
        if profile is None:
            raise SlackSwapError("costs.build: mode 'measured' needs profile=<path of a profile file>")
        return measured(graph, profile, hardware, **kw)
    raise SlackSwapError(f"costs.build: mode must be one of {', '.join(MODES)}; got {mode!r}")


#: Op kinds that run on tensor cores (their compute term uses ``peak[dtype]`` and the kind's
#: efficiency); every other kind is memory bound, with a CUDA-core compute term (fp32 peak, eff. 1).
TENSOR_CORE_KINDS = ("matmul", "attention")

#: Adam update traffic per static byte: read and write every byte of weights, gradients and
#: optimizer state once (an upper bound: gradients are only read). See ``optimizer_seconds``.
ADAM_TRAFFIC = 2.0


def op_seconds(graph: Graph, hardware, dtype: str | None = None):
    """Roofline seconds per op: ``(fwd, bwd)`` as numpy arrays (docs/models.md).

    For an op of kind k with F FLOPs and B bytes of HBM traffic (forward: ``fwd_flops``,
    ``fwd_bytes``; backward: ``bwd_flops``, ``bwd_bytes``, the op's own counts):

    * compute ``= F / (peak[dtype] * eff_k(F))`` with ``eff_k`` the GPU's matmul or attention
      efficiency for k in ``TENSOR_CORE_KINDS``; for every other kind ``F / peak["fp32"]``
      (CUDA cores, efficiency 1: it almost never binds);
    * memory ``= B / (hbm * eff_mem(B))``;
    * time ``= max(compute, memory)`` (a kernel overlaps its loads with its math).
    """
    gpu = hardware.gpu
    dtype = dtype or getattr(graph.spec, "dtype", None) or "bf16"
    peak = gpu.peak(dtype)
    vector_peak = gpu.peak("fp32")
    kinds = np.array([op.kind for op in graph.ops], dtype=object)
    is_mm = kinds == "matmul"
    is_at = kinds == "attention"
    out = []
    for fl, by in (("fwd_flops", "fwd_bytes"), ("bwd_flops", "bwd_bytes")):
        flops = np.array([getattr(op, fl) for op in graph.ops], dtype=float)
        nbytes = np.array([getattr(op, by) for op in graph.ops], dtype=float)
        eff = np.where(is_mm, gpu.matmul_efficiency(flops), gpu.attention_efficiency(flops))
        compute = np.where(is_mm | is_at, flops / (peak * eff), flops / vector_peak)
        memory = nbytes / (gpu.hbm_bytes_per_s * gpu.memory_efficiency(nbytes))
        out.append(np.maximum(compute, memory))
    return out[0], out[1]


def optimizer_seconds(static_bytes: float, hardware, traffic: float = ADAM_TRAFFIC) -> float:
    """Adam update, memory bound: ``traffic * S / (hbm * eff_mem(traffic * S))``, S = static bytes."""
    moved = traffic * float(static_bytes)
    if moved <= 0:
        return 0.0
    gpu = hardware.gpu
    return float(moved / (gpu.hbm_bytes_per_s * gpu.memory_efficiency(moved)))


def transfer_seconds(graph: Graph, link):
    """``(d2h, h2d)`` seconds per tensor: ``latency + bytes / bandwidth``, 0 for 0-byte tensors."""
    nbytes = np.array([t.bytes for t in graph.tensors], dtype=float)
    return link.transfer_s(nbytes, "d2h"), link.transfer_s(nbytes, "h2d")


def analytical(graph: Graph, hardware, dtype: str | None = None,
               optimizer_traffic: float = ADAM_TRAFFIC) -> CostModel:
    """Roofline cost model of ``graph`` on ``hardware`` (see ``op_seconds``, ``optimizer_seconds``).

    ``dtype`` defaults to ``graph.spec.dtype`` (or bf16 when the graph has no spec). Transfers use
    the hardware's link; ``duplex_factor`` is the link's.
    """
    fwd, bwd = op_seconds(graph, hardware, dtype)
    d2h, h2d = transfer_seconds(graph, hardware.link)
    opt = optimizer_seconds(graph.static_bytes, hardware, optimizer_traffic)
    return CostModel("analytical", tuple(fwd.tolist()), tuple(bwd.tolist()), tuple(d2h.tolist()),
                     tuple(h2d.tolist()), opt, hardware.link.duplex_factor)


def measured(graph: Graph, profile, hardware=None) -> CostModel:
    """Per-op times from a profile file or ``profile.Profile`` (docs/profile.md).

    Every op of ``graph`` must have a time in the profile (matched by name). Transfer times: a
    tensor's measured ``d2h_ms``/``h2d_ms`` if the profile has them, else from ``hardware.link``
    if given, else from the profile's ``link``. The optimizer: the profile's ``optimizer_ms``, else
    ``optimizer_seconds`` on ``hardware``, else 0.
    """
    from . import profile as _profile

    prof = profile if isinstance(profile, _profile.Profile) else _profile.read(profile)
    return prof.costs(graph, hardware)
