"""Planners and the certified bound on one pipeline stage under 1F1B (docs/planners.md, "Planning
a pipeline stage"; docs/milp.md, "Pipeline stages: the bound").

Tiny problems: random 4-op graphs of ``experiments.synthetic`` with unit costs, pp = 2, stage 0
and 1, 2 to 4 micro-batches; brute force (every shared plan, at most 81) is the oracle."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slackswap import planners
from slackswap.bounds import capacity_bound, gap, lower_bound
from slackswap.bounds.pipeline import (
    in_flight_counts,
    keep_rows,
    path_constants,
    pipeline_bound,
    tail_constants,
)
from slackswap.core import hardware as hw_mod
from slackswap.core.costs import CostModel
from slackswap.core.errors import ParameterError
from slackswap.core.plan import Decision, Plan, Status
from slackswap.experiments import synthetic as syn
from slackswap.models import Parallel
from slackswap.planners.slack.judge import Judge
from slackswap.timeline import simulate
from slackswap.timeline.pipeline import Pipeline, one_f_one_b
from slackswap.timeline.problem import Problem

HW = hw_mod.load("a100-80gb")


def _costs(g, copy_scale: float) -> CostModel:
    c = CostModel.unit(g)
    return replace(c, d2h_s=tuple(v * copy_scale for v in c.d2h_s), h2d_s=tuple(v * copy_scale for v in c.h2d_s))


def _graph(seed: int):
    return syn.mixed_dag(seed, 4) if seed % 2 else syn.random_dag(seed, 4)


def _stage(g, c, stage: int, m: int, pp: int = 2) -> Problem:
    return Problem.from_graph(g, c, math.inf, HW, parallel=Parallel(pp=pp, stage=stage, microbatches=m))


def _budgets(p: Problem) -> list[int]:
    lo, hi = p.min_feasible_bytes, p.keep_all_peak
    return sorted({lo, (lo + hi) // 2, max(lo, hi - 1)})


# ---------------------------------------------------------------- the bound

@pytest.mark.parametrize("seed", range(12))
def test_the_bound_holds_against_brute_force(seed):
    """brute's best shared plan (every keep / swap / recompute vector, simulated on the pipeline)
    is never faster than the bound; where the bound is infinite brute finds no plan that fits.
    Copies fast and slow (the slow ones lift the LP above the ideal step)."""
    g = _graph(seed)
    c = _costs(g, (0.5, 3.0, 8.0)[seed % 3])
    m = 2 + seed % 3
    for stage in (0, 1):
        base = _stage(g, c, stage, m)
        for b in _budgets(base):
            p = base.with_budget(b)
            lb, how = lower_bound(p)
            best = planners.get("brute").plan(p)
            opt = best.info.objective if best.info.status is Status.OPTIMAL else math.inf
            assert lb <= opt, (g.name, stage, m, b, lb, opt, how)
            assert lb >= p.ideal_step_s
            assert capacity_bound(p) == lb


@pytest.mark.parametrize("seed", range(4))
def test_the_bound_holds_with_three_stages_slow_sends_and_duplex(seed):
    """As above with pp = 3 (every stage), sends of 2 s (a 2-byte/s GPU link), an optimizer
    step and a duplex factor of 0.5."""
    hw = replace(HW, gpu=replace(HW.gpu, p2p_bytes_per_s=2.0))
    g = _graph(seed)
    c = replace(_costs(g, (0.3, 1.5, 6.0)[seed % 3]), optimizer_s=0.5, duplex_factor=0.5)
    m = 3 + seed % 2
    for stage in range(3):
        base = Problem.from_graph(g, c, math.inf, hw, parallel=Parallel(pp=3, stage=stage, microbatches=m))
        assert base.pipeline.send_s > 0
        for b in (base.min_feasible_bytes, (base.min_feasible_bytes + base.keep_all_peak) // 2):
            p = base.with_budget(b)
            lb = lower_bound(p)[0]
            best = planners.get("brute").plan(p)
            assert lb <= (best.info.objective if best.info.status is Status.OPTIMAL else math.inf)


def test_the_bound_holds_for_random_plans_with_hold_points():
    """Random shared plans (with random hold points on their RECOMPUTE tensors: multi-level
    plans, which brute does not try) on random stages (pp 1 to 3, any stage, 2 to 5
    micro-batches): every plan that fits is no faster than the bound."""
    import random

    from slackswap.core.errors import SlackSwapError

    rng = random.Random(7)
    fitted = 0
    for seed in range(20):
        g = (syn.chain(6, sizes=[rng.randint(1, 4) for _ in range(6)], input_bytes=1) if seed % 3 == 0
             else _graph(seed) if seed % 3 == 1 else syn.mixed_dag(seed, 6))
        c = _costs(g, rng.choice([0.3, 1.0, 4.0]))
        pp = rng.choice([1, 2, 3])
        base = _stage(g, c, rng.randrange(pp), max(2, pp + rng.randint(0, 2)), pp)
        for _ in range(2):
            p = base.with_budget(rng.randint(base.min_feasible_bytes, base.keep_all_peak))
            lb = lower_bound(p)[0]
            for _ in range(20):
                dec = {}
                for t in p.planning_ids:
                    tt = g.tensors[t]
                    dec[t] = rng.choice([Decision.KEEP] + [Decision.SWAP] * tt.swappable
                                        + [Decision.RECOMPUTE] * tt.recomputable)
                hold = {t: rng.randrange(len(g.ops)) for t, d in dec.items()
                        if d is Decision.RECOMPUTE and rng.random() < 0.5}
                try:
                    r = simulate(p, Plan(dec, hold_points=hold), detail=False)
                except SlackSwapError:      # a hold point the plan cannot have
                    continue
                if r.fits:
                    fitted += 1
                    assert r.step_time_s >= lb, (g.name, p.pipeline, p.budget_bytes)
    assert fitted > 200


def test_the_bound_is_above_the_ideal_step_where_copies_are_slow():
    """The LP is not the ideal step in disguise: on these cases it proves more (and brute's
    optimum is above it, as every case of the test above checks)."""
    lifted = 0
    for seed in range(6):
        g = _graph(seed)
        c = _costs(g, 8.0)
        p = _stage(g, c, 0, 3)
        p = p.with_budget(p.min_feasible_bytes + (p.keep_all_peak - p.min_feasible_bytes) // 2)
        lb, how = pipeline_bound(p)
        if math.isfinite(lb) and lb > p.ideal_step_s * (1 + 1e-6):
            lifted += 1
            assert how.startswith("pipeline LP")
    assert lifted >= 2


def test_one_stage_one_micro_batch_is_todays_bound():
    """pp = 1 and m = 1 given explicitly: no pipeline, the one-GPU bound exactly."""
    for seed in range(4):
        g = _graph(seed)
        c = _costs(g, 0.7)
        plain = Problem.from_graph(g, c, math.inf)
        par = Problem.from_graph(g, c, math.inf, HW, parallel=Parallel(pp=1, microbatches=1))
        assert par.pipeline is None
        for b in _budgets(plain):
            assert lower_bound(par.with_budget(b)) == lower_bound(plain.with_budget(b))
            assert capacity_bound(par.with_budget(b)) == capacity_bound(plain.with_budget(b))


def test_the_passes_paths_give_the_ideal_step():
    """With no re-run the longest of the passes' paths is the keep-all timeline's end, for both
    stages and for gradient accumulation (pp = 1, where the path is the whole work)."""
    g = syn.chain(4, sizes=[2, 1, 2, 1], input_bytes=1)
    c = CostModel.unit(g)
    for pp, stage, m in ((2, 0, 3), (2, 1, 3), (1, 0, 3), (4, 1, 5)):
        gg = syn.chain(8, input_bytes=1) if pp == 4 else g
        cc = CostModel.unit(gg)
        p = _stage(gg, cc, stage, m, pp)
        assert max(path_constants(p.costs, p.pipeline)) == pytest.approx(p.ideal_step_s, rel=1e-12)
    p = _stage(g, c, 0, 3, pp=1)
    consts = path_constants(p.costs, p.pipeline)
    assert consts[-1] == pytest.approx(3 * (4 + 4))     # three micro-batches in a row, no optimizer time
    assert all(x == -math.inf for x in consts[:-1])


def test_the_tails_from_the_first_pass_give_the_ideal_step_of_stage_zero():
    """Stage 0 waits for no input: every path starts with its first forward pass, so that pass
    plus the longest tail after it is the keep-all timeline's end."""
    g = syn.chain(8, input_bytes=1)
    c = replace(CostModel.unit(g), optimizer_s=0.5)
    for pp, m in ((2, 3), (4, 5), (4, 8), (1, 3)):
        p = _stage(g, c, 0, m, pp)
        tail = tail_constants(p.costs, p.pipeline)
        assert len(tail) == 2 * m
        assert sum(p.costs.fwd_s) + max(tail[0]) == pytest.approx(p.ideal_step_s, rel=1e-12)
        assert tail[-1][0] == 0.5 and tail[-1][1:] == [-math.inf] * m


