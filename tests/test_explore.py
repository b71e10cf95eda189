"""The interactive explorer's callback (slackswap/report/explore.py), without a browser: each change
re-plans and redraws the same figure, the plan and result are those of a direct
``planners.get(...).plan`` + ``simulate`` call, problems are built once per (model, hardware),
and bad values get the usual one-line errors. Timings are in benchmarks/bench_explore.py."""

import sys

import numpy as np
import pytest
from figure_checks import assert_legend_clear, drawn

from slackswap import planners, report, simulate
from slackswap.core.errors import BudgetError, ParameterError
from slackswap.report.explore import BUDGET_RANGE, Explorer, default_planners
from slackswap.timeline.problem import Problem


@pytest.fixture(scope="module")
def ex():
    return Explorer("tiny", "a100-80gb", budget=0.5, planner="swap-all")


def _state(ex):
    """What the figure shows, as plain data: bars per kind, the curve, the budget line, the title."""
    d = ex._drawing
    bars = {k: [np.asarray(p.vertices).round(12).tolist() for p in c.get_paths()] for k, c in d.bars.items()}
    return {"bars": bars, "curve": np.asarray(d.curve.get_ydata()).tolist(),
            "budget": list(d.budget.get_ydata()), "title": d.title.get_text()}


def _same_as_direct(ex):
    problem = Problem.build(ex.model, ex.hardware, budget=ex.budget)
    plan = planners.get(ex.planner).plan(problem)
    result = simulate(problem, plan, detail=True)
    assert ex.problem.budget_bytes == problem.budget_bytes
    assert ex.plan.decisions == plan.decisions and ex.plan.hold_points == plan.hold_points
    assert ex.result.step_time_s == result.step_time_s and ex.result.peak_bytes == result.peak_bytes
    assert len(ex.result.events) == len(result.events)


def _matches_result(ex):
    """The figure draws the explorer's result: one bar per event, the curve's peak, the budget."""
    d, r = ex._drawing, ex.result
    for kind, coll in d.bars.items():
        assert len(coll.get_paths()) == sum(e.kind == kind for e in r.events), kind
    _, bs = report._byte_unit(max(ex.problem.keep_all_peak, r.peak_bytes))
    assert max(d.curve.get_ydata()) * bs == pytest.approx(r.peak_bytes)
    assert d.budget.get_ydata()[0] * bs == pytest.approx(ex.problem.budget_bytes)
    assert d.curve.get_color() == report.planner_style(ex.planner)[0]


def test_budget_change_re_plans_and_redraws_the_same_figure_without_building(ex):
    fig, axes = ex.figure, ex.figure.get_axes()
    bars = dict(ex._drawing.bars)
    assert ex.builds == 1
    _same_as_direct(ex)
    _matches_result(ex)
    before = _state(ex)
    ex.update(budget=0.8)
    after = _state(ex)
    assert ex.builds == 1  # the budget change reused the problem
    assert ex.figure is fig and ex.figure.get_axes() == axes and ex._drawing.bars == bars  # redrawn in place
    assert len(fig.get_axes()) == 2 and len(fig.legends) == 1
    assert after["budget"] != before["budget"] and after["title"] != before["title"]
    assert after["bars"] != before["bars"] and after["curve"] != before["curve"]  # swap-all copies at a new budget
    assert "budget 0.80" in after["title"]
    _same_as_direct(ex)
    _matches_result(ex)


def test_planner_and_model_changes_build_once_per_pair_and_plans_are_kept(ex):
    ex.update(model="tiny", budget=0.8, planner="swap-all")
    builds, plans = ex.builds, ex.plans
    ex.update(planner="dp-checkpoint")
    assert (ex.builds, ex.plans) == (builds, plans + 1)
    _same_as_direct(ex)
    _matches_result(ex)
    ex.update(planner="swap-all")  # seen before: redrawn from the kept plan
    assert (ex.builds, ex.plans) == (builds, plans + 1)
    _same_as_direct(ex)
    ex.update(model="bert-large", budget=0.6)
    assert ex.builds == builds + 1 and ex.problem.graph.name.startswith("bert")
    _same_as_direct(ex)
    _matches_result(ex)
    ex.update(model="tiny", hardware="h100-sxm")
    ex.update(hardware="a100-80gb", budget=0.7)
    assert ex.builds == builds + 2  # (tiny, a100-80gb) was built before
    _same_as_direct(ex)


def test_the_figure_stays_readable_for_each_state(ex):
    """Laid out once: for GiB and KiB scales, a plan, an INFEASIBLE run and a budget below the
    floor, the panels with their tick labels and axis labels and the title stay inside the figure
    and the legend covers no panel."""
    for kw in (dict(model="bert-large", budget=0.6, planner="swap-all"), dict(model="tiny", budget=1.0),
               dict(planner="keep-all", budget=0.5), dict(budget=0.2)):
        ex.update(**kw)
        assert_legend_clear(ex.figure)
        r = drawn(ex.figure)
        fig = ex.figure.bbox
        for box in [ax.get_tightbbox(r) for ax in ex.figure.get_axes()] + [ex._drawing.title.get_window_extent(r)]:
            assert fig.x0 <= box.x0 and box.x1 <= fig.x1 and fig.y0 <= box.y0 and box.y1 <= fig.y1, kw
    assert ex.png().startswith(b"\x89PNG")


