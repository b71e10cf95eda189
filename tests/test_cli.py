"""CLI: reproduce, plan, simulate, compare, sweep end to end through ``main`` and once through
``python -m slackswap``; user errors print exactly one line on stderr and exit 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from slackswap.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_reproduce_on_a_reduced_setting(capsys, tmp_path):
    rc, out, err = _run(capsys, "reproduce", "--models", "tiny", "--budget", "0.9", "--planners",
                        "slack,chen-sqrt", "--workers", "1", "--out", str(tmp_path))
    assert rc == 0
    assert "Throughput ratio at budget 0.9" in out and "Gap to the lower bound" in out
    assert "(no published setting in this run)" in out  # tiny is not in the paper's table
    progress = err.strip().splitlines()
    assert len(progress) == 2 and progress[0].startswith("[1/2] tiny ")
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert runs["label"].tolist() == ["slack", "chen-sqrt"] and runs["fits"].tolist()[0]
    assert (tmp_path / "gaps.md").read_text().startswith("| model ")
    assert (tmp_path / "published.csv").exists()


def test_reproduce_exact_prints_the_milp_bound_and_proven_gap(capsys, tmp_path):
    rc, out, err = _run(capsys, "reproduce", "--models", "tiny", "--budget", "0.9", "--planners", "slack",
                        "--exact", "--time-limit", "3", "--workers", "1", "--out", str(tmp_path))
    assert rc == 0
    assert "planner_bound_s" in out and "proven_gap" in out
    runs = pd.read_csv(tmp_path / "runs.csv")
    milp = runs[runs["planner"] == "milp"].iloc[0]
    assert milp["status"] in ("OPTIMAL", "TIME_LIMIT", "FEASIBLE")
    assert 0 < milp["planner_bound_s"] <= milp["step_time_s"] * (1 + 1e-9)


def test_plan_then_simulate_the_saved_plan(capsys, tmp_path):
    plan, trace, fig = tmp_path / "plan.json", tmp_path / "trace.json", tmp_path / "tl.png"
    rc, out, err = _run(capsys, "plan", "--model", "tiny", "--budget", "0.8", "--planner", "slack",
                        "--param", "order=size", "--out", str(plan), "--trace", str(trace), "--figure", str(fig))
    assert rc == 0 and err == ""
    assert "throughput ratio" in out and "'order': 'size'" in out and "(fits)" in out
    saved = json.loads(plan.read_text())
    assert saved["planner"] == "slack" and len(saved["decisions"]) == 30
    assert json.loads(trace.read_text())["traceEvents"]
    # the timeline figure: the default size (9 x 5.2 in at 120 dpi), the memory curve in the
    # planner's colour (the command passes the planner), the compute bars in theirs
    from matplotlib.image import imread

    from slackswap.report import planner_style

    img = imread(fig)
    assert img.shape[:2] == (624, 1080)
    pixels = {tuple(p) for p in (img[..., :3] * 255).round().astype(int).reshape(-1, 3)}
    for colour in (planner_style("slack")[0], "#4c72b0", "#55a868"):  # memory; forward, backward bars
        assert tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5)) in pixels, colour
    ratio = [ln for ln in out.splitlines() if "throughput ratio" in ln]
    rc, out2, err = _run(capsys, "simulate", "--plan", str(plan), "--model", "tiny", "--budget", "0.8")
    assert rc == 0 and err == ""
    assert [ln for ln in out2.splitlines() if "throughput ratio" in ln] == ratio


def test_compare_tabulates_each_planner(capsys):
    rc, out, err = _run(capsys, "compare", "--model", "tiny", "--budget", "100KiB", "--planners",
                        "keep-all,chen-sqrt,slack")
    assert rc == 0 and err == ""
    assert "budget 100KiB" in out
    for name in ("keep-all", "chen-sqrt", "slack", "INFEASIBLE"):
        assert name in out


def test_sweep_command_writes_csv_and_prints_the_ablation(capsys, tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('models = ["tiny"]\nbudgets = [0.8, 0.9]\nplanners = ["chen-sqrt", "slack"]\nworkers = 1\n')
    rc, out, err = _run(capsys, "sweep", str(cfg), "--out", str(tmp_path / "r.csv"))
    assert rc == 0 and err == ""
    assert "throughput ratio by budget" in out and "4 runs (0 from cache), 0 errors" in out
    assert len(pd.read_csv(tmp_path / "r.csv")) == 4


@pytest.mark.parametrize("argv, needle", [
    (["plan", "--model", "no-such-model"], "unknown model 'no-such-model'"),
    (["plan", "--model", "tiny", "--budget", "abc"], "argument --budget"),
    (["plan", "--model", "tiny", "--budget", "0.01"], "smallest feasible budget"),
    (["plan", "--model", "tiny", "--planner", "nope"], "unknown planner 'nope'"),
    (["plan", "--model", "tiny", "--param", "novalue"], "argument --param"),
    (["simulate", "--plan", "/no/such/plan.json", "--model", "tiny"], "does not exist"),
    (["compare", "--model", "tiny", "--planners", "slack,nope"], "unknown planner 'nope'"),
    (["sweep", "/no/such/sweep.toml"], "does not exist"),
    (["reproduce", "--models", "tiny,nope"], "unknown model 'nope'"),
    (["reproduce", "--hardware", "tpu"], "unknown hardware 'tpu'"),
])
def test_user_errors_are_one_line_and_exit_2(capsys, argv, needle):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith("slackswap: error: ") and needle in err, err


def test_simulate_refuses_a_plan_for_another_problem(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    assert _run(capsys, "plan", "--model", "tiny", "--budget", "0.9", "--out", str(plan))[0] == 0
    rc, out, err = _run(capsys, "simulate", "--plan", str(plan), "--model", "tiny", "--seq", "8")
    assert rc == 2 and len(err.splitlines()) == 1 and "another problem" in err


def test_python_dash_m_subprocess():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ok = subprocess.run([sys.executable, "-m", "slackswap", "compare", "--model", "tiny", "--budget", "0.9",
                         "--planners", "chen-sqrt"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert ok.returncode == 0 and "chen-sqrt" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "slackswap", "plan", "--model", "tiny", "--budget", "abc"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [bad.stderr.strip()] and bad.stderr.startswith("slackswap: error: ")


def test_sweep_and_compare_print_the_memory_warning(capsys, tmp_path):
    from slackswap.core.paths import data_dir

    hw = tmp_path / "small.toml"
    hw.write_text((data_dir() / "hardware" / "a100-80gb.toml").read_text().replace('memory = "80GiB"',
                                                                                 'memory = "1MiB"'))
    sf = tmp_path / "s.toml"
    sf.write_text(f'models = ["tiny"]\nhardware = ["{hw}"]\nbudgets = [0.9]\nplanners = ["slack"]\nbound = false\n'
                  'workers = 1\n')
    rc, out, _ = _run(capsys, "sweep", str(sf))
    assert rc == 0 and "WARNING: tiny on " in out and "alone exceeds the 1.00 MiB" in " ".join(out.split())
    rc, out, _ = _run(capsys, "compare", "--model", "tiny", "--hardware", str(hw), "--budget", "0.9",
                      "--planners", "slack")
    assert rc == 0 and "WARNING: static memory" in out
    rc, out, _ = _run(capsys, "plan", "--model", "tiny", "--hardware", str(hw), "--budget", "0.9")
    assert rc == 0 and "WARNING: static memory" in out
    rc, out, _ = _run(capsys, "reproduce", "--models", "tiny", "--hardware", str(hw), "--budget", "0.9",
                      "--planners", "slack", "--workers", "1")
    assert rc == 0 and "WARNING: tiny on " in out


def test_sweep_with_milp_prints_its_plan_and_ceiling_not_a_milp_optimum(capsys, tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('models = ["tiny"]\nbudgets = [0.9]\nplanners = ["slack", "milp"]\nworkers = 1\n'
                   '[planner_params]\nmilp = { time_limit_s = 5 }\n')
    rc, out, _ = _run(capsys, "sweep", str(cfg))
    assert rc == 0 and "milp plan is" in out and "ceiling" in out and "proven gap" in out
