"""Exact decisions of the classic baselines on small graphs."""

from __future__ import annotations

from slackswap import planners
from slackswap.core.costs import CostModel
from slackswap.core.plan import Decision, Status
from slackswap.experiments import synthetic
from slackswap.timeline.problem import Problem

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE


def _res(sizes=(2, 3, 1, 2)):
    g = synthetic.residual_block(sizes=sizes)   # planning tensors: x=1, h=2, z=4
    return Problem.from_graph(g, CostModel.unit(g))


def test_keep_all_and_recompute_all():
    p = _res()
    assert planners.get("keep-all").plan(p).decisions == {1: K, 2: K, 4: K}
    assert planners.get("recompute-all").plan(p).decisions == {1: R, 2: R, 4: R}
    assert planners.get("keep-all").plan(p).info.status is Status.FEASIBLE


def test_checkpoint_layers_residual_block():
    # block 0 = ops f, g, add. x enters it (kept); h is inside (recomputed); z is handed to the
    # loss outside the block (kept, Megatron keeps the checkpoint function's output).
    assert planners.get("checkpoint-layers").plan(_res()).decisions == {1: K, 2: R, 4: K}


def test_checkpoint_layers_chain_is_keep_all():
    g = synthetic.chain(4)   # every op is its own layer: every planning tensor is a block input
    p = Problem.from_graph(g, CostModel.unit(g))
    assert planners.get("checkpoint-layers").plan(p).decisions == {1: K, 2: K, 3: K}


def test_checkpoint_layers_on_tiny_transformer():
    p = Problem.build("tiny", "a100-80gb", budget=None)
    d = planners.get("checkpoint-layers").plan(p).decisions
    g = p.graph
    kept = {g.tensors[t].name for t, v in d.items() if v is K}
    block_inputs = {g.tensors[op.inputs[0]].name for op in g.ops if op.name.endswith("attn.norm")}
    outside = {g.tensors[t].name for t in d if g.ops[g.tensors[t].producer].layer is None}
    last_out = {g.tensors[g.ops[-3].inputs[0]].name}          # final_norm reads the last block's output
    assert kept == block_inputs | outside | last_out


def test_swap_all_threshold():
    p = _res()
    assert planners.get("swap-all").plan(p).decisions == {1: S, 2: S, 4: S}
    assert planners.get("swap-all", min_swap_bytes=3).plan(p).decisions == {1: K, 2: S, 4: K}
    assert planners.get("swap-all", min_swap_bytes=3).plan(p).params == {"min_swap_bytes": 3}


def test_swap_all_worked_example_of_timeline_doc():
    g = synthetic.chain(4, sizes=[2, 2, 2, 2])
    p = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6)
    plan = planners.get("swap-all").plan(p)
    assert plan.info.status is Status.FEASIBLE and plan.info.objective == 16.0   # docs/timeline.md 6
