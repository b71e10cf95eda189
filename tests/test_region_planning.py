"""Planning for checkpointed regions (docs/regions.md, "Planning for checkpointed regions"): a
problem made with ``Problem.with_regions`` is judged, and planned, as selective activation
checkpointing of its regions runs a plan (docs/regions.md, "Checkpointed regions")."""

import math
import random

import pytest

from slackswap import Decision, Plan, Problem, planners, simulate
from slackswap.cli import main
from slackswap.core.costs import CostModel
from slackswap.core.errors import ParameterError, PlanError
from slackswap.experiments import synthetic
from slackswap.timeline.regions import layer_regions
from slackswap.timeline.simulate import memory_bound, time_tolerance

K, S, R = Decision.KEEP, Decision.SWAP, Decision.RECOMPUTE


def _chain8():
    """chain(8): a0 (1 byte, the step input) -> op0 -> a1 -> ... -> op7 -> a8, sizes a1..a8 =
    3, 1, 4, 1, 5, 9, 2, 6 bytes, unit costs; ops 0-3 region 0, ops 4-7 region 1."""
    g = synthetic.chain(8, sizes=[3, 1, 4, 1, 5, 9, 2, 6], input_bytes=1)
    return Problem.from_graph(g, CostModel.unit(g)), {o.id: o.id // 4 for o in g.ops}


def _chain6():
    g = synthetic.chain(6, sizes=[3, 1, 4, 1, 5, 9], input_bytes=1)
    return Problem.from_graph(g, CostModel.unit(g)), {o.id: o.id // 3 for o in g.ops}


def _tiny(budget=0.8, swap="save"):
    return Problem.build("tiny", "a100-80gb", budget=budget).with_regions("layers", swap)


def _check_reported(problem, plan):
    """The plan's status and objective are its region simulation; never hold points."""
    r = simulate(problem, plan, detail=False)
    assert not plan.hold_points
    assert (plan.info.status.value in ("FEASIBLE", "OPTIMAL")) == r.fits, plan.info.message
    if r.fits:
        assert plan.info.objective == pytest.approx(r.step_time_s, rel=1e-12)
    else:
        assert plan.info.status.value == "INFEASIBLE" and plan.info.objective is None
    return r


# tiny (2 layers) at 80% under per-layer regions: every planner that can lower the peak fits;
# keep-all and swap-all cannot (every SWAP is kept, swap="save"): they say so
FITS = ["slack", "capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers", "recompute-all"]


@pytest.mark.parametrize("name", FITS + ["keep-all"])
def test_each_planner_plans_for_regions_on_tiny(name):
    p = _tiny()
    plan = planners.get(name).plan(p)
    r = _check_reported(p, plan)
    assert r.fits == (name != "keep-all"), plan.info.message
    assert plan.info.lower_bound is None and plan.info.gap is None
    assert plan.info.message.startswith("2 checkpointed regions, swap=save")


def test_swap_all_is_judged_with_its_swaps_recomputed_too():
    """swap-all swaps every tensor: under regions with swap="save" that is keep-all, over the
    budget; its plan with the swaps recomputed (the model-based path judges both) fits."""
    p = _tiny()
    plan = planners.get("swap-all").plan(p)
    _check_reported(p, plan)
    assert plan.info.status.value == "FEASIBLE" and S not in plan.decisions.values()
    assert not simulate(p, planners.get("swap-all").plan(p.without_regions()), detail=False).fits


def test_a_planner_that_cannot_fit_says_so():
    p = _tiny(budget=0.5)                    # per-layer regions need 54.7% of tiny's keep-all peak
    for name in ("dp-checkpoint", "slack", "capuchin"):
        plan = planners.get(name).plan(p)
        _check_reported(p, plan)
        assert plan.info.status.value == "INFEASIBLE"
    assert "no plan fits the budget" in planners.get("dp-checkpoint").plan(p).info.message


def test_the_default_plan_does_not_fit_under_regions_the_region_plan_does():
    """chain(8) at 30 bytes (``_chain8``). Under the default rules dp-checkpoint and slack
    recompute a5 (5 bytes, made by op4) just before op5's backward, where it is needed: peak 30,
    17 s. Checkpointed, region 1 (ops 4-7) is replayed at its first backward use, op7's backward,
    so a5 is rebuilt there and held through op6's backward (step 10), where the kept a1-a4, a6,
    a7 (20 bytes), a0 and the gradients already hold 30 bytes: 35 > 30. The region-aware plan
    recomputes a1 and a3 instead, in region 0, replayed after region 1's tensors are gone, and
    keeps a5: peak 28, 18 s (one re-run more), the optimum over every assignment (brute: 18 s,
    recomputing a2 and a3, a tie it breaks by its own order)."""
    base, regions = _chain8()
    base = base.with_budget(30)
    p = base.with_regions(regions)
    names = {t.name: t.id for t in base.graph.tensors}
    for name in ("dp-checkpoint", "slack"):
        default = planners.get(name).plan(base)
        assert default.decisions[names["a5"]] is R
        assert [t for t, d in default.decisions.items() if d is R] == [names["a5"]]
        r = simulate(base, default, detail=False)
        assert r.fits and (r.peak_bytes, r.step_time_s) == (30, 17.0)
        r = simulate(p, default, detail=False)
        assert not r.feasible and r.peak_bytes == 35 and r.reason.startswith("step 10 (bwd op6)")
        plan = planners.get(name).plan(p)
        r = _check_reported(p, plan)
        assert r.fits and (r.peak_bytes, r.step_time_s) == (28, 18.0)
        assert plan.decisions[names["a5"]] is K
        assert sorted(t for t, d in plan.decisions.items() if d is R) == [names["a1"], names["a3"]]
    best = planners.get("brute").plan(p)
    assert best.info.status.value == "OPTIMAL" and best.info.objective == 18.0


@pytest.mark.parametrize("budget", [19, 21, 23])
def test_exact_planners_under_regions_on_a_small_chain(budget):
    """brute judges every assignment by the region simulation: its OPTIMAL is the optimum under
    the regions, and no other planner beats it; the MILP (model of the default rules, planned at
    lowered budgets) reaches it here, with no bound reported."""
    base, regions = _chain6()
    p = base.with_budget(budget).with_regions(regions)
    best = planners.get("brute").plan(p)
    assert best.info.status.value == "OPTIMAL"
    assert simulate(p, best, detail=False).step_time_s == best.info.objective
    tol = time_tolerance(p.costs)
    for name in ("milp", "slack", "dp-checkpoint", "capuchin", "swap-all"):
        plan = planners.get(name).plan(p)
        r = _check_reported(p, plan)
        assert r.fits and r.step_time_s >= best.info.objective - tol, name
    milp = planners.get("milp").plan(p)
    assert milp.info.objective == best.info.objective
    assert milp.info.lower_bound is None and milp.info.gap is None


@pytest.mark.parametrize("swap", ["save", "recompute"])
@pytest.mark.parametrize("budget", [0.6, 0.7, 0.8, 0.9])
def test_slack_for_regions_is_never_worse_than_its_default_plan_run_there(budget, swap):
    p = _tiny(budget, swap)
    default = simulate(p, planners.get("slack").plan(p.without_regions()), detail=False)
    plan = planners.get("slack").plan(p)
    r = _check_reported(p, plan)
    assert r.fits
    if default.fits:
        assert r.step_time_s <= default.step_time_s + time_tolerance(p.costs)


def test_memory_bound_under_regions_is_the_region_simulation_exactly():
    """What slack and capuchin prune by stays valid under regions: the region schedule's memory
    is the simulator's accounted memory (no copies), so its maximum is the simulated peak."""
    base = Problem.build("tiny", "a100-80gb", budget=None)
    rng = random.Random(0)
    for swap in ("save", "recompute"):
        p = base.with_regions("layers", swap)
        for _ in range(10):
            d = {t: rng.choice((K, S, R)) for t in p.planning_ids}
            assert memory_bound(p, d).max() == simulate(p, Plan(d), detail=False).peak_bytes


def test_a_region_problem_simulates_as_simulate_with_regions():
    p = _tiny(0.7, "recompute")
    plan = planners.get("slack").plan(p.without_regions())
    a = simulate(p, plan, detail=False)
    b = simulate(p.without_regions(), plan, detail=False, regions=layer_regions(p.graph), swap="recompute")
    assert (a.feasible, a.peak_bytes, a.step_time_s, a.counts) == (b.feasible, b.peak_bytes, b.step_time_s, b.counts)
    c = simulate(p, plan, detail=False, swap="save")            # the call's swap wins
    d = simulate(p.without_regions(), plan, detail=False, regions=layer_regions(p.graph))
    assert (c.peak_bytes, c.counts) == (d.peak_bytes, d.counts)
    assert "regions: 2 checkpointed regions, swap=recompute" in str(p)
    assert p.summary()["regions"] == "2 checkpointed regions, swap=recompute"
    assert p.with_budget(0.9).regions == p.regions                 # kept by with_budget
    with pytest.raises(PlanError, match="not with regions"):
        simulate(p, Plan(plan.decisions, hold_points={next(iter(plan.decisions)): 0}))


def test_with_regions_takes_a_dict_and_none():
    base, regions = _chain8()
    p = base.with_regions(regions)
    assert p.regions == regions and p.regions is not regions and p.region_swap == "save"
    assert p.with_regions(None).regions is None and p.without_regions().regions is None
    assert base.without_regions() is base
    assert "regions" not in base.summary()


def test_bad_regions_and_swap_are_one_line():
    from dataclasses import replace

    base, _ = _chain8()
    n = len(base.graph.ops)
    flat = replace(base.graph, ops=tuple(replace(o, layer=None) for o in base.graph.ops))
    cases = [
        (lambda: base.with_regions("blocks"),
         "regions: must be 'layers', a dict of op id -> region label or None; got 'blocks'"),
        (lambda: base.with_regions([1, 2]),
         "regions: must be 'layers', a dict of op id -> region label or None; got list"),
        (lambda: base.with_regions({n: 0}), f"regions: keys must be op ids, integers in 0..{n - 1}; got {n}"),
        (lambda: base.with_regions({0: math.nan}), "regions[0]: a region label must be an int or a str; got nan"),
        (lambda: base.with_regions("layers", "offload"), "swap: must be one of save, recompute; got 'offload'"),
        (lambda: base.with_regions("layers", math.nan), "swap: must be one of save, recompute; got nan"),
        (lambda: base.with_regions(None, "later"), "swap: must be one of save, recompute; got 'later'"),
        (lambda: Problem.from_graph(flat, CostModel.unit(flat)).with_regions("layers"),
         "regions: 'layers': graph 'chain' has no op with a layer (Op.layer); give a dict of op id -> "
         "region label"),
        (lambda: simulate(base, Plan({}), swap="offload"), "swap: must be one of save, recompute; got 'offload'"),
        (lambda: Problem(base.graph, base.costs, keep_all_peak=base.keep_all_peak,
                         min_feasible_bytes=base.min_feasible_bytes, region_swap="recompute"),
         "region_swap: only with regions (a SWAP inside a checkpointed region); got 'recompute' without regions"),
    ]
    for make, text in cases:
        with pytest.raises(ParameterError) as e:
            make()
        assert str(e.value) == text and "\n" not in str(e.value)


def test_cli_plan_and_simulate_with_regions(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--model", "tiny", "--budget", "0.8", "--regions", "layers", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "regions: 2 checkpointed regions, swap=save" in text and "status FEASIBLE" in text
    saved = Plan.load(out)
    p = _tiny()
    assert saved.info.objective == simulate(p, saved, detail=False).step_time_s
    assert main(["simulate", "--plan", str(out), "--model", "tiny", "--budget", "0.8", "--regions", "layers",
                 "--region-swap", "recompute"]) == 0
    assert "swap=recompute" in capsys.readouterr().out


def test_cli_compare_with_regions(capsys):
    assert main(["compare", "--model", "tiny", "--budget", "0.8", "--regions", "layers",
                 "--planners", "dp-checkpoint,keep-all"]) == 0
    out = capsys.readouterr().out
    assert "budget 0.8 (0.00 GiB), 2 checkpointed regions, swap=save" in out
    p = _tiny()
    r = simulate(p, planners.get("dp-checkpoint").plan(p), detail=False)
    row = next(line for line in out.splitlines() if "dp-checkpoint" in line)
    assert "FEASIBLE" in row and f"{r.throughput_ratio:.4f}" in row and f" {r.counts['keep']} " in row
    assert "INFEASIBLE" in next(line for line in out.splitlines() if "keep-all" in line)


@pytest.mark.parametrize("argv, text", [
    (["--regions", "blocks"], "argument --regions: invalid choice: 'blocks' (choose from 'layers')"),
    (["--regions", "layers", "--region-swap", "offload"],
     "argument --region-swap: invalid choice: 'offload' (choose from 'save', 'recompute')"),
    (["--region-swap", "save"], "--region-swap: only with --regions layers; got --region-swap save without --regions"),
])
def test_cli_bad_regions_are_one_line(argv, text, capsys):
    assert main(["plan", "--model", "tiny", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"slackswap: error: {text}\n"


@pytest.mark.parametrize("swap", ["save", "recompute"])
def test_a_region_run_is_no_faster_than_the_schedule_of_its_decisions_as_they_run(swap):
    """docs/regions.md, "What is proven": a region run re-runs every op that producer-chain
    recompute of its decisions as they run (``region_decisions``, non-planning tensors included)
    re-runs, so it is no faster than that schedule (proven there; checked here on random DAGs,
    random regions and random plans)."""
    from dataclasses import replace

    from slackswap.timeline.regions import region_decisions
    from slackswap.timeline.schedule import compile_schedule

    rng = random.Random(7)
    checked = 0
    for seed in range(12):
        g = synthetic.mixed_dag(seed, n_ops=rng.randint(5, 8))
        g = replace(g, ops=tuple(replace(o, workspace_bytes=rng.choice([0, 0, 3, 8])) for o in g.ops))
        base = Problem.from_graph(g, CostModel.unit(g))
        cut = rng.randint(1, len(g.ops) - 1)
        regions = {o.id: int(o.id >= cut) for o in g.ops if rng.random() < 0.9}
        p = base.with_regions(regions, swap)
        for _ in range(10):
            d = {t: rng.choice([K] + [S] * g.tensors[t].swappable + [R] * g.tensors[t].recomputable)
                 for t in base.planning_ids}
            eff, _ = region_decisions(g, d, regions, swap)
            a = simulate(p, Plan(d), detail=False)
            if any(eff[t] is R and not g.tensors[t].recomputable for t in d):
                continue     # a SWAP run as RECOMPUTE: no plan of the default rules to compare with
            b = simulate(base, Plan({t: eff[t] for t in d}), detail=False, schedule=compile_schedule(g, eff))
            assert b.step_time_s <= a.step_time_s + time_tolerance(base.costs)
            checked += 1
    assert checked >= 100


def test_a_region_input_no_backward_op_reads_is_held_while_its_region_needs_it():
    """``mixed_dag(449)``, regions ops 1-3 and 4, keep-all. t1 (op0, outside every region) is
    region 0's input and t5 (op3, region 0) region 1's; no backward op reads either. t1 is held
    by the checkpoint until region 0's last backward step that unpacks something (op1's, step
    10), t5 at least until op4 reads it in the forward pass (region 1 unpacks nothing). Before,
    both were counted only at their producer's step."""
    from slackswap.timeline.regions import region_schedule

    g = synthetic.mixed_dag(449, n_ops=6)
    _, sched = region_schedule(g, {t.id: K for t in g.planning_tensors()}, {1: 0, 2: 0, 3: 0, 4: 1})
    assert not g.saved_by[1] and not g.saved_by[5] and g.consumers[1] == (1,) and g.consumers[5] == (4,)
    assert (sched.kinds[10], sched.ops[10]) == ("bwd", 1)
    assert sched.tensor_spans[1] == [(0, 10)] and sched.tensor_spans[5] == [(3, 4)]


def test_the_milp_bound_does_not_hold_for_region_plans():
    """Why no bound of the default rules is reported for region plans (docs/regions.md,
    "What is proven"). A random DAG of six ops (``mixed_dag(509)``, workspaces set), regions
    ops 0-1 and 2-3, 23 bytes. t2, made by op1 and read by op2, is saved by no op: no plan of the
    default rules can keep it, so rebuilding t3 (op2) re-runs op1 and op0 too. Checkpointed,
    t2 is region 1's input, which the checkpoint holds for the replay: region 1 re-runs op2
    alone. Under the regions the best plan takes 14 s; the MILP proves 18 s the optimum of the
    default rules without hold points and 16 s with any hold points."""
    from dataclasses import replace

    g = synthetic.mixed_dag(509, n_ops=6)
    g = replace(g, ops=tuple(replace(o, workspace_bytes=w) for o, w in zip(g.ops, [3, 0, 8, 3, 3, 0],
                                                                             strict=True)))
    base = Problem.from_graph(g, CostModel.unit(g)).with_budget(23)
    p = base.with_regions({0: 0, 1: 0, 2: 1, 3: 1})
    assert g.ops[1].outputs == (2,) and g.ops[2].inputs == (2,) and not g.saved_by[2]
    assert 2 not in base.planning_ids
    best = planners.get("brute").plan(p)
    assert best.info.status.value == "OPTIMAL" and best.info.objective == 14.0
    for hold, optimum in ((False, 18.0), (True, 16.0)):
        m = planners.get("milp", hold_points=hold).plan(base)
        assert m.info.status.value == "OPTIMAL"
        assert m.info.lower_bound == pytest.approx(optimum, rel=1e-9) and m.info.lower_bound > 14.0
    assert planners.get("milp").plan(p).info.lower_bound is None


@pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread
@pytest.mark.parametrize("name", ["bert", "llama", "gpt2"])
def test_a_region_plan_runs_as_its_region_schedule_on_hf_models(name):
    """A plan made for per-layer regions of a small traced HF model, run with per-layer
    checkpointing and ``slackswap.torch.policy``: the plain step's gradients bitwise, and the calls
    PyTorch re-runs in the backward pass are the region schedule's re-runs (counted per aten op,
    for the ops that make a tensor and never run in a plain backward pass)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import copy

    from exec_models import build
    from torch.utils._python_dispatch import TorchDispatchMode

    from slackswap.timeline.regions import region_schedule
    from slackswap.torch import policy, trace

    class Backward(TorchDispatchMode):
        """Counts the aten calls dispatched while a backward pass runs (replays included)."""

        def __init__(self):
            super().__init__()
            self.calls = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if torch._C._current_graph_task_id() != -1:
                self.calls[str(func)] = self.calls.get(str(func), 0) + 1
            return func(*args, **(kwargs or {}))

    model, inputs = build(name)
    if name != "bert":   # checkpointing turns the KV cache off: trace the step as it will run
        inputs = dict(inputs, use_cache=False)
    g = trace(model, inputs, device="cpu")
    ref, plain = copy.deepcopy(model), Backward()
    with plain:
        ref(**inputs).loss.backward()
    p = Problem.build(g, "a100-80gb", budget=0.8).with_regions("layers")
    plan = planners.get("slack").plan(p)
    r = _check_reported(p, plan)
    assert r.fits and r.recompute_s > 0
    info = g.spec
    counted = {n for n in info.aten_ops if n not in plain.calls
               and all(info.call_tensors[k] for k, m in enumerate(info.aten_ops) if m == n)}
    _, sched = region_schedule(g, plan.decisions, p.regions)
    reruns = {o: sched.recomputed.count(o) for o in set(sched.recomputed)}   # each op's re-runs
    want: dict[str, int] = {}
    for n, o in zip(info.aten_ops, info.call_ops, strict=True):
        if n in counted and o in reruns:
            want[n] = want.get(n, 0) + reruns[o]
    assert want
    pol = policy(plan, g)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False,
                                                                           "context_fn": pol})
    model.train()
    run = Backward()
    with run:
        model(**inputs).loss.backward()
    assert {n: c for n, c in run.calls.items() if n in counted} == want
    for (label, a), b in zip(model.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad), label


def test_no_hold_points_under_regions():
    """chain(10), unit costs, 4 bytes: no single-level plan fits, so under the default rules
    dp-checkpoint and slack (recompute only) return a multi-level plan (hold points). A
    checkpointed region is replayed once: under regions neither returns hold points (the
    model-based path judges its plans without them, slack skips its multi-level fallback)."""
    g = synthetic.chain(10)
    base = Problem.from_graph(g, CostModel.unit(g)).with_budget(4)
    p = base.with_regions({o.id: o.id // 5 for o in g.ops})
    for planner in (planners.get("dp-checkpoint"), planners.get("slack", mode="recompute_only")):
        assert planner.plan(base).hold_points
        _check_reported(p, planner.plan(p))


def test_a_function_planner_plans_for_regions_too():
    from slackswap.planners.base import FunctionPlanner

    p = _tiny(0.7)
    keep_all = FunctionPlanner("mine", lambda pr: {t: K for t in pr.planning_ids})
    plan = keep_all.plan(p)                     # keep-all does not fit: it says so
    _check_reported(p, plan)
    assert plan.info.status.value == "INFEASIBLE" and "no plan fits the budget" in plan.info.message
    rec = FunctionPlanner("mine", lambda pr: planners.get("chen-greedy").plan(pr).decisions)
    assert _check_reported(p, rec.plan(p)).fits


def test_bounds_under_regions_are_the_ideal_step_only():
    """docs/regions.md, "What is proven": no bound beyond the ideal step is proven there."""
    from slackswap import bounds

    p = _tiny(0.7)
    assert bounds.lower_bound(p)[0] == p.ideal_step_s
    assert bounds.lower_bound(p.without_regions())[0] > p.ideal_step_s     # the capacity bound
    for f in (bounds.capacity_bound, bounds.aggregate_bound):
        with pytest.raises(ParameterError) as e:
            f(p)
        assert str(e.value) == (f"{f.__name__}(problem): not proven for a problem with checkpointed regions "
                                "(lower_bound gives the ideal step for it); problem.without_regions() is the "
                                "problem under the default rules")


@pytest.mark.parametrize("name", ["slack", "dp-checkpoint"])
def test_a_pipeline_stage_is_planned_for_its_regions(name):
    """Stage 0 of 2, four micro-batches, per-layer regions at 0.7: the plan is judged by the
    pipeline's timeline of the region schedule (every micro-batch replays its own regions) and
    fits; under the default rules the same plan is a different run."""
    p = Problem.build("tiny", "a100-80gb", budget=0.7,
                      parallel={"pp": 2, "microbatches": 4}).with_regions("layers")
    plan = planners.get(name).plan(p)
    r = _check_reported(p, plan)
    assert r.fits and r.microbatches == 4 and r.bubble_s > 0 and r.recompute_s > 0
    assert r.counts["swap"] == 0
    assert simulate(p.without_regions(), plan).summary() != r.summary()
    # the pipeline LP argues about the default rules: under regions the bound is the stage's ideal
    from slackswap import bounds

    lb, how = bounds.lower_bound(p)
    assert lb == p.ideal_step_s <= r.step_time_s and "under checkpointed regions" in how
    assert bounds.lower_bound(p.without_regions())[0] > lb
    from slackswap.bounds.pipeline import pipeline_bound

    with pytest.raises(ParameterError, match=r"^pipeline_bound\(problem\): not proven for a problem with "
                                             "checkpointed regions"):
        pipeline_bound(p)


def test_cli_plan_a_pipeline_stage_with_regions(capsys):
    assert main(["plan", "--model", "tiny", "--budget", "0.7", "--parallel", "pp=2,microbatches=4",
                 "--regions", "layers"]) == 0
    out = capsys.readouterr().out
    assert "regions: 1 checkpointed region, swap=save" in out     # stage 0 holds one of two layers
    assert "pipeline (1F1B): 4 micro-batches" in out and "(fits)" in out


def test_sweep_over_regions_plans_each_run_for_them():
    """``sweep(..., regions=["none", "layers"])``: an axis of the grid. Each ``layers`` row is the
    planner's plan of ``Problem.with_regions("layers", region_swap)``, judged there, its bound the
    ideal step; the ``none`` rows are the runs without regions."""
    from slackswap import experiments

    for swap in ("save", "recompute"):
        df = experiments.sweep(["tiny"], ["a100-80gb"], [0.7], ["slack", "dp-checkpoint"], workers=1,
                               progress=False, regions=["none", "layers"], region_swap=swap)
        assert df["regions"].tolist() == ["", "", "layers", "layers"]
        assert df["region_swap"].tolist() == ["", "", swap, swap]
        for row in df.itertuples():
            p = Problem.build("tiny", "a100-80gb", budget=0.7)
            if row.regions:
                p = p.with_regions("layers", swap)
                assert "under checkpointed regions" in row.bound_how
            r = simulate(p, planners.get(row.planner).plan(p), detail=False)
            assert (row.status, row.step_time_s, row.peak_bytes) == ("FEASIBLE", r.step_time_s, r.peak_bytes)


@pytest.mark.parametrize("kw,text", [
    ({"regions": "blocks"}, "sweep: regions: must be 'none' or 'layers' (docs/regions.md); got 'blocks'"),
    ({"regions": ["none", None]}, "sweep: regions[1]: expected each value once (the same as regions[0]); got None"),
    ({"regions": math.nan}, "sweep: regions: must be 'none' or 'layers' (docs/regions.md); got nan"),
    ({"regions": "layers", "region_swap": "offload"}, "sweep: region_swap: must be one of save, recompute; got 'offload'"),
    ({"region_swap": "recompute"}, "sweep: region_swap: only with regions"),
])
def test_bad_regions_axis_is_one_line(kw, text):
    from slackswap import experiments
    from slackswap.core.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        experiments.sweep(["tiny"], ["a100-80gb"], [0.7], ["slack"], workers=1, progress=False, **kw)
    assert str(e.value).startswith(text)


def test_sweep_file_with_regions(tmp_path, capsys):
    from slackswap.core.errors import ConfigError
    from slackswap.experiments.sweepfiles import sweep_from_dict

    doc = {"models": ["tiny"], "budgets": [0.7], "planners": ["slack"]}
    cfg = sweep_from_dict({**doc, "regions": ["none", "layers"], "region_swap": "recompute"})
    assert (cfg["regions"], cfg["region_swap"]) == (["none", "layers"], "recompute")
    for extra, text in (({"regions": 5}, "sweep: regions: expected a string or a list; got 5"),
                        ({"regions": ["layers", "layers"]}, "sweep: regions[1]: expected each value once"),
                        ({"regions": "layers", "region_swap": 1}, "sweep: region_swap: expected a string; got 1")):
        with pytest.raises(ConfigError) as e:
            sweep_from_dict({**doc, **extra})
        assert str(e.value).startswith(text)
    f = tmp_path / "regions.toml"
    f.write_text('models = ["tiny"]\nbudgets = [0.7]\nplanners = ["slack"]\nregions = ["none", "layers"]\n'
                 'workers = 1\n')
    out = tmp_path / "out.csv"
    assert main(["sweep", str(f), "--out", str(out)]) == 0
    import pandas as pd

    rows = pd.read_csv(out, keep_default_na=False)
    assert rows["regions"].tolist() == ["", "layers"] and rows["region_swap"].tolist() == ["", "save"]
    f.write_text('models = ["tiny"]\nbudgets = [0.7]\nplanners = ["slack"]\nregions = "blocks"\n')
    assert main(["sweep", str(f)]) == 2
    assert "regions.toml: regions: must be 'none' or 'layers'" in capsys.readouterr().err


def test_a_time_limit_holds_for_the_whole_call_under_regions(monkeypatch):
    """A planner with ``time_limit_s`` planned for regions by bisection (``plan_for_regions``):
    each plan gets what is left of the limit, and the search stops, keeping its best, when less
    than ``MIN_LEFT_S`` is left. A clock that advances 10 s per plan, a 35 s limit: four plans
    (35, 25, 15 and 5 s left), never a fifth; without a limit the bisection runs on."""
    from slackswap.core.schema import Schema
    from slackswap.planners import _regions
    from slackswap.planners.base import Parameterised, register, unregister

    now = [0.0]
    given = []

    class SlowParams(Schema):
        time_limit_s: float | None = None

    class Slow(Parameterised):
        name = "slow-keep-all"
        Params = SlowParams

        def plan(self, problem):
            given.append(self.time_limit_s)
            now[0] += 10.0
            return Plan({t: K for t in problem.planning_ids}, planner=self.name)

    monkeypatch.setattr(_regions, "_clock", lambda: now[0])
    register("slow-keep-all")(Slow)
    try:
        p = _tiny(0.7)
        plan = Slow(time_limit_s=35).plan(p)
        assert given == [35, 25, 15, 5]
        assert plan.info.status.value == "INFEASIBLE"          # keep-all never fits
        assert "4 plans under the default rules" in plan.info.message
        assert "stopped by the time limit (35 s)" in plan.info.message
        given.clear()
        Slow().plan(p)
        assert len(given) > 4 and set(given) == {None}
    finally:
        unregister("slow-keep-all")
