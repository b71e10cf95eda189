"""Outputs (docs/errors.md, "Plan files, sweep files and outputs"): every output path is treated the
same way (missing parent folders are created; a path that cannot be written is one line naming the
option), and a result without the detail an output needs is refused, not written empty."""

from __future__ import annotations

import json

import pytest

from slackswap import Problem, planners
from slackswap.cli import main
from slackswap.core.errors import SlackSwapError
from slackswap.timeline import simulate


@pytest.fixture(scope="module")
def solved():
    problem = Problem.build("tiny", budget=0.5)
    plan = planners.get("slack").plan(problem)
    assert simulate(problem, plan).feasible
    return problem, plan


def test_chrome_trace_of_a_result_without_detail_is_refused(solved, tmp_path):
    problem, plan = solved
    r = simulate(problem, plan, detail=False)
    with pytest.raises(SlackSwapError) as e:
        r.to_chrome_trace(tmp_path / "t.json")
    assert str(e.value) == ("to_chrome_trace: the result has no timeline; expected a result of "
                            "simulate(problem, plan, detail=True); got one simulated with detail=False")
    assert not (tmp_path / "t.json").exists()


def test_outputs_create_missing_folders(solved, tmp_path):
    problem, plan = solved
    plan.save(tmp_path / "a" / "b" / "plan.json")
    simulate(problem, plan).to_chrome_trace(tmp_path / "c" / "trace.json")
    assert json.loads((tmp_path / "a" / "b" / "plan.json").read_text())["schema_version"] == 1
    assert json.loads((tmp_path / "c" / "trace.json").read_text())["traceEvents"]


def _rows(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    under = tmp_path / "file" / "x.json"
    return [
        ("Plan.save(path)", under, f"Plan.save(path): cannot create {under}: {tmp_path / 'file'} is not a directory"),
        ("Plan.save(path)", tmp_path / "dir", f"Plan.save(path): {tmp_path / 'dir'} is a directory; expected a file path"),
        ("to_chrome_trace(path)", under,
         f"to_chrome_trace(path): cannot create {under}: {tmp_path / 'file'} is not a directory"),
        ("to_chrome_trace(path)", tmp_path / "dir",
         f"to_chrome_trace(path): {tmp_path / 'dir'} is a directory; expected a file path"),
    ]


@pytest.mark.parametrize("row", range(4))
def test_api_output_that_cannot_be_written_is_one_line(solved, tmp_path, row):
    problem, plan = solved
    where, path, message = _rows(tmp_path)[row]
    with pytest.raises(SlackSwapError) as e:
        if where.startswith("Plan"):
            plan.save(path)
        else:
            simulate(problem, plan).to_chrome_trace(path)
    assert str(e.value) == message


@pytest.mark.parametrize("option", ["--out", "--trace", "--figure"])
def test_cli_output_under_a_file_is_one_line_exit_2(tmp_path, capsys, option):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "x.png"
    assert main(["plan", "--model", "tiny", "--planner", "slack", option, str(target)]) == 2
    assert capsys.readouterr().err == (f"slackswap: error: {option}: cannot create {target}: "
                                       f"{tmp_path / 'file'} is not a directory\n")


def test_cli_outputs_create_missing_folders(tmp_path, capsys):
    out, trace = tmp_path / "p" / "plan.json", tmp_path / "t" / "trace.json"
    assert main(["plan", "--model", "tiny", "--planner", "slack", "--out", str(out), "--trace", str(trace)]) == 0
    assert out.is_file() and trace.is_file()


def test_milp_lp_output_is_checked_like_every_output(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "m.lp"
    message = f"milp: write_lp: cannot create {target}: {tmp_path / 'file'} is not a directory"
    with pytest.raises(SlackSwapError) as e:
        planners.get("milp", write_lp=str(target))
    assert str(e.value) == message
    assert main(["plan", "--model", "tiny", "--planner", "milp", "--param", f"write_lp={target}"]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {message}\n"


def test_table_outputs_create_missing_folders_like_every_output(tmp_path, capsys):
    out = tmp_path / "new" / "r.csv"
    assert main(["robustness", "--model", "tiny", "--budget", "0.5", "--planners", "slack",
                 "--samples", "2", "--noise", "0", "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.read_text().splitlines()[0]