def test_infeasible_and_below_the_floor_show_why(ex):
    ex.update(model="tiny", budget=0.5, planner="keep-all")
    assert not ex.result.feasible
    assert ex._drawing.title.get_text().splitlines()[1] == f"INFEASIBLE: {ex.result.reason}"
    assert all(len(c.get_paths()) == 0 for c in ex._drawing.bars.values())
    ex.update(budget=0.2)  # tiny's smallest feasible budget is 0.306 of its keep-all peak
    assert ex.problem is ex.plan is ex.result is None
    assert "below the smallest feasible budget of tiny, 0.306 of the keep-all peak" in ex.message
    assert ex._drawing.title.get_text().splitlines()[1] == ex.message
    assert all(len(c.get_paths()) == 0 for c in ex._drawing.bars.values())
    assert len(ex._drawing.curve.get_xdata()) == 0


@pytest.mark.parametrize("kw, exc, text", [
    (dict(budget=float("nan")), BudgetError,
     "Explorer.update(budget): must be a fraction of the keep-all activation peak in [0.1, 1]; got nan"),
    (dict(budget=1.5), BudgetError, "[0.1, 1]; got 1.5"),
    (dict(budget=0.05), BudgetError, "[0.1, 1]; got 0.05"),
    (dict(budget=float("inf")), BudgetError, "got inf"),
    (dict(budget="0.5"), BudgetError, "got '0.5'"),
    (dict(budget=True), BudgetError, "got True"),
    (dict(model="gpt3"), ParameterError, "Explorer.update(model): must be one of 'bert-large', "),
    (dict(hardware="tpu"), ParameterError, "Explorer.update(hardware): must be one of 'a100-40gb', "),
    (dict(planner="milp"), ParameterError, "Explorer.update(planner): must be one of 'capuchin', "),
    (dict(planner=3), ParameterError, "or 'swap-all'; got 3"),
])
def test_bad_values_are_refused_before_any_work(ex, kw, exc, text):
    ex.update(model="tiny", hardware="a100-80gb", budget=0.5, planner="swap-all")
    before, builds, plans = _state(ex), ex.builds, ex.plans
    with pytest.raises(exc) as info:
        ex.update(**kw)
    assert text in str(info.value) and "\n" not in str(info.value)
    assert (ex.model, ex.hardware, ex.budget, ex.planner) == ("tiny", "a100-80gb", 0.5, "swap-all")
    assert (_state(ex), ex.builds, ex.plans) == (before, builds, plans)


@pytest.mark.parametrize("kw, exc, text", [
    (dict(budget=float("nan")), BudgetError,
     "Explorer(budget): must be a fraction of the keep-all activation peak in [0.1, 1]; got nan"),
    (dict(budget=-0.5), BudgetError, "Explorer(budget): must be a fraction"),
    (dict(model="gpt3"), ParameterError, "Explorer(model): must be one of 'bert-large', "),
    (dict(hardware=5), ParameterError, "Explorer(hardware): must be one of 'a100-40gb', "),
    (dict(planner="milp"), ParameterError, "Explorer(planner): must be one of 'capuchin', "),
])
def test_the_constructor_names_its_own_fields(kw, exc, text):
    """A bad value given to the constructor is named as the constructor's argument, not as
    ``update``'s."""
    with pytest.raises(exc) as info:
        Explorer(**{"model": "tiny", "planner": "swap-all", **kw})
    assert str(info.value).startswith(text) and "\n" not in str(info.value)


def test_planner_choices():
    assert "slack" in default_planners() and not {"milp", "brute"} & set(default_planners())
    with pytest.raises(ParameterError, match=r"^Explorer\(planners\): must be one of .*; got 'nope'$"):
        Explorer("tiny", planners=["swap-all", "nope"])
    with pytest.raises(ParameterError, match=r"^Explorer\(planners\): expected a list of planner names; got 'slack'"):
        Explorer("tiny", planners="slack")
    assert Explorer("tiny", planner="swap-all", planners=["swap-all", "keep-all"]).planners == ("swap-all", "keep-all")


def test_controls_drive_the_callback(ex):
    widgets = pytest.importorskip("ipywidgets")
    ex.update(model="tiny", hardware="a100-80gb", budget=0.5, planner="swap-all")
    controls = ex.controls()
    assert {k: w.value for k, w in controls.items()} == dict(model="tiny", hardware="a100-80gb", budget=0.5,
                                                             planner="swap-all")
    assert (controls["budget"].min, controls["budget"].max) == BUDGET_RANGE
    assert tuple(controls["planner"].options) == ex.planners
    widgets.interactive_output(ex.show, controls)
    builds = ex.builds
    controls["budget"].value = 0.8
    assert ex.budget == 0.8 and ex.result.fits and ex.builds == builds
    controls["planner"].value = "chen-sqrt"
    assert ex.planner == "chen-sqrt"
    _same_as_direct(ex)


def test_controls_without_ipywidgets_say_how_to_install(ex, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match=r"pip install 'slackswap\[notebooks\]'"):
        ex.controls()
    ex.update(budget=0.9)  # the callback itself needs no ipywidgets
    assert ex.budget == 0.9
