"""``simulate(problem, plan, regions=...)``: a plan judged as selective activation checkpointing
of those regions runs it (docs/regions.md, "Checkpointed regions")."""

import numpy as np
import pytest
from test_simulate_core import assert_same

from slackswap import Decision, Plan, PlanError, Problem
from slackswap.core.errors import ParameterError
from slackswap.timeline import simulate
from slackswap.timeline.regions import layer_regions, region_decisions, region_schedule
from slackswap.timeline.schedule import compile_schedule

K, R, S = Decision.KEEP, Decision.RECOMPUTE, Decision.SWAP


def _tiny():
    p = Problem.build("tiny", "a100-80gb", None)
    return p, layer_regions(p.graph)


def test_layer_regions_follow_op_layers():
    p, regions = _tiny()
    g = p.graph
    assert set(regions.values()) == {op.layer for op in g.ops if op.layer is not None}
    assert all(g.ops[o].layer == r for o, r in regions.items())
    assert len(regions) < len(g.ops)         # embeddings, head and loss are in no region


def test_keep_all_in_regions_still_replays_what_no_op_saves():
    """SAC re-runs a region's unsaved calls up to the last tensor its backward needs: a keep-all
    plan, free under producer-chain recompute, re-runs ops once checkpointed."""
    p, regions = _tiny()
    keep = Plan({t: K for t in p.planning_ids})
    assert simulate(p, keep).recompute_s == 0
    r = simulate(p, keep, regions=regions)
    _, sched = region_schedule(p.graph, keep.decisions, regions)
    assert sched.recomputed and all(o in regions for o in sched.recomputed)
    assert r.feasible and r.recompute_s > 0 and r.counts == keep.counts()
    # each region replayed once, its ops in forward order
    for lab in set(regions.values()):
        ops = [o for o in sched.recomputed if regions[o] == lab]
        assert ops == sorted(set(ops))


def test_effective_decisions_keep_what_crosses_a_region_boundary():
    p, regions = _tiny()
    g = p.graph
    rec = {t: R for t in p.planning_ids}
    eff, cached = region_decisions(g, rec, regions)
    assert not cached
    for t in p.planning_ids:
        prod = g.tensors[t].producer
        inside = regions.get(prod)
        outside = inside is None or any(regions.get(o) != inside for o in g.saved_by[t])
        assert eff[t] is (K if outside else R), (t, g.tensors[t].name)
    # planned counts are the decisions as they run
    r = simulate(p, Plan(rec), regions=regions)
    assert r.counts["keep"] == sum(d is K for t, d in eff.items() if t in rec)


def test_swap_inside_a_region_is_saved_or_recomputed():
    p, regions = _tiny()
    g = p.graph
    swap = Plan({t: S for t in p.planning_ids})
    saved = simulate(p, swap, regions=regions)
    recomputed = simulate(p, swap, regions=regions, swap="recompute")
    assert saved.swapped_bytes == recomputed.swapped_bytes == 0
    assert saved.counts["swap"] == recomputed.counts["swap"] == 0
    keep = simulate(p, Plan({t: K for t in p.planning_ids}), regions=regions)
    assert (saved.peak_bytes, saved.recompute_s) == (keep.peak_bytes, keep.recompute_s)
    assert recomputed.recompute_s >= saved.recompute_s
    assert recomputed.counts["recompute"] > 0 and g is p.graph


def test_compiled_core_and_reference_agree_on_region_schedules():
    p, regions = _tiny()
    rng = np.random.default_rng(7)
    for i in range(8):
        dec = {t: (K, R, S)[rng.integers(3)] for t in p.planning_ids}
        planning, sched = region_schedule(p.graph, dec, regions)
        budget = p.with_budget(None) if i % 2 else p.with_budget(
            max(p.min_feasible_bytes, int(0.6 * p.keep_all_peak)))
        assert_same(budget, Plan(planning), schedule=sched)
        r = simulate(budget, Plan(dec), regions=regions)
        assert r.feasible == assert_same(budget, Plan(planning), schedule=sched).feasible


def test_regions_none_is_the_default_schedule():
    p, regions = _tiny()
    dec = {t: R for t in p.planning_ids}
    a = compile_schedule(p.graph, dec)
    b = compile_schedule(p.graph, dec, regions={})
    assert (a.kinds, a.ops, a.recomputed) == (b.kinds, b.ops, b.recomputed)


