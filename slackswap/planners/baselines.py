"""Classic baselines (docs/planners.md): keep-all, recompute-all, checkpoint-layers, swap-all.

* ``keep-all``: every planning tensor KEEP (the no-limit reference).
* ``recompute-all``: every recomputable planning tensor RECOMPUTE (others KEEP). Under the
  simulator's rule that regenerated tensors stay until their last use (docs/timeline.md, 3), this
  rebuilds the whole chain once at the start of the backward pass: it saves little peak memory.
* ``checkpoint-layers``: Megatron-LM "full" activation recomputation (Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", Sec. 4): keep each
  transformer block's input (the residual stream entering its first op), recompute everything
  else inside blocks; tensors outside blocks and a block's outputs read outside it are kept.
* ``swap-all``: vDNN (Rhu et al. MICRO 2016, "vDNN: Virtualized Deep Neural Networks"): offload
  every swappable planning tensor of at least ``min_swap_bytes`` bytes; smaller ones are kept.
"""

from __future__ import annotations

import time

from pydantic import Field

from ..core.plan import Decision, Plan
from ..core.schema import NonNegInt, Schema
from . import _chain
from .base import Parameterised, Tags, make_plan, register


@register("keep-all")
class KeepAll(Parameterised):
    """Keep every planning tensor."""

    name = "keep-all"
    tags = Tags(exact=False, supports_swap=False, supports_recompute=False)

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        return make_plan(problem, {t: Decision.KEEP for t in problem.planning_ids}, self.name, self.params, t0)


@register("recompute-all")
class RecomputeAll(Parameterised):
    """Recompute every recomputable planning tensor; keep the rest."""

    name = "recompute-all"
    tags = Tags(supports_recompute=True)

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        g = problem.graph
        dec = {t: Decision.RECOMPUTE if g.tensors[t].recomputable else Decision.KEEP
               for t in problem.planning_ids}
        return make_plan(problem, dec, self.name, self.params, t0)


@register("checkpoint-layers")
class CheckpointLayers(Parameterised):
    """Megatron "full" recomputation: keep every block input, recompute inside blocks."""

    name = "checkpoint-layers"
    tags = Tags(supports_recompute=True)

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        bl = _chain.blocks(problem.graph)
        dec = _chain.checkpoint_decisions(problem, {b.index for b in bl}, bl)
        return make_plan(problem, dec, self.name, self.params, t0)


@register("swap-all")
class SwapAll(Parameterised):
    """vDNN-style: swap every swappable planning tensor with ``bytes >= min_swap_bytes``."""

    name = "swap-all"
    tags = Tags(supports_swap=True)

    class Params(Schema):
        min_swap_bytes: NonNegInt = Field(0, description="tensors smaller than this many bytes are kept, never swapped")

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        g = problem.graph
        dec = {t: Decision.SWAP if g.tensors[t].swappable and g.tensors[t].bytes >= self.min_swap_bytes
               else Decision.KEEP for t in problem.planning_ids}
        return make_plan(problem, dec, self.name, self.params, t0)