def test_in_flight_counts():
    """Other micro-batches between forward and backward at each pass of 1F1B."""
    assert in_flight_counts(one_f_one_b(2, 0, 4)) == (1, 1)        # F0 F1 B0 F2 B1 F3 B2 B3
    assert in_flight_counts(one_f_one_b(4, 0, 8)) == (3, 3)
    assert in_flight_counts(one_f_one_b(2, 1, 4)) == (0, 0)        # F0 B0 F1 B1 ...
    assert in_flight_counts(Pipeline(3, 0, 2).order) == (1, 1)     # m < p - s: all forwards first


def test_pipeline_bound_refuses_a_one_gpu_problem_and_anything_else():
    g = syn.chain(3)
    p = Problem.from_graph(g, CostModel.unit(g))
    with pytest.raises(ParameterError, match=r"^pipeline_bound\(problem\): needs a pipeline stage"):
        pipeline_bound(p)
    with pytest.raises(ParameterError, match=r"^pipeline_bound\(problem\): expected a Problem"):
        pipeline_bound("tiny")
    with pytest.raises(ParameterError, match=r"^keep_rows\(problem\): needs a pipeline stage"):
        keep_rows(p)


def test_gap_of_a_plan_uses_the_pipeline_bound():
    g = _graph(3)
    p = _stage(g, _costs(g, 3.0), 0, 2)
    p = p.with_budget(p.min_feasible_bytes + (p.keep_all_peak - p.min_feasible_bytes) // 2)
    plan = planners.get("brute").plan(p)
    r = simulate(p, plan, detail=False)
    assert gap(p, r) == pytest.approx((r.step_time_s - lower_bound(p)[0]) / r.step_time_s)


# ---------------------------------------------------------------- the planners

def _tiny(stage: int) -> Problem:
    g = syn.chain(6, sizes=[2, 3, 2, 3, 2, 1])
    base = _stage(g, CostModel.unit(g), stage, 3)
    return base.with_budget((base.min_feasible_bytes + base.keep_all_peak) // 2)


FAST = sorted(set(planners.available()) - {"milp"})


@pytest.mark.parametrize("name", FAST)
@pytest.mark.parametrize("stage", [0, 1])
def test_every_planner_plans_one_stage(name, stage):
    """Every plan is judged by the pipeline's simulation: it fits, or its status says it does
    not (INFEASIBLE: the plan does not fit; a baseline's fixed rule may not)."""
    p = _tiny(stage)
    plan = planners.get(name).plan(p)
    r = simulate(p, plan, detail=False)
    assert r.microbatches == 3
    if plan.info.status in (Status.FEASIBLE, Status.OPTIMAL):
        assert r.fits
        assert plan.info.objective == pytest.approx(r.step_time_s, rel=1e-12)
        assert r.step_time_s >= lower_bound(p)[0]
    else:
        assert plan.info.status is Status.INFEASIBLE and not r.fits and plan.info.message


@pytest.mark.parametrize("stage", [0, 1])
def test_the_search_planners_fit_where_brute_does(stage):
    """slack, dp-checkpoint and capuchin find a plan that fits on these stages, never faster
    than brute's best shared plan."""
    p = _tiny(stage)
    best = planners.get("brute").plan(p).info.objective
    for name in ("slack", "dp-checkpoint", "capuchin"):
        plan = planners.get(name).plan(p)
        assert plan.info.status is Status.FEASIBLE, (name, plan.info.message)
        assert plan.info.objective >= best * (1 - 1e-12)


def test_dp_checkpoint_bisects_the_one_micro_batch_limit():
    """Under a pipeline the DP's one-micro-batch model is solved under a bisected cap on the
    stored bytes: its plan fits the stage, recomputes only, and is never faster than brute's
    best keep/recompute plan."""
    for stage in (0, 1):
        p = _tiny(stage)
        plan = planners.get("dp-checkpoint").plan(p)
        r = simulate(p, plan, detail=False)
        assert r.fits
        assert not plan.ids(Decision.SWAP)
        best = planners.get("brute", allow_swap=False).plan(p).info.objective
        assert r.step_time_s >= best * (1 - 1e-12)


def test_slack_compute_bound_is_below_every_simulated_step():
    """slack's pruning bound on a pipeline stage (the passes' paths with every backward pass
    longer by the re-runs) is below the simulated step of every shared keep/recompute plan, also
    with three stages, sends of a second and an optimizer step."""
    import itertools

    hw = replace(HW, gpu=replace(HW.gpu, p2p_bytes_per_s=2.0))     # 2 input bytes: sends of 1 s
    g = syn.chain(6, sizes=[2, 3, 2, 3, 2, 1], input_bytes=2)
    slow = Problem.from_graph(g, replace(CostModel.unit(g), optimizer_s=0.5), math.inf, hw,
                              parallel=Parallel(pp=3, stage=1, microbatches=4))
    for p in (_tiny(0).with_budget(None), _tiny(1).with_budget(None), slow):
        judge = Judge(p, 10)
        ids = p.planning_ids
        for combo in itertools.product((Decision.KEEP, Decision.RECOMPUTE), repeat=len(ids)):
            dec = dict(zip(ids, combo, strict=True))
            r = simulate(p, Plan(dec), detail=False)
            assert judge.compute_bound(dec) <= r.step_time_s


def test_the_planners_memory_pruning_stays_valid_on_a_pipeline():
    """slack and capuchin prune a plan whose one-micro-batch memory bound (``memory_bound``,
    ``ForwardBound``) exceeds the budget: on a pipeline stage such a plan never fits either (the
    stage holds at least one micro-batch's memory at each of its steps)."""
    import random

    from slackswap.planners.slack.judge import ForwardBound
    from slackswap.timeline.simulate import memory_bound

    rng = random.Random(3)
    pruned = 0
    for seed in range(12):
        g = _graph(seed)
        base = _stage(g, _costs(g, 1.0), seed % 2, 2 + seed % 3)
        for b in _budgets(base):
            p = base.with_budget(b)
            fwd = ForwardBound(p)
            for _ in range(15):
                dec = {t: rng.choice([Decision.KEEP] + [Decision.SWAP] * g.tensors[t].swappable
                                     + [Decision.RECOMPUTE] * g.tensors[t].recomputable) for t in p.planning_ids}
                if fwd.over(dec) or memory_bound(p, dec).max() > p.budget_bytes:
                    pruned += 1
                    assert not simulate(p, Plan(dec), detail=False).fits
    assert pruned > 20


def test_milp_on_a_pipeline_stage():
    """The milp planner on a pipeline stage: its plan fits, is no faster than brute's best, and
    its status is OPTIMAL only where the pipeline bound closes the gap."""
    g = syn.chain(4, sizes=[2, 3, 2, 1])
    for stage in (0, 1):
        base = _stage(g, CostModel.unit(g), stage, 2)
        p = base.with_budget((base.min_feasible_bytes + base.keep_all_peak) // 2)
        best = planners.get("brute").plan(p).info.objective
        plan = planners.get("milp", warm_start=False).plan(p)
        assert plan.info.status in (Status.OPTIMAL, Status.FEASIBLE), plan.info.message
        r = simulate(p, plan, detail=False)
        assert r.fits and r.step_time_s >= best * (1 - 1e-12)
        lb = lower_bound(p)[0]
        assert plan.info.lower_bound == pytest.approx(min(lb, r.step_time_s))
        assert plan.info.gap == pytest.approx(max(0.0, (r.step_time_s - lb) / r.step_time_s))
        if plan.info.status is Status.OPTIMAL:
            assert plan.info.gap <= 1e-9


def test_milp_says_when_no_shared_plan_fits():
    """A budget the bound proves too small for every shared plan: INFEASIBLE, with the reason."""
    for seed in range(40):
        g = _graph(seed)
        p = _stage(g, _costs(g, 0.5), 0, 2)
        p = p.with_budget(p.min_feasible_bytes)
        if math.isinf(lower_bound(p)[0]):
            break
    else:
        pytest.skip("no case with an infinite bound")
    assert planners.get("brute").plan(p).info.status is Status.INFEASIBLE
    plan = planners.get("milp", warm_start=False).plan(p)
    assert plan.info.status is Status.INFEASIBLE
    assert "no shared plan fits" in plan.info.message


def test_milp_beyond_the_exact_size_bisects_the_one_micro_batch_budget():
    """Above ``max_exact_tensors`` the milp planner runs itself on the one-micro-batch problem at
    bisected budgets: whatever it returns is judged by the pipeline, and a status that claims a
    fitting plan has one."""
    p = _tiny(1)
    plan = planners.get("milp", max_exact_tensors=2).plan(p)
    r = simulate(p, plan, detail=False)
    assert plan.info.status in (Status.OPTIMAL, Status.FEASIBLE), plan.info.message
    assert r.fits and plan.info.objective == pytest.approx(r.step_time_s, rel=1e-12)
    assert "one-micro-batch solves" in plan.info.message
    assert r.step_time_s >= planners.get("brute").plan(p).info.objective * (1 - 1e-12)


def test_milp_writes_the_one_micro_batch_model_with_its_in_flight_rows(tmp_path):
    g = syn.chain(4, sizes=[2, 3, 2, 1])
    base = _stage(g, CostModel.unit(g), 0, 2)
    p = base.with_budget((base.min_feasible_bytes + base.keep_all_peak) // 2)
    out = tmp_path / "stage.lp"
    plan = planners.get("milp", write_lp=str(out)).plan(p)
    assert plan.info.status in (Status.OPTIMAL, Status.FEASIBLE)
    text = out.read_text()
    assert text.count("pipe_mem_") == len(keep_rows(p)) == 2 * len(g.ops)
