"""Plan files and JSON files (docs/errors.md, "Plan files, sweep files and outputs"): a tensor named
twice in any spelling, and a key given twice in any JSON object, are one-line errors naming them;
valid plan files still round-trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackswap.cli import main
from slackswap.core import profile
from slackswap.core.errors import ConfigError, PlanError
from slackswap.core.plan import Decision, Plan

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None)

# (the plan file's text, the exact message; the file is written as plan.json)
FILES = [
    ('{"schema_version": 1, "decisions": {"1": "keep", "01": "swap"}}',
     "plan.json: decisions['01']: expected each tensor once; got tensor 1 again (already given as '1')"),
    ('{"schema_version": 1, "decisions": {"1": "keep", " 1": "keep"}}',
     "plan.json: decisions[' 1']: expected each tensor once; got tensor 1 again (already given as '1')"),
    ('{"schema_version": 1, "decisions": {"1": "swap"}, "issue_points": {"1": 3, "001": 2}}',
     "plan.json: issue_points['001']: expected each tensor once; got tensor 1 again (already given as '1')"),
    ('{"schema_version": 1, "decisions": {"2": "recompute"}, "hold_points": {"02": 1, "2": 1}}',
     "plan.json: hold_points['2']: expected each tensor once; got tensor 2 again (already given as '02')"),
    ('{"schema_version": 1, "decisions": {"1": "keep", "1": "swap"}}',
     "plan.json: decisions[1]: expected each key once; got '1' twice"),
    ('{"schema_version": 1, "schema_version": 1, "decisions": {"1": "keep"}}',
     "plan.json: schema_version: expected each key once; got 'schema_version' twice"),
    ('{"schema_version": 1, "decisions": {"1": "keep"}, "info": {"gap": 0.1, "gap": 0.2}}',
     "plan.json: info.gap: expected each key once; got 'gap' twice"),
]


@pytest.mark.parametrize("text, message", FILES)
def test_plan_file_error_is_one_exact_line(tmp_path, text, message):
    path = tmp_path / "plan.json"
    path.write_text(text)
    with pytest.raises(PlanError) as e:
        Plan.load(path)
    assert str(e.value) == message


@pytest.mark.parametrize("text, message", FILES[:4])
def test_plan_dict_error_is_the_same_line(text, message):
    with pytest.raises(PlanError) as e:
        Plan.from_dict(json.loads(text), "plan.json")
    assert str(e.value) == message


@pytest.mark.parametrize("text, message", FILES)
def test_simulate_command_gives_the_same_line(tmp_path, capsys, text, message):
    path = tmp_path / "plan.json"
    path.write_text(text)
    assert main(["simulate", "--plan", str(path), "--model", "tiny"]) == 2
    out, err = capsys.readouterr()
    assert err == f"slackswap: error: {message}\n"


API = [
    (lambda: Plan({1: "keep", "1": "swap"}),
     "Plan.decisions['1']: expected each tensor once; got tensor 1 again (already given as 1)"),
    (lambda: Plan({1: "swap"}, issue_points={"01": 2, 1: 3}),
     "Plan.issue_points[1]: expected each tensor once; got tensor 1 again (already given as '01')"),
    (lambda: Plan({1: "recompute"}, hold_points={1: 2, "1": 3}),
     "Plan.hold_points['1']: expected each tensor once; got tensor 1 again (already given as 1)"),
]


@pytest.mark.parametrize("call, message", API)
def test_plan_constructor_refuses_a_tensor_given_twice(call, message):
    with pytest.raises(PlanError) as e:
        call()
    assert str(e.value) == message


def test_profile_json_refuses_a_repeated_key(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text('{"name": "t", "ops": [{"name": "mm", "fwd_ms": 1.0, "fwd_ms": 2.0, "bwd_ms": 1.0}]}')
    with pytest.raises(ConfigError) as e:
        profile.read(path)
    assert str(e.value) == "profile.json: ops[0].fwd_ms: expected each key once; got 'fwd_ms' twice"


decisions = st.dictionaries(st.integers(0, 500), st.sampled_from(list(Decision)), min_size=1, max_size=30)


@SETTINGS
@given(decisions=decisions, data=st.data())
def test_valid_plan_files_round_trip(tmp_path_factory, decisions, data):
    swaps = sorted(t for t, d in decisions.items() if d is Decision.SWAP)
    recs = sorted(t for t, d in decisions.items() if d is Decision.RECOMPUTE)
    issue = {t: data.draw(st.integers(0, 1000)) for t in swaps}
    hold = {t: data.draw(st.integers(0, 1000)) for t in recs[:3]}
    order = data.draw(st.permutations(swaps)) if swaps and data.draw(st.booleans()) else None
    plan = Plan(decisions, issue_points=issue, d2h_order=order, hold_points=hold, planner="slack",
                params={"a": 1}, problem_key="k")
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    plan.save(path)
    back = Plan.load(path)
    assert back == plan
    assert Plan.from_dict(plan.to_dict()) == plan
