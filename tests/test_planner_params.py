"""Every registered planner's parameters are declared once (its ``Params``): the constructor's
signature, ``params``, ``slackswap planners NAME`` and docs/planners.md, "Parameters", agree."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from slackswap import Problem, cli, planners
from slackswap.core.errors import ParameterError
from slackswap.planners.base import planner_class

ROOT = Path(__file__).resolve().parent.parent
NAMES = planners.available()


def _script():
    spec = importlib.util.spec_from_file_location("update_params_table", ROOT / "scripts" / "update_params_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _declared(name: str) -> dict:
    """name -> default, from the planner's Params schema."""
    return {k: f.default for k, f in planner_class(name).Params.model_fields.items()}


def _doc_tables() -> dict[str, dict[str, str]]:
    """planner -> {parameter: default as written} read back from docs/planners.md."""
    text = (ROOT / "docs" / "planners.md").read_text(encoding="utf-8")
    block = text.split("<!-- params:start -->", 1)[1].split("<!-- params:end -->", 1)[0]
    out: dict[str, dict[str, str]] = {}
    current = None
    for line in block.splitlines():
        m = re.match(r"\*\*`([\w-]+)`\*\*", line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        m = re.match(r"\| `(\w+)` \| .* \| `(.*)` \| .* \|$", line)
        if m:
            out[current][m.group(1)] = m.group(2).replace("\\|", "|")
    return out


def test_the_builtin_planners_are_all_here():
    assert {"brute", "capuchin", "checkpoint-layers", "chen-greedy", "chen-sqrt", "dp-checkpoint", "keep-all",
            "milp", "recompute-all", "slack", "swap-all"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_constructor_signature_is_the_schema(name):
    sig = inspect.signature(planner_class(name))
    assert {k: p.default for k, p in sig.parameters.items()} == _declared(name)
    assert list(sig.parameters) == list(_declared(name))
    assert planners.param_names(name) == list(_declared(name))


@pytest.mark.parametrize("name", NAMES)
def test_params_is_every_declared_parameter(name):
    p = planners.get(name)
    assert list(p.params) == list(_declared(name))
    assert p.params == _declared(name)
    # the values given are the values reported (every default given back explicitly)
    assert planners.get(name, **_declared(name)).params == p.params


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_has_a_description(name):
    for k, f in planner_class(name).Params.model_fields.items():
        assert f.description, f"{name}: {k}: no description"


@pytest.mark.parametrize("name", NAMES)
def test_cli_listing_shows_every_parameter_and_default(name, capsys):
    assert cli.main(["planners", name]) == 0
    out = capsys.readouterr().out
    shown = dict(re.findall(r"^  (\w+): .* = (.*)$", out, re.M))
    assert shown == {k: repr(v) for k, v in _declared(name).items()}


def test_cli_lists_every_planner(capsys):
    assert cli.main(["planners"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        line = next(li for li in out.splitlines() if li.startswith(f"{name}: "))
        for k in _declared(name):
            assert k in line


def test_docs_table_matches_the_schema():
    docs = _doc_tables()
    assert sorted(docs) == NAMES
    for name in NAMES:
        assert docs[name] == {k: repr(v) for k, v in _declared(name).items()}, name


def test_update_params_table_check_passes():
    assert _script().main(["--check"]) == 0


def test_update_params_table_check_fails_when_stale(tmp_path, monkeypatch, capsys):
    mod = _script()
    stale = tmp_path / "planners.md"
    stale.write_text((ROOT / "docs" / "planners.md").read_text(encoding="utf-8").replace("`max_rounds`", "`rounds`"),
                     encoding="utf-8")
    monkeypatch.setattr(mod, "DOC", stale)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert mod.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert mod.main([]) == 0                # rewriting fixes it
    assert mod.main(["--check"]) == 0


def test_milp_params_include_every_parameter():
    p = planners.get("milp", max_tree_nodes=7, time_limit_s=30)
    assert p.params["max_tree_nodes"] == 7 and p.params["write_lp"] is None and p.params["time_limit_s"] == 30.0


def test_dp_capuchin_swap_all_params():
    assert planners.get("dp-checkpoint", max_rounds=3, multilevel=False).params == {"max_rounds": 3, "multilevel": False}
    assert planners.get("capuchin", min_swap_bytes=5).params == {"min_swap_bytes": 5}
    assert planners.get("swap-all", min_swap_bytes=5).params == {"min_swap_bytes": 5}


@pytest.mark.parametrize("name", ["keep-all", "chen-sqrt", "checkpoint-layers", "swap-all", "dp-checkpoint"])
def test_plans_record_params(name):
    problem = Problem.build("tiny", "a100-80gb", budget=0.8)
    planner = planners.get(name)
    assert dict(planner.plan(problem).params) == planner.params


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_same_error_from_get_and_constructor(name):
    with pytest.raises(ParameterError) as a:
        planners.get(name, no_such=1)
    with pytest.raises(ParameterError) as b:
        planner_class(name)(no_such=1)
    assert str(a.value) == str(b.value)
    assert str(a.value).startswith(f"{name}: no_such: unknown parameter; allowed: ")


@pytest.mark.parametrize("value", [1, 1.99, 0, -1, float("nan"), float("inf"), "x", True])
def test_milp_time_limit_read_by_the_time_limit_parser(value, capsys):
    with pytest.raises(ParameterError) as e:
        planners.get("milp", time_limit_s=value)
    assert str(e.value) == f"milp: time_limit_s: expected a finite number of seconds >= 2; got {value!r}"
    # the command line: the same line, exit 2
    arg = "true" if value is True else ("nan" if value != value else str(value))
    assert cli.main(["plan", "--model", "tiny", "--budget", "0.8", "--planner", "milp", "--param", f"time_limit_s={arg}"]) == 2
    err = capsys.readouterr().err
    assert "milp: time_limit_s: expected a finite number of seconds >= 2; got" in err


def test_milp_time_limit_accepts_what_the_cli_accepts():
    assert planners.get("milp", time_limit_s="10").time_limit_s == 10.0
    assert planners.get("milp", time_limit_s=2).time_limit_s == 2.0
    assert planners.get("milp", time_limit_s=None).time_limit_s is None
