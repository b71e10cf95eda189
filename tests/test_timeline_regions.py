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
