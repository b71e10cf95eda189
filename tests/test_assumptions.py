"""Assumption files (slackswap/calibration/assumptions.py, data/assumptions/): every key checked
with a one-line error, the table with our defaults and under a set, and the ablation one
assumption at a time, each value checked against a problem built and simulated here. Tiny rows."""


import pytest

from slackswap import planners
from slackswap.calibration import assumptions
from slackswap.calibration.calibrate import Target, apply
from slackswap.cli import main
from slackswap.core import hardware
from slackswap.core.errors import ConfigError
from slackswap.timeline import simulate
from slackswap.timeline.problem import Problem

GOOD = '''name = "toy"
description = "a test set"

[workload.budget_scope]
value = "forward"
source = "a reading of the budget"

[workload.loss_workspace]
value = false
source = "a loss in place"

[hardware.bandwidth]
value = 22e9
source = "a slower link"
'''
ROWS = [Target("tiny", 0.85, "step_time_s", 2.9e-5, "capuchin", overrides={"batch": 4})]


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy.toml").write_text(GOOD)
    return assumptions.load(tmp_path / "toy.toml")


def _step(hw_values=None, **workload):
    hw = apply(hardware.load("a100-80gb"), hw_values or {})
    p = Problem.build("tiny", hw, 0.85, batch=4, **workload)
    return simulate(p, planners.get("capuchin").plan(p), detail=False).step_time_s


def test_a_set_is_read_with_every_source(toy):
    assert [str(i) for i in toy.items] == ["budget_scope=forward", "loss_workspace=false", "bandwidth=22 GB/s"]
    assert all(i.source for i in toy.items)


def test_table_and_ablation_one_at_a_time(toy):
    tab = assumptions.table(toy, targets=ROWS)
    full = _step({"bandwidth": 22e9}, budget_scope="forward", loss_workspace=False)
    assert tab["defaults"].iloc[0] == _step() and tab["assumptions"].iloc[0] == full
    abl = assumptions.ablation(toy, targets=ROWS).set_index("assumption")
    alone = {"budget_scope=forward": _step(budget_scope="forward"),
             "loss_workspace=false": _step(loss_workspace=False),
             "bandwidth=22 GB/s": _step({"bandwidth": 22e9})}
    without = {"budget_scope=forward": _step({"bandwidth": 22e9}, loss_workspace=False),
               "loss_workspace=false": _step({"bandwidth": 22e9}, budget_scope="forward"),
               "bandwidth=22 GB/s": _step(budget_scope="forward", loss_workspace=False)}
    for name in alone:
        assert abl.loc[name, "alone"] == alone[name]
        assert abl.loc[name, "alone_moves"] == alone[name] - _step()
        assert abl.loc[name, "its_share"] == full - without[name]
    assert len(set(alone.values())) == 3      # each assumption moves the row on its own


def test_a_workload_value_applies_only_to_models_that_take_it(tmp_path):
    (tmp_path / "m.toml").write_text('name = "m"\n[workload.mlm_fraction]\nvalue = 0.15625\nsource = "NVIDIA"\n')
    aset = assumptions.load(tmp_path / "m.toml")
    from slackswap import models
    assert aset.workload_for(models.load("bert-large"), "bert-large") == {"mlm_fraction": 0.15625}
    assert aset.workload_for(models.load("gpt2-xl"), "gpt2-xl") == {}


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('value = "forward"', 'value = "backward"'),
     "toy.toml: workload.budget_scope.value: budget_scope: must be one of 'step' or 'forward'; got 'backward'"),
    (GOOD.replace("value = 22e9", "value = nan"), "toy.toml: hardware.bandwidth.value: expected a finite number"),
    (GOOD.replace("value = 22e9", "value = -1.0"), "toy.toml: hardware.bandwidth.value: must be > 0; got -1.0"),
    (GOOD.replace('source = "a slower link"\n', ""), "toy.toml: hardware.bandwidth.source: missing"),
    (GOOD.replace("[workload.loss_workspace]", "[workload.loss_buffer]"),
     "toy.toml: workload.loss_buffer: unknown workload assumption; allowed: mlm_fraction"),
    (GOOD.replace("[hardware.bandwidth]", "[hardware.speed]"),
     "toy.toml: hardware.speed: unknown hardware parameter; allowed: compute_scale"),
    (GOOD.replace('source = "a loss in place"', 'source = "x"\nmodels = ["bert-huge"]'),
     "toy.toml: workload.loss_workspace.models: unknown model 'bert-huge'; allowed:"),
    (GOOD.replace('name = "toy"', 'nam = "toy"'), "toy.toml: nam: unknown key"),
])
def test_bad_files_are_one_line_errors(tmp_path, text, message):
    (tmp_path / "toy.toml").write_text(text)
    with pytest.raises(ConfigError) as e:
        assumptions.load(tmp_path / "toy.toml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)


def test_reproduce_refuses_an_unknown_set_before_any_run(capsys):
    assert main(["reproduce", "--models", "bert-large", "--assumptions", "no-such-set"]) == 2
    err = capsys.readouterr().err
    assert "unknown assumption set 'no-such-set'" in err and len(err.strip().splitlines()) == 1


def test_shipped_sets_load_with_a_source_for_every_assumption():
    names = assumptions.available()
    assert names
    for n in names:
        aset = assumptions.load(n)
        assert aset.items and all(i.source for i in aset.items)
        assert aset.description


def test_the_smallest_set_reproduces_the_published_rows_within_its_tolerance():
    """docs/calibration.md, "Results: workload and hardware together": measured residuals -0.17%,
    -0.13%, +0.13% of the published ratios (tolerance 0.2%, relative)."""
    tab = assumptions.table(assumptions.load("smallest-set"))
    assert list(tab["model"]) == ["bert-large", "gpt2-xl", "llama-7b"]
    assert (tab["within"] == "yes").all(), tab
    assert list(tab["assumptions"].round(4)) == [0.9613, 0.9747, 0.9973]
    assert list(tab["defaults"].round(4)) == [0.9182, 0.9588, 0.9953]    # today's published table