def test_bad_regions_are_one_line():
    p, regions = _tiny()
    plan = Plan({t: K for t in p.planning_ids})
    n = len(p.graph.ops)
    cases = [
        ([1, 2], ParameterError, "regions: expected a dict of op id -> region label; got list"),
        ({n: 0}, ParameterError, f"regions: keys must be op ids, integers in 0..{n - 1}; got {n}"),
        ({True: 0}, ParameterError, "keys must be op ids"),
        ({0: float("nan")}, ParameterError, "regions[0]: a region label must be an int or a str; got nan"),
        ({0: None}, ParameterError, "regions[0]: a region label must be an int or a str; got None"),
    ]
    for regs, err, text in cases:
        with pytest.raises(err) as e:
            simulate(p, plan, regions=regs)
        assert text in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ParameterError, match="^graph: expected a Graph; got str$"):
        layer_regions("tiny")
    with pytest.raises(ParameterError, match="^regions: expected a dict"):
        region_decisions(p.graph, plan.decisions, "layers")
    with pytest.raises(ParameterError, match="swap: must be one of save, recompute; got 'offload'"):
        simulate(p, plan, regions=regions, swap="offload")
    with pytest.raises(PlanError, match="not with regions"):
        simulate(p, plan, regions=regions, schedule=compile_schedule(p.graph, plan.decisions))
    t = next(iter(p.planning_ids))
    with pytest.raises(PlanError, match="plan.hold_points: not with regions"):
        simulate(p, Plan({**plan.decisions, t: R}, hold_points={t: 0}), regions=regions)


@pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread
def test_region_replays_are_the_calls_selective_checkpointing_reruns():
    """On a traced Linear-Tanh-Linear-Tanh-Linear checkpointed as one region, the schedule's
    re-runs are the calls PyTorch re-runs under ``slackswap.torch.policy``, counted."""
    torch = pytest.importorskip("torch")
    from test_torch_policy import Count, _mlp, _tanh_outputs
    from torch.utils.checkpoint import checkpoint

    from slackswap.torch import policy

    for first in (K, R):
        for second in (K, R):
            net, x, g, _ = _mlp()
            a, b = _tanh_outputs(g)
            plan = Plan({a: first, b: second})
            regions = {op.id: 0 for op in g.ops if op.name != "model:sum"}
            _, sched = region_schedule(g, plan.decisions, regions)
            want = {}
            for o in sched.recomputed:
                name = g.spec.op_signature[o]
                want[name] = want.get(name, 0) + 1
            count = Count(["aten.tanh.default", "aten.addmm.default"])
            with count:
                checkpoint(net, x, use_reentrant=False, context_fn=policy(plan, g)).sum().backward()
            assert count.backward == want, (first, second)
            assert torch.is_grad_enabled()


@pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread
def test_ops_written_in_place_are_not_cached():
    """A traced CNN (BatchNorm + in-place ReLU): the policy cannot cache the norms, so neither
    does the region schedule; their outputs are re-run even under keep-all."""
    pytest.importorskip("torch")
    from exec_models import build

    from slackswap.timeline.regions import written_in_place
    from slackswap.torch import policy, trace

    model, (x,) = build("cnn")
    g = trace(model, (x,), device="cpu")
    norms = {op.id for op in g.ops if op.name.endswith("native_batch_norm")}
    assert written_in_place(g) == norms
    keep = {t.id: K for t in g.planning_tensors()}
    regions = {op.id: 0 for op in g.ops}
    eff, cached = region_decisions(g, keep, regions)
    assert not cached & norms
    for t in g.planning_tensors():       # kept by the plan, recomputed as it runs
        if g.tensors[t.id].producer in norms and all(regions.get(o) == 0 for o in g.saved_by[t.id]):
            assert eff[t.id] is R
    pol = policy(Plan(keep), g)
    assert {g.tensors[t].producer for t in pol.not_saved} == norms
    assert written_in_place(Problem.build("tiny", "a100-80gb", None).graph) == frozenset()


