"""A budget and a time limit read the same way on the command line, in the Python API and in a
sweep file (slackswap.core.limits; docs/experiments.md, "Budgets and time limits")."""

from __future__ import annotations

import math

import pytest
import tomllib

from slackswap.cli import main
from slackswap.cli.common import _budget_value, _time_limit_value
from slackswap.core.errors import BudgetError, ParameterError, SlackSwapError
from slackswap.core.limits import parse_budget, parse_time_limit, resolve_budget
from slackswap.experiments.sweepfiles import sweep_from_dict

# (as typed after --budget, as written in a sweep file's budgets list, expected (kind, amount))
BUDGETS = [
    ("0.5", "0.5", ("fraction", 0.5)),
    ("1", "1", ("fraction", 1.0)),
    ("1.0", "1.0", ("fraction", 1.0)),
    ("1e9", "1e9", ("bytes", 1e9)),
    ("1000000", "1000000", ("bytes", 1e6)),
    ("24GiB", '"24GiB"', ("bytes", float(24 * 2**30))),
    ("inf", '"inf"', ("none", math.inf)),
]
BAD_BUDGETS = [("0", "0"), ("-1", "-1"), ("nan", "nan"), ("-inf", "-inf"), ("2.5", "2.5"),
               ("1e400", '"1e400"'), ("abc", '"abc"')]


def _sweep_budget(literal: str):
    doc = tomllib.loads(f'models = ["tiny"]\nbudgets = [{literal}]\nplanners = ["chen-sqrt"]\n')
    return sweep_from_dict(doc, where="sweep.toml")["budgets"][0]


@pytest.mark.parametrize("text, literal, expected", BUDGETS)
def test_cli_api_and_sweep_file_read_a_budget_alike(text, literal, expected):
    api_value = tomllib.loads(f"x = {literal}")["x"]            # the same value given to Problem.build
    assert parse_budget(text) == expected                       # the API, a string
    assert parse_budget(api_value) == expected                  # the API, a number or a string
    assert parse_budget(_budget_value(text)) == expected        # what --budget hands to Problem.build
    assert parse_budget(_sweep_budget(literal)) == expected     # what the sweep file hands on
    peak = 10**6
    want = expected[1] * peak if expected[0] == "fraction" else expected[1]
    assert resolve_budget(text, peak) == resolve_budget(_budget_value(text), peak) == want


@pytest.mark.parametrize("text, literal", BAD_BUDGETS)
def test_a_bad_budget_is_refused_everywhere(text, literal, capsys):
    with pytest.raises(BudgetError) as ei:
        parse_budget(text)
    assert "\n" not in str(ei.value) and str(ei.value).startswith("budget: ")
    with pytest.raises(SlackSwapError, match=r"^sweep\.toml: budgets\[0\]: "):
        _sweep_budget(literal)
    assert main(["plan", "--model", "tiny", f"--budget={text}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--budget" in err and repr(text) in err


def test_a_sweep_budget_of_one_is_the_whole_peak_not_one_byte():
    assert resolve_budget(_sweep_budget("1"), 1000) == resolve_budget(_budget_value("1"), 1000) == 1000.0


@pytest.mark.parametrize("value, expected", [("2.5", 2.5), (2.5, 2.5), ("120", 120.0), (1, 1.0)])
def test_time_limit_reads_seconds(value, expected):
    assert parse_time_limit(value) == expected
    assert _time_limit_value(str(value)) == expected


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "1e400", "abc", -1, 0, math.nan, math.inf, True])
def test_a_bad_time_limit_is_refused(value):
    with pytest.raises(ParameterError, match=r"^time_limit_s: expected a finite number of seconds > 0; got "):
        parse_time_limit(value)


def test_parse_time_limit_allows_none_only_where_asked():
    assert parse_time_limit(None, allow_none=True) is None
    with pytest.raises(ParameterError):
        parse_time_limit(None)


def test_reproduce_refuses_a_negative_time_limit_before_running(capsys):
    assert main(["reproduce", "--exact", "--time-limit", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--time-limit" in err and "'-1'" in err


@pytest.mark.parametrize("text, literal, expected", BUDGETS)
def test_a_calibration_target_reads_a_budget_as_the_cli_does(text, literal, expected, tmp_path):
    from slackswap.calibration.calibrate import read_targets

    csv = tmp_path / "targets.csv"
    csv.write_text(f"model,budget,step_time_s\ntiny,{text},1.0\n")
    (target,) = read_targets(csv)
    assert parse_budget(target.budget) == parse_budget(_budget_value(text)) == expected


def test_a_bad_calibration_budget_names_its_row(tmp_path):
    from slackswap.calibration.calibrate import read_targets

    csv = tmp_path / "targets.csv"
    csv.write_text("model,budget,step_time_s\ntiny,2.5,1.0\n")
    with pytest.raises(BudgetError, match=r"targets\.csv: row 2: budget: a number > 1 is bytes"):
        read_targets(csv)
