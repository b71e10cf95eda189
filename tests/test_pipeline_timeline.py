"""One pipeline stage's step under 1F1B (docs/pipeline.md, "Pipeline stages (1F1B)"), by hand.

The hand-made case: ``chain(2, sizes=[1, 1], input_bytes=1)`` (a0 -> op0 -> a1 -> op1 -> a2; op0
saves the step input a0, op1 saves a1), unit costs (every op 1 s forward and 1 s backward, a copy
of b bytes b s), a GPU-to-GPU bandwidth of 1 byte/s: the boundary activation (the graph's step
input, 1 byte) takes send = 1 s. Per micro-batch F = 2 s forward, B = 2 s backward; pp = 2,
microbatches = 4.

The ideal 1F1B timeline of the two stages (every stage F = B = 2, send 1):

    stage 0: F0 0-2, F1 2-4,            B0 8-10, F2 10-12, B1 12-14, F3 14-16, B2 18-20, B3 22-24
    stage 1: F0 3-5, B0 5-7, F1 7-9, B1 9-11, F2 13-15, B2 15-17, F3 17-19, B3 19-21

(stage 1's F k starts at stage 0's end of F k + 1 when free; stage 0's B k at stage 1's end of
B k + 1.) So stage 0's inputs are there from the start, its gradients arrive at 8, 12, 18, 22
(round trips R(k) = arrival - ideal end of F k = 6, 8, 6, 6); stage 1's inputs arrive at 3, 5,
13, 17 and it waits for no gradient (the last stage).
"""

import dataclasses
import math
import random

import pytest

from slackswap import CostModel, Decision, Plan, PlanError, Problem, simulate
from slackswap.core import hardware as hw_mod
from slackswap.core.errors import ConfigError, ParameterError
from slackswap.experiments.synthetic import chain, mixed_dag
from slackswap.models import Parallel
from slackswap.timeline import issue_points
from slackswap.timeline.pipeline import Pipeline, PipelineRun, ideal_timeline, pipeline_of
from slackswap.timeline.schedule import compile_schedule
from slackswap.timeline.simulate import _Run

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE
A1 = 1   # the planning tensor a1


def _hardware(p2p=1.0):
    hw = hw_mod.load("a100-80gb")
    return dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, p2p_bytes_per_s=p2p))


def _problem(stage, budget=math.inf, pp=2, microbatches=4, optimizer_s=0.0):
    g = chain(2, sizes=[1, 1], input_bytes=1)
    c = dataclasses.replace(CostModel.unit(g), optimizer_s=optimizer_s)
    return Problem.from_graph(g, c, budget, _hardware(),
                              parallel=Parallel(pp=pp, microbatches=microbatches, stage=stage))


def _compute(r):
    return [(e.label, e.start, e.end) for e in r.events if e.stream == "compute"]


def _copies(r, stream):
    return [(e.microbatch, e.start, e.end) for e in r.events if e.stream == stream]