def test_a_cached_output_is_held_until_the_replay_takes_it():
    """``chain(6)``, regions ops 0-2 and 3-5, keep-all: every op is cached by the policy.
    Steps: forward 0-5, then the backward steps of ops 5..0 at 6..11. Region 1 is replayed
    before step 6 and takes a4 and a5 from the cache (nothing re-runs): they live to their last
    backward use, a4 to op4's (7), a5 to op5's (6). Region 0's replay (before step 9) stops
    after op1, the last op that made a tensor region 0's backward saves (a2, saved by op2), so
    it never takes op2's output a3: the cache holds a3 until region 0's last backward step that
    unpacks (op0's, 11), not only to op3's backward (8), its last use."""
    from slackswap.experiments import synthetic

    g = synthetic.chain(6, sizes=[3, 1, 4, 1, 5, 9], input_bytes=1)
    keep = {t.id: K for t in g.planning_tensors()}
    regions = {o.id: o.id // 3 for o in g.ops}
    _, cached = region_decisions(g, keep, regions)
    assert cached == {0, 1, 2, 3, 4}
    _, sched = region_schedule(g, keep, regions)
    assert not sched.recomputed
    assert [(k, o) for k, o in zip(sched.kinds, sched.ops, strict=True)][6:12] == [
        ("bwd", o) for o in range(5, -1, -1)]
    spans = {t: sched.tensor_spans[t] for t in keep}
    assert spans == {1: [(0, 10)], 2: [(1, 9)], 3: [(2, 11)], 4: [(3, 7)], 5: [(4, 6)]}


def _crossing():
    """x0 -> f -> h -> g -> y -> u -> w; v(y, w) -> z; loss(z). f, g, u in region 0; v and the
    loss in none. f saves x0, g saves h, u saves y, v saves y, the loss saves z."""
    from slackswap.core.graph import Graph, Op, Tensor

    tensors = (Tensor(0, "x0", 1, None, kind="input"), Tensor(1, "h", 2, 0), Tensor(2, "y", 4, 1),
               Tensor(3, "w", 8, 2), Tensor(4, "z", 16, 3), Tensor(5, "l", 0, 4, kind="loss"))
    ops = (Op(0, "f", 0, "matmul", inputs=(0,), outputs=(1,), saves=(0,)),
           Op(1, "g", 0, "matmul", inputs=(1,), outputs=(2,), saves=(1,)),
           Op(2, "u", 0, "matmul", inputs=(2,), outputs=(3,), saves=(2,)),
           Op(3, "v", None, "matmul", inputs=(2, 3), outputs=(4,), saves=(2,)),
           Op(4, "loss", None, "loss", inputs=(4,), outputs=(5,), saves=(4,)))
    return Graph("crossing", ops, tensors), {0: 0, 1: 0, 2: 0}


def test_a_replay_makes_its_own_copy_of_a_tensor_kept_for_a_reader_outside():
    """``_crossing``: y is made in region 0 and saved by u (inside) and v (outside), so it is
    kept whatever the plan says. With h and y recomputed nothing is cached; region 0's replay
    (before u's backward, step 9) re-runs f (7) and g (8), and g's re-run makes a new y, which
    u's backward reads (9); the kept y serves v only, until v's backward (6). Before, one y
    lived from step 1 to 9. With h and y kept, f and g are cached and the replay takes them: one
    y, to u's backward (7), and h to g's (8)."""
    g, regions = _crossing()
    plan = {1: R, 2: R, 4: K}
    eff, cached = region_decisions(g, plan, regions)
    assert not cached and eff[2] is K and eff[1] is R
    _, sched = region_schedule(g, plan, regions)
    assert list(zip(sched.kinds, sched.ops, strict=True))[5:12] == [
        ("bwd", 4), ("bwd", 3), ("rec", 0), ("rec", 1), ("bwd", 2), ("bwd", 1), ("bwd", 0)]
    assert sorted(sched.tensor_spans[2]) == [(1, 6), (8, 9)]
    assert sched.tensor_spans[1] == [(0, 1), (7, 10)]
    _, sched = region_schedule(g, {1: K, 2: K, 4: K}, regions)
    assert not sched.recomputed
    assert sched.tensor_spans[2] == [(1, 7)] and sched.tensor_spans[1] == [(0, 8)]
