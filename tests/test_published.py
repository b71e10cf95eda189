"""The published SlackSwap table (data/reference/slackswap_paper.csv), asserted within its stated
tolerance with the default ``slack`` planner. Rows our simulator does not reach are strict xfails
with the measured number and the reason (see docs/planners.md, section "slack")."""

import csv
from pathlib import Path

import pytest

from slackswap import planners
from slackswap.core.plan import Status
from slackswap.planners.slack import SlackPlanner
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem

CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / "slackswap_paper.csv"
ROWS = list(csv.DictReader(CSV.open()))

# Measured with `python benchmarks/bench_slack.py` (default SlackPlanner). A bound on the
# recompute every plan needs: bytes to evict (keep-all peak - budget) minus what the D2H engine
# can copy during the whole forward pass (25 GB/s x forward time), filled with the cheapest
# rebuild per byte (gelu / norm outputs, ~1.3 us/MiB): bert-large >= 16.3 ms of 197 ms
# (ratio <= ~0.924), gpt2-xl >= 17.6 ms of 453 ms (<= ~0.963), llama-7b >= 7.5 ms of 1675 ms
# (<= ~0.9955). All three published numbers are above what our simulator allows.
SHORT = {  # measured with the current planner; the ceiling is tested below (certified bound)
    "bert-large": "measured 0.9182 vs published 0.963; our model's certified ceiling is 0.9225",
    "gpt2-xl": "measured 0.9588 vs published 0.976; our model's certified ceiling is 0.9623",
    "llama-7b": "measured 0.9953 vs published 0.996; our model's certified ceiling is 0.9955",
}
#: measured floors of test_measured_ratio_does_not_regress (raise only from new measurements)
FLOORS = [("bert-large", 0.918), ("gpt2-xl", 0.9585), ("llama-7b", 0.995)]


_PROBLEMS: dict = {}
_SLACK: dict = {}


def _problem(model, budget):
    """One built problem per model (budget 0.5), re-budgeted: building dominates otherwise."""
    if model not in _PROBLEMS:
        _PROBLEMS[model] = Problem.build(model, "a100-80gb", budget=0.5)
    return _PROBLEMS[model].with_budget(budget)


def _slack(model, budget):
    """(problem, SimResult of the default slack plan), computed once per (model, budget)."""
    if (model, budget) not in _SLACK:
        p = _problem(model, budget)
        _SLACK[model, budget] = p, simulate(p, SlackPlanner().plan(p), detail=False)
    return _SLACK[model, budget]


def _row_param(row):
    marks = []
    if row["model"] in SHORT:
        marks.append(pytest.mark.xfail(strict=True, reason=SHORT[row["model"]]))
    return pytest.param(row, id=row["model"], marks=marks)


def test_csv_has_the_three_published_rows():
    assert [r["model"] for r in ROWS] == ["bert-large", "gpt2-xl", "llama-7b"]
    for r in ROWS:
        assert r["hardware"] == "a100-80gb" and float(r["budget"]) == 0.5
        assert 0 < float(r["throughput_ratio"]) <= 1 and float(r["tolerance"]) >= 0 and r["source"]


@pytest.mark.parametrize("row", [_row_param(r) for r in ROWS])
def test_published_ratio(row):
    _, r = _slack(row["model"], float(row["budget"]))
    assert r.fits
    assert r.throughput_ratio >= float(row["throughput_ratio"]) - float(row["tolerance"])


@pytest.mark.parametrize("model,floor", FLOORS)
def test_measured_ratio_does_not_regress(model, floor):
    """What the planner measurably reaches today (see SHORT); fails if it regresses."""
    _, r = _slack(model, 0.5)
    assert r.fits and r.throughput_ratio >= floor


OTHERS = ("capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers", "swap-all")
BUDGETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@pytest.fixture(scope="module")
def best_other():
    """Per (model, budget): the shortest simulated step of any other heuristic's fitting plan
    (and, on the way, each heuristic fits or says INFEASIBLE),
    each heuristic planned and simulated once."""
    cache: dict = {}

    def get(model, budget):
        if (model, budget) not in cache:
            p = _problem(model, budget)
            best = (float("inf"), "-")
            for name in OTHERS:
                plan = planners.get(name).plan(p)
                r = simulate(p, plan, detail=False)
                # every planner's plan fits, or the planner reports it INFEASIBLE (never a crash)
                assert plan.info.status in (Status.FEASIBLE, Status.INFEASIBLE), (name, plan.info.status)
                assert (plan.info.status is Status.FEASIBLE) == (r.feasible and r.fits), (name, model, budget)
                if r.feasible and r.fits and r.step_time_s < best[0]:
                    best = (r.step_time_s, name)
            cache[model, budget] = best
        return cache[model, budget]
    return get


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("model", ["bert-large", "gpt2-xl", "llama-7b"])
def test_slack_is_the_best_heuristic(model, budget, best_other):
    """slack's simulated step is no longer than any other registered heuristic's fitting plan,
    on the whole grid (also printed by ``python benchmarks/bench_slack.py --grid``)."""
    _, mine = _slack(model, budget)
    assert mine.feasible and mine.fits
    step, name = best_other(model, budget)
    assert mine.step_time_s <= step * (1 + 1e-12), name


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["model"])
def test_published_ratio_is_above_the_certified_ceiling_of_our_model(row):
    """Why the published rows are strict xfails: the certified lower bound on the step time
    (slackswap.bounds, valid for every plan) already caps the throughput ratio below the paper's
    figure in our cost model, so no planner could reach it here."""
    from slackswap.bounds import lower_bound

    p = _problem(row["model"], float(row["budget"]))
    ceiling = p.ideal_step_s / lower_bound(p)[0]
    assert ceiling < float(row["throughput_ratio"])
