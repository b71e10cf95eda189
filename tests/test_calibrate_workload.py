"""Workload and hardware together (slackswap/calibration/search.py, workload.py): rows simulated
under a known workload and a known link are fitted back (the workload exactly, the link within
0.5%), the candidates and their sources, the smallest-assumption search, bad parameters. Tiny rows
and fast planners (swap-all, capuchin): each test well under 2 s."""

from dataclasses import replace

import pytest

from slackswap import models
from slackswap.calibration.calibrate import Target, calibrate
from slackswap.calibration.search import RowEvaluator, search_assumptions
from slackswap.calibration.workload import NVIDIA_MLM_FRACTION, WORKLOAD, candidates
from slackswap.core import hardware
from slackswap.core.errors import SlackSwapError

TRUE_HW = {"bandwidth": 22e9}
TRUE_WL = {"budget_scope": "forward", "loss_workspace": False, "attention": "eager"}
RECOVERY_TOL = 0.005


def _rows():
    # swap-all at 1.0 pins the link; capuchin at 0.85 of the budget's base sees every workload value
    return [Target("tiny", 1.0, "step_time_s", 0, "swap-all", overrides={"batch": 4}),
            Target("tiny", 0.85, "step_time_s", 0, "capuchin", overrides={"batch": 4})]


@pytest.fixture(scope="module")
def targets():
    rev = RowEvaluator(_rows(), hardware.load("a100-80gb"))
    return [replace(t, value=rev.value(i, TRUE_WL, TRUE_HW)) for i, t in enumerate(rev.targets)]


def test_recovers_known_workload_and_link(targets):
    cal = calibrate(targets, ("bandwidth", *TRUE_WL), "a100-80gb", grid=2, profile=0, max_evals=5)
    assert cal.values["bandwidth"] == pytest.approx(TRUE_HW["bandwidth"], rel=RECOVERY_TOL)
    wl = cal.workload
    assert wl.values == {"budget_scope": "forward", "loss_workspace": False, "attention": {"tiny": "eager"}}
    assert cal.reproduced
    for name in ("budget_scope", "loss_workspace", "attention for tiny"):
        assert wl.identifiability[name].startswith("identifiable"), wl.identifiability
    # the profile: the true value fits, the other does not
    prof = wl.profile.set_index(["parameter", "value"])["rms"]
    assert prof["budget_scope", "forward"] < 1e-3 < prof["budget_scope", "step"]
    assert "budget_scope = 'forward'" in cal.summary()


def test_search_finds_the_true_assumptions_as_the_smallest_set(targets):
    rev = RowEvaluator(targets, hardware.load("a100-80gb"))
    box = {"bandwidth": (20e9, 31.5e9)}
    res = search_assumptions(rev, ["bandwidth"], list(TRUE_WL), box, grid=3, max_size=3, refine=1, max_evals=5)
    assert [sorted(str(a) for a in found[0]) for found in res.found] == [
        ["attention=eager for tiny", "budget_scope=forward", "loss_workspace=false"]]
    assert list(res.sizes["size"]) == [0, 1, 2, 3]          # no smaller set reproduces both rows
    assert (res.sizes["best_max_residual"].iloc[:3] > res.tol).all()
    assert abs(res.found[0][1]["bandwidth"] / TRUE_HW["bandwidth"] - 1) <= RECOVERY_TOL
    assert "1 set(s) of 3 assumption(s) reproduce every row" in res.summary()


def test_candidates_own_value_first_and_sources():
    bert = models.load("bert-large")
    assert candidates("mlm_fraction", bert) == (1.0, NVIDIA_MLM_FRACTION)
    assert candidates("mlm_fraction", models.load("gpt2-xl")) == (1.0,)     # an LM head: no choice
    assert candidates("batch", bert) == (32, 8, 16, 64)
    assert candidates("batch", models.load("llama-7b")) == (4, 1, 2, 8)
    assert candidates("seq", bert) == (512, 128)
    assert candidates("budget_scope", bert) == ("step", "forward")
    assert candidates("attention", bert) == ("flash", "eager")
    assert all(p.source for p in WORKLOAD.values())


@pytest.mark.parametrize("params, message", [
    (("bandwidth", "batch_size"), "calibrate.params: unknown parameter 'batch_size'; known: compute_scale"),
    (("budget_scope",), "calibrate.params: workload parameters (budget_scope) are searched with at least one"),
    (("bandwidth", "batch"), "calibrate.params: batch is set by target row"),
])
def test_bad_workload_parameters_are_one_line_errors(targets, params, message):
    with pytest.raises(SlackSwapError) as e:
        calibrate(targets, params, "a100-80gb", grid=1, profile=0, max_evals=1)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_assumptions_command_on_a_target_file(tmp_path, targets, capsys):
    from slackswap.cli import main

    csv = tmp_path / "t.csv"
    csv.write_text("model,budget,planner,batch,step_time_s\n" + "".join(
        f"tiny,{t.budget},{t.planner},4,{t.value!r}\n" for t in targets))
    assert main(["assumptions", "--targets", str(csv), "--params", "bandwidth", "--workload",
                 "budget_scope,loss_workspace", "--max-size", "1", "--grid", "2", "--refine", "1",
                 "--max-evals", "3", "--csv", str(tmp_path / "sizes.csv")]) == 0
    out = capsys.readouterr().out
    assert "no set of up to 1 assumptions reproduces every row" in out   # the truth needs three
    assert (tmp_path / "sizes.csv").read_text().startswith("size,sets,best,best_max_residual")


@pytest.mark.parametrize("kw, message", [
    (dict(hw_params=["speed"]), "search_assumptions.params: unknown hardware parameter 'speed'; known:"),
    (dict(wl_params=["batchx"]), "search_assumptions.workload: unknown workload parameter 'batchx'; known:"),
    (dict(max_size=-1), "search_assumptions.max_size: must be >= 0; got -1"),
    (dict(tol=float("nan")), "search_assumptions.tol: expected a finite number; got nan"),
    (dict(grid=0), "search_assumptions.grid: must be >= 1; got 0"),
])
def test_bad_search_options_are_one_line_errors(targets, kw, message):
    args = dict(hw_params=["bandwidth"], wl_params=["budget_scope"], box=None)
    args.update(kw)
    with pytest.raises(SlackSwapError) as e:
        search_assumptions(RowEvaluator(targets, hardware.load("a100-80gb")), **args)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
