"""Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost" (arXiv 1604.06174).

Both planners work on the chain of blocks of ``_chain.blocks`` (transformer layers; one-op blocks
for graphs without layers): a kept block input ``x_b`` is a checkpoint, every other tensor inside
blocks is recomputed (``_chain.checkpoint_decisions``). Under the simulator's rule (a segment
between two checkpoints is rebuilt once and its tensors stay until their last use,
docs/timeline.md, "Backward: recompute, prefetch, gradients") this is exactly Chen's scheme: one extra forward per recomputed op and
a peak of about (kept checkpoints) + (largest segment).

* ``chen-sqrt`` (Sec. 4.1): ``k = round(sqrt(n))`` equal segments, so peak ~ n/k + k blocks.
* ``chen-greedy`` (Sec. 4.2 and Algorithm 3 of the appendix): walk the chain accumulating the
  bytes ``w_b`` of each block (its input plus the tensors it produces that would be recomputed);
  when the running sum would exceed a threshold ``b``, checkpoint the current block's input and
  restart the sum. The appendix grid-searches ``b``; we try ``b = j * mean(w)`` for
  ``j = 1 .. n`` (every segment length on a homogeneous chain) plus the sqrt(n) split (the
  appendix's starting point), simulate each candidate, and return the fastest that fits the
  budget; if none fits, the candidate with the least peak, status INFEASIBLE.
"""

from __future__ import annotations

import math
import time

from ..core.plan import Plan
from . import _chain
from .base import Parameterised, Tags, make_plan, register


@register("chen-sqrt")
class ChenSqrt(Parameterised):
    """sqrt(n) segments: keep each segment's input, recompute the rest (Chen et al. 2016, 4.1)."""

    name = "chen-sqrt"
    tags = Tags(supports_recompute=True, chain_only=True)

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        bl = _chain.blocks(problem.graph)
        dec = _chain.checkpoint_decisions(problem, _chain.sqrt_checkpoints(len(bl)), bl)
        return make_plan(problem, dec, self.name, self.params, t0)


def block_weights(problem, bl) -> list[int]:
    """``w_b``: bytes of block b's input plus the planning tensors it produces that a checkpoint
    plan recomputes (what a segment holds when rebuilt)."""
    g = problem.graph
    planning = set(problem.planning_ids)
    rec = _chain.checkpoint_decisions(problem, set(), bl)
    out = []
    for b in bl:
        w = g.tensors[b.input].bytes if b.input is not None else 0
        w += sum(g.tensors[t].bytes for t in b.produced if t in planning and rec[t].value == "recompute"
                 and not (b.index + 1 < len(bl) and t == bl[b.index + 1].input))
        out.append(w)
    return out


def greedy_checkpoints(weights: list[float], threshold: float) -> set[int]:
    """Chen et al. 2016, Algorithm 3: ``temp += w_b``; when it would exceed ``threshold``,
    checkpoint block b and restart. Block 0's input (the chain input) is always kept."""
    kept, acc = {0}, 0.0
    for b, w in enumerate(weights):
        if b > 0 and acc + w > threshold:
            kept.add(b)
            acc = 0.0
        acc += w
    return kept


@register("chen-greedy")
class ChenGreedy(Parameterised):
    """Budget-driven greedy checkpointing with a grid search over the threshold (Chen 2016, App.)."""

    name = "chen-greedy"
    tags = Tags(supports_recompute=True, chain_only=True)

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        bl = _chain.blocks(problem.graph)
        w = block_weights(problem, bl)
        mean = (sum(w) / len(w)) if w else 0.0
        cands: list[frozenset[int]] = [frozenset(_chain.sqrt_checkpoints(len(bl)))]
        for j in range(1, len(bl) + 1):
            k = frozenset(greedy_checkpoints(w, j * mean))
            if k not in cands:
                cands.append(k)
        best = None
        for i, k in enumerate(cands):
            dec = _chain.checkpoint_decisions(problem, set(k), bl)
            r = _chain.simulate_plan(problem, dec)
            if r.fits:
                key = (r.step_time_s, r.peak_bytes, i)
                if best is None or key < best[0]:
                    best = (key, dec)
        if best is None:  # none fits: the least peak (measured without a budget)
            free = problem.with_budget(None)
            peaks = []
            for i, k in enumerate(cands):
                dec = _chain.checkpoint_decisions(problem, set(k), bl)
                peaks.append((_chain.simulate_plan(free, dec).peak_bytes, i, dec))
            dec = min(peaks, key=lambda x: (x[0], x[1]))[2]
        else:
            dec = best[1]
        return make_plan(problem, dec, self.name, self.params, t0)


def sqrt_peak_blocks(n: int) -> float:
    """Chen's estimate of the peak in blocks for k = round(sqrt(n)) segments: n/k + k."""
    k = max(1, round(math.sqrt(n)))
    return n / k + k
