"""Shared helpers of the checkpointing planners: the chain of blocks of a graph.

A **block** is a maximal run of consecutive ops with the same ``Op.layer`` (not None): one
transformer layer. A graph without layers is a chain of one-op blocks (Chen et al. 2016 work on
the op chain). The **input** ``x_b`` of block ``b`` is the first input of its first op (the
residual stream entering the layer). ``x_0`` is the chain input: always kept.

For a set of kept block inputs (checkpoints), ``checkpoint_decisions`` gives the Megatron-"full"
style decisions: kept inputs KEEP, every other planning tensor produced inside a block RECOMPUTE,
tensors produced outside blocks (layer None: embedding, head, loss) and tensors a block hands to
an op outside it (the chain output, residual edges between blocks) KEEP. Tensors that are not
recomputable are always KEEP.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.plan import Decision, Plan
from ..timeline import simulate


@dataclass(frozen=True)
class Block:
    index: int
    ops: tuple[int, ...]
    input: int | None          # tensor id of x_b (None if the first op has no input)
    produced: tuple[int, ...]  # tensors produced by the block's ops


def blocks(graph) -> list[Block]:
    """The chain of blocks of ``graph`` in forward order (see module docstring)."""
    runs: list[list[int]] = []
    layered = any(op.layer is not None for op in graph.ops)
    prev = object()
    for op in graph.ops:
        if layered and op.layer is None:
            prev = object()
            continue
        key = op.layer if layered else op.id
        if runs and key == prev:
            runs[-1].append(op.id)
        else:
            runs.append([op.id])
        prev = key
    out = []
    for i, ops in enumerate(runs):
        first = graph.ops[ops[0]]
        produced = tuple(t for o in ops for t in graph.ops[o].outputs)
        out.append(Block(i, tuple(ops), first.inputs[0] if first.inputs else None, produced))
    return out


def block_of_tensor(graph, bl: list[Block]) -> dict[int, int]:
    """Tensor id -> index of the block that produces it (tensors produced outside are absent)."""
    return {t: b.index for b in bl for t in b.produced}


def boundary_outputs(graph, bl: list[Block]) -> set[int]:
    """Tensors produced in a block and read by an op outside that block (chain output, residual
    edges between blocks). Block inputs of the chain are among them."""
    op_block = {o: b.index for b in bl for o in b.ops}
    where = block_of_tensor(graph, bl)
    out = set()
    for t, b in where.items():
        if any(op_block.get(c) != b for c in graph.consumers[t]):
            out.add(t)
    return out


def checkpoint_decisions(problem, kept_inputs: set[int], bl: list[Block] | None = None,
                         full_blocks: frozenset[int] = frozenset()) -> dict[int, Decision]:
    """Decisions for checkpoints ``kept_inputs`` (block indices whose input ``x_b`` is kept;
    ``x_0`` always is). Blocks in ``full_blocks`` keep every tensor they produce except the next
    block's input (decided by ``kept_inputs``)."""
    g = problem.graph
    bl = blocks(g) if bl is None else bl
    where = block_of_tensor(g, bl)
    inputs = {b.input: b.index for b in bl if b.input is not None}
    boundary = boundary_outputs(g, bl)
    dec: dict[int, Decision] = {}
    for t in problem.planning_ids:
        ten = g.tensors[t]
        if t not in where or not ten.recomputable:
            keep = True
        elif t in inputs:
            keep = inputs[t] == 0 or inputs[t] in kept_inputs
        else:
            keep = where[t] in full_blocks or t in boundary
        dec[t] = Decision.KEEP if keep else Decision.RECOMPUTE
    return dec


def sqrt_checkpoints(n_blocks: int) -> set[int]:
    """Chen et al. 2016, Sec. 4.1: ``k = round(sqrt(n))`` segments of (nearly) equal length;
    the segment starts ``floor(i * n / k)`` are the kept block inputs."""
    if n_blocks <= 0:
        return set()
    k = max(1, round(n_blocks ** 0.5))
    return {(i * n_blocks) // k for i in range(k)}


def rerun_ops(graph, decisions: dict[int, Decision]) -> set[int]:
    """Ops the simulator re-runs in the backward pass (docs/timeline.md, 3): producers of every
    RECOMPUTE tensor and, recursively, of every non-resident input they read. Each once."""
    resident = {t.id for t in graph.tensors if t.producer is None}
    resident |= {t for t, d in decisions.items() if d is not Decision.RECOMPUTE}
    out: set[int] = set()
    stack = [graph.tensors[t].producer for t, d in decisions.items() if d is Decision.RECOMPUTE]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.add(p)
        stack.extend(graph.tensors[x].producer for x in graph.ops[p].inputs if x not in resident)
    return out


def simulate_plan(problem, decisions, hold_points=None):
    """Simulate decisions (and hold points; no detail) and return the SimResult."""

    return simulate(problem, Plan(decisions, problem_key=problem.key, hold_points=hold_points or {}), detail=False)
