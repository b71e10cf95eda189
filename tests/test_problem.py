"""Problem: budgets, derived views, bad input."""

import math

import pytest

from slackswap import BudgetError, CostModel, Decision, Plan, Problem, UnknownNameError, simulate
from slackswap.problem import resolve_budget
from slackswap.synthetic import chain


def test_budget_forms():
    peak = 1000
    assert resolve_budget(0.5, peak) == 500
    assert resolve_budget(1.0, peak) == 1000
    assert resolve_budget(None, peak) == math.inf
    assert resolve_budget("inf", peak) == math.inf
    assert resolve_budget(800, peak) == 800
    assert resolve_budget("1KiB", peak) == 1024
    assert resolve_budget("0.25", peak) == 250
    assert resolve_budget("2GB", peak) == 2e9


@pytest.mark.parametrize("bad", ["abc", 1.5, -0.5, 0, -3, True, [1], 0.0])
def test_bad_budgets_name_the_field(bad):
    with pytest.raises(BudgetError, match="budget"):
        resolve_budget(bad, 1000)


def test_budget_below_smallest_feasible_is_an_error_that_says_so():
    g = chain(4, sizes=[2, 2, 2, 2])
    p = Problem(g, CostModel.unit(g))
    assert p.min_feasible_bytes == 6 and p.keep_all_peak == 8
    with pytest.raises(BudgetError, match="below the smallest feasible budget 6 B"):
        p.with_budget(5)
    with pytest.raises(BudgetError, match="backward of op1"):
        p.with_budget(0.5)          # 4 bytes
    assert p.with_budget(0.75).budget_bytes == 6


def test_build_from_presets_and_errors():
    p = Problem.build("tiny", "a100-80gb", budget=0.6)
    assert p.budget_bytes == pytest.approx(0.6 * p.keep_all_peak)
    assert p.min_feasible_bytes < p.keep_all_peak
    assert p.ideal_step_s == pytest.approx(sum(p.costs.fwd_s) + sum(p.costs.bwd_s) + p.costs.optimizer_s)
    assert p.static_bytes == p.graph.static_bytes > 0
    assert "tiny" in str(p) and "keep-all activation peak" in str(p)
    with pytest.raises(UnknownNameError, match="known: .*gpt2-xl"):
        Problem.build("gpt5", "a100-80gb")
    with pytest.raises(UnknownNameError, match="known: .*a100-80gb"):
        Problem.build("tiny", "tpu-v9")
    with pytest.raises(BudgetError, match="budget"):
        Problem.build("tiny", "a100-80gb", budget="lots")
    big = Problem.build("tiny", "a100-80gb", budget=0.5, batch=4)
    assert big.keep_all_peak > p.keep_all_peak


def test_keep_all_peak_matches_simulation_and_uses():
    p = Problem.build("tiny", "a100-80gb", budget=None)
    r = simulate(p, Plan({t: Decision.KEEP for t in p.planning_ids}))
    assert r.peak_bytes == p.keep_all_peak and r.throughput_ratio == 1.0
    for t in p.planning_ids:
        assert p.last_backward_use(t) <= p.first_backward_use(t)
        assert p.graph.tensors[t].producer <= p.last_backward_use(t)


def test_static_memory_plus_budget_above_the_gpu_is_a_warning():
    import warnings

    from slackswap import CapacityWarning, hardware

    with pytest.warns(CapacityWarning, match=r"100.41 GiB alone exceeds the 80.00 GiB of a100-80gb"):
        p = Problem.build("llama-7b", "a100-80gb", budget=0.5)
    assert len(p.memory_warnings) == 1 and "WARNING: static memory" in str(p)
    small = hardware.load("a100-80gb").replace(gpu=hardware.load("a100-40gb").gpu)
    g = Problem.build("gpt2-xl", small, budget=0.3)   # 23.21 GiB static + 6.9 GiB fit 40 GiB
    assert g.memory_warnings == ()
    with pytest.warns(CapacityWarning, match=r"static memory 23.21 GiB \+ activation budget 23.09 GiB"):
        g.with_budget(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        assert Problem.build("gpt2-xl", "a100-80gb", budget=1.0).memory_warnings == ()
