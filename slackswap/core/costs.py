"""CostModel: a Graph (+ Hardware) -> seconds per op and per transfer (docs/models.md, "FLOPs and bytes").

Three modes:

* ``"unit"``: every forward op 1 s, every backward op ``bwd_factor`` s (default 1), a transfer of
  b bytes b s (no latency), optimizer 0 s. Exact small numbers for hand-worked tests.
* ``"analytical"``: roofline with efficiencies from the hardware file.
* ``"measured"``: per-op times read from a profile file (see docs/profile.md).
"""

from __future__ import annotations

import numpy as np

from .costmodel import (  # noqa: F401 - the cost model's types and helpers, re-exported
    ADAM_TRAFFIC,
    MODES,
    CostModel,
    copy_link,
    optimizer_seconds,
    transfer_seconds,
)
from .errors import ConfigError, SlackSwapError
from .graph import Graph
from .profile import Profile
from .profile import read as read_profile


def build(graph: Graph, hardware=None, mode: str = "analytical", profile=None, gpus: int = 1,
          **kw) -> CostModel:
    """Build the cost model of ``graph`` in ``mode`` (one of ``MODES``). ``gpus``: the GPUs of
    the job, whose neighbours on the node share the host link (``Hardware.copy_link``; unit
    costs have no link and ignore it)."""
    if mode == "unit":
        return CostModel.unit(graph, **kw)
    if mode == "analytical":
        if hardware is None:
            raise SlackSwapError("costs.build: mode 'analytical' needs a hardware")
        return analytical(graph, hardware, gpus=gpus, **kw)
    if mode == "measured":
        if profile is None:
            raise SlackSwapError("costs.build: mode 'measured' needs profile=<path of a profile file>")
        return measured(graph, profile, hardware, gpus=gpus, **kw)
    raise SlackSwapError(f"costs.build: mode must be one of {', '.join(MODES)}; got {mode!r}")


#: Op kinds that run on tensor cores (their compute term uses ``peak[dtype]`` and the kind's
#: efficiency); every other kind is memory bound, with a CUDA-core compute term (fp32 peak, eff. 1).
TENSOR_CORE_KINDS = ("matmul", "attention")

def op_seconds(graph: Graph, hardware, dtype: str | None = None):
    """Roofline seconds per op: ``(fwd, bwd)`` as numpy arrays (docs/models.md).

    For an op of kind k with F FLOPs and B bytes of HBM traffic (forward: ``fwd_flops``,
    ``fwd_bytes``; backward: ``bwd_flops``, ``bwd_bytes``, the op's own counts):

    * compute ``= F / (peak[dtype] * eff_k(F))`` with ``eff_k`` the GPU's matmul or attention
      efficiency for k in ``TENSOR_CORE_KINDS``; for every other kind ``F / peak["fp32"]``
      (CUDA cores, efficiency 1: it almost never binds);
    * memory ``= B / (hbm * eff_mem(B))``;
    * time ``= max(compute, memory)`` (a kernel overlaps its loads with its math);
    * kind ``"comm"`` (tensor-parallel collectives, docs/parallel.md): ``B / p2p`` with B the
      bytes one GPU sends and p2p the GPU's ``p2p_bytes_per_s`` (a ``ConfigError`` without it).
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
    is_comm = kinds == "comm"
    if is_comm.any():   # collectives: the bytes one GPU sends over the GPU-to-GPU link
        bw = _p2p_bandwidth(graph, hardware)
        for i, by in ((0, "fwd_bytes"), (1, "bwd_bytes")):
            nbytes = np.array([getattr(op, by) for op in graph.ops], dtype=float)
            out[i] = np.where(is_comm, nbytes / bw, out[i])
    return out[0], out[1]


def _p2p_bandwidth(graph: Graph, hardware) -> float:
    bw = getattr(hardware.gpu, "p2p_bytes_per_s", None)
    if not bw:
        raise ConfigError(f"hardware {getattr(hardware, 'name', hardware.gpu.name)}: gpu.p2p_bandwidth: not "
                          f"given, and the graph {graph.name!r} has tensor-parallel communication (tp > 1); "
                          "give the GPU-to-GPU bandwidth in the hardware file (docs/hardware.md) or use tp = 1")
    return float(bw)


def analytical(graph: Graph, hardware, dtype: str | None = None,
               optimizer_traffic: float = ADAM_TRAFFIC, gpus: int = 1) -> CostModel:
    """Roofline cost model of ``graph`` on ``hardware`` (see ``op_seconds``, ``optimizer_seconds``).

    ``dtype`` defaults to ``graph.spec.dtype`` (or bf16 when the graph has no spec). Transfers use
    the hardware's link as one GPU of a job of ``gpus`` GPUs sees it (``copy_link``: its share
    of the node's switch and host memory; the link itself without a node); ``duplex_factor``
    is the link's.
    """
    fwd, bwd = op_seconds(graph, hardware, dtype)
    d2h, h2d = transfer_seconds(graph, copy_link(hardware, gpus))
    opt = optimizer_seconds(graph.static_bytes, hardware, optimizer_traffic)
    return CostModel("analytical", tuple(fwd.tolist()), tuple(bwd.tolist()), tuple(d2h.tolist()),
                     tuple(h2d.tolist()), opt, hardware.link.duplex_factor)


def measured(graph: Graph, profile, hardware=None, gpus: int = 1) -> CostModel:
    """Per-op times from a profile file or ``profile.Profile`` (docs/profile.md).

    Every op of ``graph`` must have a time in the profile (matched by name). Transfer times: a
    tensor's measured ``d2h_ms``/``h2d_ms`` if the profile has them, else from ``hardware``'s
    link as one GPU of ``gpus`` sees it (``copy_link``) if given, else from the profile's
    ``link``. The optimizer: the profile's ``optimizer_ms``, else ``optimizer_seconds`` on
    ``hardware``, else 0.
    """
    prof = profile if isinstance(profile, Profile) else read_profile(profile)
    return prof.costs(graph, hardware, gpus=gpus)
