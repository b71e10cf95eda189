"""Robustness of plans under cost noise (slackswap/calibration/robustness.py) and the slack planner's margin."""

import numpy as np
import pandas as pd
import pytest

from slackswap import Problem, planners, simulate
from slackswap.calibration.robustness import (
    Draws,
    latency_of,
    perturbed_costs,
    plan_with_margin,
    robustness,
    robustness_sweep,
    robustness_table,
    with_transfer_margin,
)
from slackswap.cli import main
from slackswap.core.errors import SlackSwapError
from slackswap.planners.slack import SlackPlanner

LEVELS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.3]
COPIES = ("d2h", "h2d", "latency")


@pytest.fixture(scope="module")
def fixture():
    """tiny with a larger batch (copies of 0.5 MiB tensors): swap-all, a swapping slack plan and a
    recompute-only plan."""
    p = Problem.build("tiny", "a100-80gb", 0.7, batch=64)
    plans = {"swap-all": planners.get("swap-all").plan(p),
             "slack": planners.get("slack", min_swap_bytes=0).plan(p),
             "dp-checkpoint": planners.get("dp-checkpoint").plan(p)}
    assert plans["slack"].counts()["swap"] > 0 and plans["dp-checkpoint"].counts()["swap"] == 0
    return p, plans


@pytest.fixture(scope="module")
def bert():
    return Problem.build("bert-large", "a100-80gb", 0.5)


def test_noise_zero_equals_the_nominal_simulation_exactly(fixture):
    p, plans = fixture
    c0 = perturbed_costs(p, Draws(p, 7, 3), 0.0, 0.5)
    for name in ("fwd_s", "bwd_s", "d2h_s", "h2d_s", "optimizer_s", "duplex_factor"):
        assert getattr(c0, name) == getattr(p.costs, name), name
    for plan in plans.values():
        nominal = simulate(p, plan, detail=False)
        df = robustness(p, plan, noise=[0.0], samples=5, seed=7)
        row = df.iloc[0]
        assert row["nominal_step_s"] == nominal.step_time_s
        assert row["mean_slowdown"] == 1.0 and row["max_slowdown"] == 1.0 and row["spread"] == 0.0
        assert row["ratio_mean"] == nominal.throughput_ratio and row["over_budget"] == 0.0


def test_noise_changes_every_engine_and_leaves_the_problem_alone(fixture):
    p, plans = fixture
    before = p.costs
    c = perturbed_costs(p, Draws(p, 0, 0), 0.2, 0.5)
    assert c.fwd_s != before.fwd_s and c.bwd_s != before.bwd_s and c.d2h_s != before.d2h_s
    assert c.h2d_s != before.h2d_s and c.optimizer_s != before.optimizer_s
    robustness(p, plans["slack"], noise=[0.3], samples=3)
    assert p.costs is before and p.costs == Problem.build("tiny", "a100-80gb", 0.7, batch=64).costs


def test_latency_noise_moves_only_the_latency_part(fixture):
    p, _ = fixture
    lat = latency_of(p)
    assert lat == p.hardware.link.latency_s > 0
    d = Draws(p, 0, 1)
    c = perturbed_costs(p, d, 0.2, 0.5, engines=("latency",))
    assert c.fwd_s == p.costs.fwd_s
    f = np.exp(0.2 * (np.sqrt(0.5) * d.engine["latency"] + np.sqrt(0.5) * d.lat_d2h) - 0.02)
    t = next(i for i, x in enumerate(p.costs.d2h_s) if x > 0)
    assert c.d2h_s[t] == pytest.approx(p.costs.d2h_s[t] + lat * (f[t] - 1), rel=1e-12)
    zero = [i for i, x in enumerate(p.costs.d2h_s) if x == 0]
    assert all(c.d2h_s[i] == 0 for i in zero)


def test_results_are_deterministic_for_a_seed(fixture):
    p, plans = fixture
    a = robustness(p, plans["slack"], noise=[0.1, 0.3], samples=8, seed=3)
    b = robustness(p, plans["slack"], noise=[0.1, 0.3], samples=8, seed=3)
    c = robustness(p, plans["slack"], noise=[0.1, 0.3], samples=8, seed=4)
    pd.testing.assert_frame_equal(a, b)
    assert not a["mean_slowdown"].equals(c["mean_slowdown"])


@pytest.mark.parametrize("engines", [("compute", "d2h", "h2d", "latency"), COPIES])
def test_more_noise_never_reduces_the_spread(fixture, engines):
    p, plans = fixture
    for name, plan in plans.items():
        df = robustness(p, plan, noise=LEVELS, samples=30, seed=0, engines=engines)
        spread = df["spread"].to_numpy()
        assert np.all(np.diff(spread) >= 0), (name, spread)
        if name != "dp-checkpoint" or "compute" in engines:
            assert spread[-1] > 0


def test_copy_noise_cannot_slow_a_plan_without_copies(fixture):
    p, plans = fixture
    df = robustness(p, plans["dp-checkpoint"], noise=[0.3], samples=10, engines=COPIES)
    assert df["max_slowdown"].iloc[0] == 1.0


@pytest.mark.parametrize("kw,field", [({"noise": [1.0]}, "noise"), ({"noise": [-0.1]}, "noise"),
                                      ({"samples": 0}, "samples"), ({"correlation": 1.5}, "correlation"),
                                      ({"seed": -1}, "seed"), ({"engines": ("gpu",)}, "engines")])
