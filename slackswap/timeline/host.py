"""Host memory of a simulated step: the swapped bytes held on the host at once, and whether the
GPUs of the node fit them in its pinned memory (docs/timeline.md, "Host memory").

A swapped tensor's host copy lives from the start of its D2H copy to the end of its H2D copy
(to the end of the step when it is never copied back). ``peak_bytes`` is the largest sum of
live host copies of one GPU; under the node's lockstep assumption (docs/hardware.md, "The
node") every GPU of the node that copies holds as much at once, so the node needs
``peak * node.copying(gpus)`` bytes of pinned memory, at most ``node.pinned_capacity``.

>>> import numpy as np
>>> nbytes = np.array([4, 6, 8])
>>> # tensor 0 on the host over [0, 5), tensor 2 over [1, 3), tensor 1 over [5, 9)
>>> int(peak_bytes(nbytes, np.array([0, 2, 1]), np.array([0.0, 1.0, 5.0]),
...                np.array([2, 0, 1]), np.array([3.0, 5.0, 9.0]), 9.0))
12
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..core.units import format_bytes


def peak_bytes(nbytes, d2h_tensors, d2h_start, h2d_tensors, h2d_end, step_end: float) -> int:
    """The most bytes held on the host at once: tensor ``d2h_tensors[i]`` from ``d2h_start[i]``
    to the ``h2d_end[j]`` of ``h2d_tensors[j] == d2h_tensors[i]`` (``step_end`` when it has no
    H2D copy). A copy that ends at the instant another starts is not counted twice."""
    if len(d2h_tensors) == 0:
        return 0
    end_of = np.full(len(nbytes), float(step_end))
    end_of[h2d_tensors] = h2d_end
    b = nbytes[d2h_tensors]
    # frees listed before holds, so a stable sort by time frees first at one instant
    order = np.argsort(np.concatenate((end_of[d2h_tensors], d2h_start)), kind="stable")
    return int(max(0, np.cumsum(np.concatenate((-b, b))[order]).max()))

def check_capacity(problem, result):
    """``result`` itself when the hardware has no node or the node's pinned memory holds
    ``result.host_peak_bytes`` times the GPUs of the node that swap; otherwise the same result
    marked infeasible (``feasible=False``, times ``inf``) with a reason naming
    ``node.pinned_capacity`` and the bytes."""
    node = getattr(getattr(problem, "hardware", None), "node", None)
    if node is None or not result.feasible:
        return result
    parallel = getattr(problem, "parallel", None)
    gpus = node.copying(1 if parallel is None else parallel.gpus)
    if result.swapped_bytes * gpus <= node.pinned_capacity_bytes:   # the peak is at most all swapped
        return result
    need = result.host_peak_bytes * gpus
    if need <= node.pinned_capacity_bytes:
        return result
    return dataclasses.replace(
        result, feasible=False, step_time_s=math.inf, compute_s=0.0, recompute_s=0.0, stall_fwd_s=0.0,
        stall_bwd_s=0.0, events=(), memory_times=np.zeros(0), memory_bytes=np.zeros(0),
        reason=f"node.pinned_capacity: {gpus} GPU(s) x {result.host_peak_bytes} bytes held on the host at once "
               f"= {need} bytes ({format_bytes(need)}) > {node.pinned_capacity_bytes} bytes "
               f"({format_bytes(node.pinned_capacity_bytes)})")


__all__ = ["check_capacity", "peak_bytes"]