def test_order_warmup_in_flight():
    p = Pipeline(stages=2, stage=0, microbatches=4)
    assert p.order == (("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3))
    assert (p.warmup, p.in_flight) == (1, 2)
    last = Pipeline(stages=2, stage=1, microbatches=4, send_s=1.0)
    assert last.order[:4] == (("F", 0), ("B", 0), ("F", 1), ("B", 1))
    assert (last.warmup, last.in_flight) == (0, 1)
    assert Pipeline(4, 0, 8, 0.5).warmup == 3 and Pipeline(4, 0, 8, 0.5).in_flight == 4
    assert Pipeline(4, 0, 2, 0.5).in_flight == 2           # fewer micro-batches than stages
    assert Pipeline(1, 0, 3).order == (("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2))


def test_ideal_timeline_by_hand():
    fend, bend = ideal_timeline(2, 4, 2.0, 2.0, 1.0)      # the module docstring's table
    assert fend.tolist() == [[2, 4, 12, 16], [5, 9, 15, 19]]
    assert bend.tolist() == [[10, 14, 20, 24], [7, 11, 17, 21]]


def test_stage0_keep_all_by_hand():
    """Stage 0: F0 F1 B0 F2 B1 F3 B2 B3. Each backward pass waits for its gradient (8, 12, 18,
    22): bubble 4-8, 16-18, 20-22 = 8 s. At fwd op1 of micro-batch 1 (3-4) the stage holds a0 and
    a1 of micro-batch 0 (a1 kept until its backward) and a0, a1, a2 of micro-batch 1: 5 bytes,
    the keep-all peak (one micro-batch alone: 3)."""
    p = _problem(0)
    r = simulate(p, Plan({A1: K}))
    assert _compute(r) == [
        ("fwd:op0 mb 0", 0, 1), ("fwd:op1 mb 0", 1, 2), ("fwd:op0 mb 1", 2, 3), ("fwd:op1 mb 1", 3, 4),
        ("bwd:op1 mb 0", 8, 9), ("bwd:op0 mb 0", 9, 10), ("fwd:op0 mb 2", 10, 11),
        ("fwd:op1 mb 2", 11, 12), ("bwd:op1 mb 1", 12, 13), ("bwd:op0 mb 1", 13, 14),
        ("fwd:op0 mb 3", 14, 15), ("fwd:op1 mb 3", 15, 16), ("bwd:op1 mb 2", 18, 19),
        ("bwd:op0 mb 2", 19, 20), ("bwd:op1 mb 3", 22, 23), ("bwd:op0 mb 3", 23, 24),
        ("opt:optimizer", 24, 24)]
    assert r.step_time_s == r.ideal_step_time_s == p.ideal_step_s == 24.0
    assert (r.bubble_s, r.stall_s, r.compute_s, r.throughput_ratio) == (8.0, 0.0, 16.0, 1.0)
    assert (r.microbatches, r.in_flight) == (4, 2)
    assert r.peak_bytes == p.keep_all_peak == 5
    assert p.min_feasible_bytes == 3          # one micro-batch's floor: still a floor
    s = r.summary()
    assert (s["microbatches"], s["in_flight"], s["bubble_s"]) == (4, 2, 8.0)


def test_stage1_keep_all_by_hand():
    """Stage 1 (the last): F0 B0 F1 B1 F2 B2 F3 B3, each forward pass at its input's arrival
    (3, 5, 13, 17) when free: bubble 0-3 and 11-13 = 5 s; one micro-batch in flight."""
    p = _problem(1)
    r = simulate(p, Plan({A1: K}))
    starts = [a for _, a, _ in _compute(r)]
    assert starts == [3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16, 17, 18, 19, 20, 21]
    assert r.step_time_s == p.ideal_step_s == 21.0
    assert (r.bubble_s, r.stall_s, r.in_flight, r.peak_bytes) == (5.0, 0.0, 1, 3)


def test_stage0_swap_overlaps_another_microbatch():
    """Stage 0, a1 swapped, no limit. Each D2H copy starts when its fwd op0 ends: 1-2, 3-4,
    11-12, 15-16. H2D: the copy of micro-batch 0 is issued at the first backward stage (reached
    at 4): 4-5; micro-batch 1's after it: 5-6; micro-batch 2's not before the step after its
    forward (bwd op1 of micro-batch 1, reached at 12): 12-13, while that step runs (another
    micro-batch's compute); micro-batch 3's at 16-17, in the bubble. Every copy is back before
    its use: the timeline is keep-all's (24 s, bubble 8). Peak 5: at bwd op1 of micro-batch 0
    (8-9) a0 and a1 of micro-batches 0 and 1 and the gradient of a1."""
    r = simulate(_problem(0), Plan({A1: S}))
    assert _copies(r, "d2h") == [(0, 1, 2), (1, 3, 4), (2, 11, 12), (3, 15, 16)]
    assert _copies(r, "h2d") == [(0, 4, 5), (1, 5, 6), (2, 12, 13), (3, 16, 17)]
    assert ("bwd:op1 mb 1", 12, 13) in _compute(r)
    assert (r.step_time_s, r.bubble_s, r.stall_s, r.peak_bytes) == (24.0, 8.0, 0.0, 5)
    assert r.swapped_bytes == 4                  # 1 byte per micro-batch
    assert all(e.tensor == A1 for e in r.events if e.stream != "compute")


def test_stage1_swap_by_hand():
    """Stage 1, a1 swapped, no limit. Micro-batch k: fwd op0 ends at t, D2H t..t+1, H2D t+1..t+2
    (issued at the step after fwd op1, reached at t+1), so bwd op1 waits 1 s: stall 1 s per
    micro-batch. F0 3-5, B0 6-8 (stall 5-6); F1 arrives at 5, starts at 8; B1 11-13; F2 arrives
    at 13 = when the stage is free: the stall took the bubble's place (bubble 3 s, only the
    start); F3 18-20, B3 21-23. Step 23 s against the ideal 21 s."""
    p = _problem(1)
    r = simulate(p, Plan({A1: S}))
    assert [a for _, a, _ in _compute(r)] == [3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19, 21, 22, 23]
    assert _copies(r, "d2h") == [(0, 4, 5), (1, 9, 10), (2, 14, 15), (3, 19, 20)]
    assert _copies(r, "h2d") == [(0, 5, 6), (1, 10, 11), (2, 15, 16), (3, 20, 21)]
    assert (r.step_time_s, r.stall_bwd_s, r.stall_fwd_s, r.bubble_s) == (23.0, 4.0, 0.0, 3.0)
    assert r.compute_s == 16.0 and r.throughput_ratio == 21 / 23
    assert r.peak_bytes == 3


def test_gradient_accumulation_pp1_m3():
    """pp = 1, microbatches = 3: F0 B0 F1 B1 F2 B2, one optimizer (0.5 s): three times one
    micro-batch's 4 s of compute, then the optimizer once: 12.5 s. No send, no arrival, no
    bubble, no GPU-to-GPU bandwidth needed."""
    g = chain(2, sizes=[1, 1], input_bytes=1)
    c = dataclasses.replace(CostModel.unit(g), optimizer_s=0.5)
    p = Problem.from_graph(g, c, parallel={"pp": 1, "microbatches": 3})
    assert pipeline_of(p) == Pipeline(1, 0, 3, 0.0)
    one = Problem.from_graph(g, c)
    r = simulate(p, Plan({A1: K}))
    assert one.ideal_step_s == 4.5 and p.ideal_step_s == r.step_time_s == 12.5
    labels = [x for x, _, _ in _compute(r)]
    assert labels.count("opt:optimizer") == 1 and labels[-1] == "opt:optimizer"
    assert labels[:4] == ["fwd:op0 mb 0", "fwd:op1 mb 0", "bwd:op1 mb 0", "bwd:op0 mb 0"]
    assert (r.bubble_s, r.stall_s, r.in_flight, r.compute_s) == (0.0, 0.0, 1, 12.5)
    assert r.peak_bytes == one.keep_all_peak == p.keep_all_peak == 3


def _random_decisions(rng, g, ids):
    def allowed(t):
        x = g.tensors[t]
        return [K] + ([S] if x.swappable else []) + ([R] if x.recomputable else [])
    return {t: rng.choice(allowed(t)) for t in ids}


def _same_run(a, b):
    assert a.code == b.code
    if a.code:
        assert (a.a, a.x) == (b.a, b.x)
        return
    for name in ("S", "E", "d2h_start", "d2h_end", "h2d_start", "h2d_end", "times", "curve",
                 "kind", "op", "stage", "hq", "q"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert (a.stall_f, a.stall_b, a.recompute) == (b.stall_f, b.stall_b, b.recompute)
    assert b.bubble == 0.0


def test_one_stage_one_microbatch_unrolls_to_today():
    """The unrolled timeline of Pipeline(1, 0, 1) is today's exactly: steps, copies, issue
    stages, memory curve, waits; random plans (with hold points on a chain), budgets from tight
    to none, duplex 1 and 0.4."""
    rng = random.Random(7)
    graphs = [mixed_dag(s, 6) for s in range(6)] + [chain(5, sizes=[2, 1, 3, 2, 1], input_bytes=1)]
    pipe = Pipeline(1, 0, 1)
    n = 0
    for i, g in enumerate(graphs):
        c = CostModel.unit(g, bwd_factor=1.5, duplex_factor=0.4 if i % 2 else 1.0)
        base = Problem.from_graph(g, c, min_feasible_bytes=0)
        ids = base.planning_ids
        for _ in range(12):
            dec = _random_decisions(rng, g, ids)
            hold = {}
            if g.name == "chain":
                hold = {t: rng.randrange(len(g.ops)) for t in ids if dec[t] == R and rng.random() < 0.5}
            plan = Plan(dec, hold_points=hold)
            for frac in (0.5, 0.8, None):
                p = base.with_budget(frac)
                _same_run(_Run(p, plan, None), PipelineRun(p, plan, pipe))
                n += 1
    assert n == 7 * 12 * 3


def test_one_stage_one_microbatch_unrolls_a_region_schedule_to_today():
    """A region schedule (docs/regions.md) unrolled by Pipeline(1, 0, 1) is the one-GPU run of
    the same schedule exactly: random graphs, regions, plans, both ``swap``, tight budgets to
    none."""
    from slackswap.timeline.regions import region_schedule

    rng = random.Random(11)
    pipe = Pipeline(1, 0, 1)
    n = 0
    for seed in range(6):
        g = mixed_dag(seed, 7)
        base = Problem.from_graph(g, CostModel.unit(g, bwd_factor=1.5), min_feasible_bytes=0)
        cut = rng.randint(1, len(g.ops) - 1)
        regions = {o.id: int(o.id >= cut) for o in g.ops if rng.random() < 0.9}
        for _ in range(6):
            swap = rng.choice(["save", "recompute"])
            planning, sched = region_schedule(g, _random_decisions(rng, g, base.planning_ids), regions, swap)
            plan = Plan(planning)
            for frac in (0.6, 0.9, None):
                p = base.with_budget(frac)
                _same_run(_Run(p, plan, sched), PipelineRun(p, plan, pipe, schedule=sched))
                n += 1
    assert n == 6 * 6 * 3


def test_gradient_accumulation_replays_each_microbatchs_regions():
    """pp = 1, two micro-batches, per-layer regions, keep-all: the micro-batches run one after
    the other, so the peak is one micro-batch's, and each replays its regions: twice the
    recompute time, the same decisions."""
    one = Problem.build("tiny", "a100-80gb", budget=None).with_regions("layers")
    two = Problem.build("tiny", "a100-80gb", budget=None,
                        parallel={"pp": 1, "microbatches": 2}).with_regions("layers")
    keep = Plan({t: K for t in one.planning_ids})
    a, b = simulate(one, keep), simulate(two, keep)
    assert a.recompute_s > 0 and b.recompute_s == pytest.approx(2 * a.recompute_s, rel=1e-12)
    assert b.peak_bytes == a.peak_bytes and b.counts == a.counts and b.microbatches == 2


def test_a_stage_under_regions_is_no_faster_than_its_ideal_step():
    """``lower_bound`` of a stage with regions is its ideal step (docs/regions.md, "What is
    proven"): random graphs, stages of pp 1-3, 3-5 micro-batches, random regions and plans."""
    from slackswap.bounds import lower_bound

    rng = random.Random(5)
    for seed in range(16):
        g = mixed_dag(seed, 7)
        pp = rng.choice([1, 2, 3])
        base = Problem.from_graph(g, CostModel.unit(g, bwd_factor=1.5), math.inf, _hardware(),
                                  min_feasible_bytes=0, parallel=Parallel(
                                      pp=pp, microbatches=rng.choice([3, 4, 5]), stage=rng.randrange(pp)))
        cut = rng.randint(1, len(g.ops) - 1)
        p = base.with_regions({o.id: int(o.id >= cut) for o in g.ops if rng.random() < 0.9},
                              rng.choice(["save", "recompute"]))
        lb, _ = lower_bound(p)
        assert lb == p.ideal_step_s
        for _ in range(5):
            r = simulate(p, Plan(_random_decisions(rng, g, p.planning_ids)), detail=False)
            assert r.step_time_s >= lb * (1 - 1e-12)


def test_pp1_m1_given_explicitly_is_today():
    plain = Problem.build("tiny", "a100-80gb", budget=0.6)
    same = Problem.build("tiny", "a100-80gb", budget=0.6, parallel={"pp": 1, "microbatches": 1})
    assert pipeline_of(same) is None and same.keep_all_peak == plain.keep_all_peak
    rng = random.Random(3)
    for _ in range(4):
        plan = Plan({t: rng.choice((K, S, R)) for t in plain.planning_ids})
        a, b = simulate(plain, plan), simulate(same, plan)
        assert a.summary() == b.summary() and a.events == b.events
        assert a.memory_bytes.tolist() == b.memory_bytes.tolist()
        assert "microbatches" not in a.summary() and a.microbatches == 1 and a.bubble_s == 0.0
    # a hand-made Problem given the setting: the same
    hand = Problem(plain.graph, plain.costs, plain.budget_bytes, plain.hardware,
                   keep_all_peak=plain.keep_all_peak, min_feasible_bytes=plain.min_feasible_bytes,
                   parallel=Parallel(pp=1, microbatches=1))
    assert pipeline_of(hand) is None


def test_preset_pipeline_keep_all_is_its_ideal():
    p = Problem.build("tiny", "a100-80gb", budget=None, parallel={"pp": 2, "microbatches": 4})
    one = Problem.build("tiny", "a100-80gb", budget=None, parallel={"pp": 2, "microbatches": 2})
    r = simulate(p, Plan({t: K for t in p.planning_ids}))
    assert r.throughput_ratio == 1.0 and r.peak_bytes == p.keep_all_peak and r.in_flight == 2
    assert r.bubble_s > 0 and p.ideal_step_s > p.costs.ideal_step_s * 4
    assert p.keep_all_peak == one.keep_all_peak     # two in flight either way
    assert "1F1B: 4 micro-batches, up to 2 in flight" in str(p)
    half = p.with_budget(0.5)
    assert half.budget_bytes == p.keep_all_peak // 2


def test_bad_input_one_line_errors():
    for kw, text in (({"stages": 0}, "Pipeline(stages): must be a whole number >= 1; got 0"),
                     ({"stage": 2}, "Pipeline(stage): must be in 0 .. stages - 1 = 1; got 2"),
                     ({"microbatches": True}, "Pipeline(microbatches): must be a whole number >= 1"),
                     ({"send_s": math.nan}, "Pipeline(send_s): must be a finite number of seconds >= 0; got nan"),
                     ({"send_s": -1.0}, "Pipeline(send_s)")):
        args = {"stages": 2, "stage": 0, "microbatches": 4, "send_s": 1.0, **kw}
        with pytest.raises(ParameterError, match=r"^" + text.replace("(", r"\(").replace(")", r"\)")
                           .replace(".", r"\.").replace("+", r"\+")):
            Pipeline(**args)
    with pytest.raises(ParameterError, match="must be 0 with one stage"):
        Pipeline(1, 0, 2, 0.5)
    g = chain(2, sizes=[1, 1], input_bytes=1)
    with pytest.raises(ParameterError, match=r"pp = 2 needs a GPU-to-GPU bandwidth.*gpu\.p2p_bandwidth"):
        Problem.from_graph(g, CostModel.unit(g), hardware=_hardware(None), parallel={"pp": 2})
    with pytest.raises(ParameterError, match=r"pp = 2 needs .*; no hardware given \(gpu\.p2p_bandwidth"):
        Problem.from_graph(g, CostModel.unit(g), parallel={"pp": 2})
    with pytest.raises(ParameterError, match=r"^Problem\(parallel\): expected a models\.Parallel or None; got 'pp=2'"):
        Problem(g, CostModel.unit(g), keep_all_peak=3, min_feasible_bytes=0, parallel="pp=2")
    with pytest.raises(ConfigError, match=r"^parallel: microbatches: expected an integer; got nan"):
        Problem.from_graph(g, CostModel.unit(g), parallel={"pp": 1, "microbatches": math.nan})
    with pytest.raises(ParameterError, match=r"^parallel: pp = 2 needs a GPU-to-GPU bandwidth; hardware gh200"):
        Problem.build("tiny", "gh200", parallel={"pp": 2})
    p = _problem(0)
    plan = Plan({A1: S})
    with pytest.raises(PlanError, match=r"^schedule=\.\.\.: not with a pipeline stage"):
        simulate(p, plan, schedule=compile_schedule(p.graph, plan.decisions))
    with pytest.raises(PlanError, match=r"^issue_points\(problem, plan\): not for a pipeline stage"):
        issue_points(p, plan)
    # an issue point after the first use: the one-micro-batch error, word for word
    bad = Plan({A1: S}, issue_points={A1: 0})
    one = Problem.from_graph(p.graph, p.costs)
    with pytest.raises(PlanError) as plain_err:
        simulate(one, bad)
    with pytest.raises(PlanError) as pipe_err:
        simulate(p, bad)
    assert str(pipe_err.value) == str(plain_err.value)


def test_plan_issue_points_and_d2h_order_apply_to_every_microbatch():
    """Stage 0, a1 swapped, its issue point given as the stage of its first use (local stage 1,
    bwd op1): micro-batch k's copy is issued at its own bwd op1, which is reached at 4, 12, 17,
    20. Micro-batch 0's copy 4-5 (as by default). Micro-batch 1's 12-13: bwd op1 of micro-batch
    1 gets its gradient at 12 but waits for the copy: 1 s of stall, 13-14, bwd op0 14-15; F3
    15-17 (its D2H 16-17). Micro-batch 2's copy 17-18 while the stage waits for the gradient (18
    = the ideal arrival; the bubble 17-18). F3 ended at 17, one second late, so its gradient
    comes at 17 + R(3) = 17 + 6 = 23: micro-batch 3's copy 20-21 is hidden in the bubble 20-23;
    bwd 23-25. Step 25 s: stall 1 s, bubble 4 + 1 + 3 = 8 s, compute 16 s."""
    p = _problem(0)
    r = simulate(p, Plan({A1: S}, issue_points={A1: 1}, d2h_order=[A1]))
    assert _copies(r, "h2d") == [(0, 4, 5), (1, 12, 13), (2, 17, 18), (3, 20, 21)]
    assert _copies(r, "d2h") == [(0, 1, 2), (1, 3, 4), (2, 11, 12), (3, 16, 17)]
    assert (r.step_time_s, r.stall_bwd_s, r.bubble_s, r.compute_s) == (25.0, 1.0, 8.0, 16.0)
    assert _compute(r)[-3:] == [("bwd:op1 mb 3", 23, 24), ("bwd:op0 mb 3", 24, 25), ("opt:optimizer", 25, 25)]


def test_cli_shows_the_pipeline_only_for_pipelined_problems(capsys, tmp_path):
    from slackswap import cli

    out = tmp_path / "plan.json"
    assert cli.main(["plan", "--model", "tiny", "--parallel", "pp=2,microbatches=4", "--budget", "0.5",
                     "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pipeline (1F1B): 4 micro-batches, up to 2 in flight, bubble" in text
    assert cli.main(["simulate", "--plan", str(out), "--model", "tiny", "--parallel",
                     "pp=2,microbatches=6", "--budget", "0.5"]) == 0
    assert "pipeline (1F1B): 6 micro-batches, up to 2 in flight" in capsys.readouterr().out
    assert cli.main(["plan", "--model", "tiny", "--budget", "0.5"]) == 0
    assert "pipeline" not in capsys.readouterr().out


def test_random_pipelines_fit_and_keep_the_floor():
    """On random graphs, plans (with given issue points now and then) and budgets, every stage of
    2-3 stages over 3-4 micro-batches: a feasible result fits its budget (actual memory never
    exceeds accounted memory) and no peak is below the one-micro-batch floor; keep-all with no
    limit is the ideal step (ratio 1) at the keep-all peak."""
    rng = random.Random(11)
    hw = _hardware(2.0)
    checked = feasible = 0
    for seed in range(8):
        g = mixed_dag(seed, 5)
        c = CostModel.unit(g, bwd_factor=1.5, duplex_factor=0.5 if seed % 2 else 1.0)
        pp = 2 + seed % 2
        par = Parallel(pp=pp, microbatches=pp + seed % 2, stage=seed % pp)
        base = Problem.from_graph(g, c, hardware=hw, parallel=par)
        keep = simulate(base, Plan({t: K for t in base.planning_ids}))
        assert keep.throughput_ratio == 1.0 and keep.peak_bytes == base.keep_all_peak
        assert keep.in_flight == min(pp - par.stage, par.microbatches)
        for _ in range(6):
            dec = _random_decisions(rng, g, base.planning_ids)
            swapped = [t for t in base.planning_ids if dec[t] == S]
            given = {t: len(g.ops) - 1 for t in swapped if rng.random() < 0.3}
            plan = Plan(dec, issue_points=given)
            for frac in (0.6, 0.8, 1.0, None):
                try:
                    p = base.with_budget(frac)
                except Exception:      # below the floor
                    continue
                r = simulate(p, plan, detail=False)
                checked += 1
                if r.feasible:
                    feasible += 1
                    assert r.peak_bytes <= p.budget_bytes
                    assert r.peak_bytes >= p.min_feasible_bytes
                    assert r.step_time_s >= p.ideal_step_s - 1e-9 * p.ideal_step_s
    assert checked >= 100 and feasible >= 50, (checked, feasible)
