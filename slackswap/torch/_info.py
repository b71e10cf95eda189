"""``TraceInfo``: what a traced ``Graph`` carries in ``graph.spec`` (docs/trace.md).

This module imports no torch, so code that only reads traced graphs (planners, the simulator, an
executor checking a run against its trace) works without the ``torch`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TraceInfo:
    """How a graph was traced, and the sequences a runtime needs to match a run against it.

    * ``pack_order[k]``: the graph tensor id packed by the k-th call of the saved-tensors pack hook
      during the traced forward (+ loss), or -1 when it packed a parameter, a buffer, a step input
      or another tensor outside planning. Running the same model on inputs of the same shapes
      fires the pack hook in the same order.
    * ``pack_op[k]``: the graph op whose backward needs what the k-th pack call packed (the op
      its ``Op.saves`` lists it under; for a parameter or step input, the op that saved it), or
      -1 when no op could be named.
    * ``op_signature[i]``: the aten op (``"aten.mm.default"``) that opens graph op ``i``.
    * ``aten_ops``: every aten op dispatched in the forward (+ loss), in order, folded ones too.
    * ``call_tensors[i]``: the graph tensors aten call ``i`` made: the storages it created (in
      output order), then the new versions of the storages it wrote in place; empty for a call
      folded into another op. The executor names the storages of a run by it (multi-level plans).
    * ``call_ops[i]``: the graph op aten call ``i`` is, or the op its in-place write was fused
      into; -1 for a call folded away (views, writes to parameters or buffers).
    * ``op_times_s``: measured ``(fwd, bwd)`` seconds per graph op (cpu/cuda traces), else None.
    * ``kernels``: ``"cuda"`` when attention and dropout ran as the CUDA kernels (flash attention,
      ``native_dropout``), ``"native"`` when they ran as PyTorch chose on the trace device.
    """

    model_name: str
    device: str
    pack_order: tuple[int, ...]
    op_signature: tuple[str, ...]
    op_times_s: tuple[tuple[float, float], ...] | None = None
    pack_op: tuple[int, ...] = ()
    name: str = ""
    dtype: str = "fp32"
    batch: int | None = None
    seq: int | None = None
    aten_ops: tuple[str, ...] = ()
    call_tensors: tuple[tuple[int, ...], ...] = ()
    call_ops: tuple[int, ...] = ()
    params: int = 0
    fwd_flops: float = 0.0
    bwd_flops: float = 0.0
    unattributed_bwd_flops: float = 0.0
    kernels: str = "native"
    trace_s: float = 0.0
    grain: str = "aten"
    source: str = ""

    @property
    def family(self) -> str:
        return "traced"

    @property
    def implementation(self) -> str:
        """What the backward keeps: recorded from the run, not modelled (``"traced"``)."""
        return "traced"

    @property
    def attention(self) -> str:
        """``"flash"`` / ``"fused"`` (another SDPA kernel) / ``"eager"`` (softmax over the
        materialized scores) / ``"none"``, read from the traced aten ops."""
        ops = " ".join(self.aten_ops or self.op_signature)
        if "flash_attention" in ops:
            return "flash"
        if "_scaled_dot_product" in ops or "_efficient_attention" in ops:
            return "fused"
        return "eager" if "softmax" in ops and ("bmm" in ops or "matmul" in ops) else "none"

    def describe(self) -> str:
        shape = f" b={self.batch} s={self.seq}" if self.batch is not None else ""
        return (f"{self.name or self.model_name}: traced {self.model_name} on {self.device}{shape} "
                f"{self.dtype}, {len(self.op_signature)} ops, {self.params:,} parameters")
