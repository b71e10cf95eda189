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


# ---------------------------------------------------------------- the report API's outputs
def _report_calls(problem, plan, df):
    """(name, call writing to ``path``) of every report function that writes a file."""
    from slackswap import report

    result = simulate(problem, plan)
    return [
        ("to_csv", lambda path: report.to_csv(df, path=path)),
        ("to_markdown", lambda path: report.to_markdown(df, path=path)),
        ("to_latex", lambda path: report.to_latex(df, path=path)),
        ("timeline_figure", lambda path: report.timeline_figure(result, problem, path=path)),
        ("memory_figure", lambda path: report.memory_figure(result, problem, path=path)),
    ]


REPORT_FUNCTIONS = ["to_csv", "to_markdown", "to_latex", "timeline_figure", "memory_figure"]


@pytest.fixture(scope="module")
def table():
    import pandas as pd

    return pd.DataFrame({"budget": [0.5], "throughput_ratio": [0.9]})


@pytest.mark.parametrize("row", range(len(REPORT_FUNCTIONS)))
def test_report_output_that_cannot_be_written_is_one_line(solved, table, tmp_path, row):
    problem, plan = solved
    name, call = _report_calls(problem, plan, table)[row]
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    under = tmp_path / "file" / ("x.png" if name.endswith("figure") else "x.txt")
    for path, message in [
        (under, f"{name}(path): cannot create {under}: {tmp_path / 'file'} is not a directory"),
        (tmp_path / "dir", f"{name}(path): {tmp_path / 'dir'} is a directory; expected a file path"),
    ]:
        with pytest.raises(SlackSwapError) as e:
            call(path)
        assert str(e.value) == message


@pytest.mark.parametrize("row", range(len(REPORT_FUNCTIONS)))
def test_report_outputs_create_missing_folders(solved, table, tmp_path, row):
    problem, plan = solved
    name, call = _report_calls(problem, plan, table)[row]
    path = tmp_path / "a" / "b" / (f"{name}.png" if name.endswith("figure") else f"{name}.txt")
    call(path)
    assert path.is_file() and path.stat().st_size > 0


@pytest.mark.parametrize("fn", ["timeline_figure", "memory_figure"])
def test_figures_of_a_result_without_detail_are_refused(solved, tmp_path, fn):
    from slackswap import report

    problem, plan = solved
    r = simulate(problem, plan, detail=False)
    with pytest.raises(SlackSwapError) as e:
        getattr(report, fn)(r, problem, path=tmp_path / "f.png")
    assert str(e.value) == (f"{fn}: the result has no timeline; expected a result of "
                            "simulate(problem, plan, detail=True); got one simulated with detail=False")
    assert not (tmp_path / "f.png").exists()


@pytest.mark.parametrize("fn", ["timeline_figure", "memory_figure"])
def test_figure_of_a_type_matplotlib_cannot_write_is_one_line(solved, tmp_path, fn):
    from slackswap import report

    problem, plan = solved
    path = tmp_path / "f.out"
    with pytest.raises(SlackSwapError) as e:
        getattr(report, fn)(simulate(problem, plan), problem, path=path)
    assert str(e.value).startswith(f"{fn}(path): cannot write a figure as 'out' ({path}); allowed suffixes: ")
    assert "png" in str(e.value).split("allowed suffixes: ")[1].split(", ")
    assert not path.exists()