def test_bad_input_names_the_field(fixture, kw, field):
    p, plans = fixture
    with pytest.raises(SlackSwapError, match=field):
        robustness(p, plans["slack"], **kw)


def test_table_over_planners_marks_plans_that_do_not_fit(fixture):
    p, _ = fixture
    df = robustness_table(p, ["slack", "keep-all"], noise=[0.0, 0.2], samples=3)
    assert df["planner"].tolist() == ["slack", "slack", "keep-all"]
    assert df.iloc[2]["nominal_ratio"] == 0.0 and np.isnan(df.iloc[2]["mean_slowdown"])


# ---------------------------------------------------------------- margin
def test_transfer_margin_scales_only_the_copies(fixture):
    p, _ = fixture
    q = with_transfer_margin(p, 0.25)
    assert q.costs.fwd_s == p.costs.fwd_s and q.budget_bytes == p.budget_bytes
    assert q.costs.d2h_s == tuple(x * 1.25 for x in p.costs.d2h_s)
    assert with_transfer_margin(p, 0) is p
    with pytest.raises(SlackSwapError, match="margin"):
        with_transfer_margin(p, -0.1)
    with pytest.raises(SlackSwapError, match="slack: margin"):
        SlackPlanner(margin="big")


def test_slack_margin_is_judged_on_nominal_costs_and_hides_copy_noise(bert):
    plain = planners.get("slack").plan(bert)
    robust = planners.get("slack", margin=0.2).plan(bert)
    assert robust.params["margin"] == 0.2
    r = simulate(bert, robust, detail=False)
    assert r.fits and robust.info.objective == r.step_time_s
    assert robust.decisions == plan_with_margin("slack", bert, 0.2).decisions
    assert r.swapped_bytes < simulate(bert, plain, detail=False).swapped_bytes
    a = robustness(bert, plain, noise=[0.2], samples=20, engines=COPIES).iloc[0]
    b = robustness(bert, robust, noise=[0.2], samples=20, engines=COPIES).iloc[0]
    assert b["nominal_ratio"] < a["nominal_ratio"]            # nominal loss ...
    assert b["ratio_p5"] > a["ratio_p5"] and b["p95_slowdown"] < a["p95_slowdown"]   # ... tail gain


def test_robustness_over_a_sweep_file(tmp_path):
    """The sweep file's variants each get their rows; its margin reaches the planner: under 10%
    copy noise the margin-0 slack plan stalls and the margin-0.2 plan does not."""
    f = tmp_path / "m.toml"
    f.write_text('name = "m"\nmodels = ["tiny"]\nbudgets = [0.7]\nplanners = []\n'
                 'overrides = { batch = 64 }\n'       # copies of 0.5 MiB tensors (as the fixture)
                 '[[variants]]\nlabel = "m0"\nplanner = "slack"\nparams = { min_swap_bytes = 0 }\n'
                 '[[variants]]\nlabel = "m2"\nplanner = "slack"\n'
                 'params = { min_swap_bytes = 0, margin = 0.2 }\n')
    df = robustness_sweep(f, noise=[0.0, 0.1], samples=3, engines=COPIES[:2])
    assert df[["model", "hardware", "link", "budget"]].iloc[0].tolist() == ["tiny", "a100-80gb", "pcie4-x16", 0.7]
    assert df["planner"].tolist() == ["m0", "m0", "m2", "m2"]
    noisy = df[df["noise"] == 0.1].set_index("planner")
    assert noisy.loc["m0", "mean_stall_s"] > 0 and noisy.loc["m0", "mean_slowdown"] > 1
    assert noisy.loc["m2", "mean_stall_s"] == 0 and noisy.loc["m2", "max_slowdown"] == 1


def test_cli_robustness(capsys, tmp_path):
    out = tmp_path / "r.csv"
    rc = main(["robustness", "--model", "tiny", "--budget", "0.7", "--planners", "slack,dp-checkpoint",
               "--noise", "0,0.1", "--samples", "3", "--out", str(out), "--figure", str(tmp_path / "r.png")])
    text = capsys.readouterr().out
    assert rc == 0 and "p95_slowdown" in text and (tmp_path / "r.png").stat().st_size > 0
    assert pd.read_csv(out)["planner"].tolist() == ["slack", "slack", "dp-checkpoint", "dp-checkpoint"]
    rc = main(["robustness", "--samples", "3"])
    assert rc == 2 and "--model" in capsys.readouterr().err


def test_any_planner_can_plan_with_a_margin(fixture):
    """The MILP (no margin of its own) plans against copies 3x slower: its plan hides every copy
    there (the nominal optimum swaps a tensor whose copies then stall), judged on the nominal."""
    p, _ = fixture
    plan = plan_with_margin("milp", p, 2.0, time_limit_s=20)
    r = simulate(p, plan, detail=False)
    assert plan.planner == "milp" and plan.params["margin"] == 2.0
    assert r.fits and plan.info.objective == r.step_time_s   # judged on the nominal problem
    slow = simulate(with_transfer_margin(p, 2.0), plan, detail=False)
    assert slow.fits and slow.stall_s == 0 and slow.step_time_s == r.step_time_s
