"""CLI errors: every malformed input is one line on stderr, exit 2, no traceback, naming the option
or field; Ctrl-C in a sweep says what is saved and a rerun completes it; tables are never cut."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from slackswap.cli import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _files(tmp: Path) -> dict:
    """Inputs the table refers to as {name}."""
    f = {"tmp": tmp, "afile": tmp / "a.txt", "adir": tmp / "d",
         "preset": Path(__file__).resolve().parents[1] / "data" / "hardware" / "a100-80gb.toml"}
    f["afile"].write_text("x")
    f["adir"].mkdir()
    sweeps = {
        "zero_step": 'models = ["tiny"]\nbudgets = {start = 0.3, stop = 0.5, step = 0}\nplanners = ["slack"]\n',
        "tiny_step": 'models = ["tiny"]\nbudgets = {start = 0.3, stop = 0.5, step = 1e-9}\nplanners = ["slack"]\n',
        "nan_step": 'models = ["tiny"]\nbudgets = {start = 0.3, stop = 0.5, step = nan}\nplanners = ["slack"]\n',
        "str_step": 'models = ["tiny"]\nbudgets = {start = 0.3, stop = 0.5, step = "a"}\nplanners = ["slack"]\n',
        "bad_table": 'models = ["tiny"]\nbudgets = {start = 0.3, stop = 0.5}\nplanners = ["slack"]\n',
        "big_grid": 'models = ["tiny"]\nbudgets = {start = 0.01, stop = 1.0, step = 0.0005}\n'
                    'planners = ["slack", "chen-sqrt", "swap-all", "keep-all", "capuchin", "chen-greedy",'
                    ' "dp-checkpoint", "checkpoint-layers", "recompute-all", "swap-all-x"]\n',
        "overrides_int": 'models = ["tiny"]\nbudgets = [0.5]\noverrides = [5]\nplanners = ["slack"]\n',
        "planners_int": 'models = ["tiny"]\nbudgets = [0.5]\nplanners = 5\n',
        "variants_int": 'models = ["tiny"]\nbudgets = [0.5]\nvariants = [1, 2]\n',
        "unknown_key": 'models = ["tiny"]\nbudgets = [0.5]\nplanners = ["slack"]\ncolour = "red"\n',
        "missing_models": 'budgets = [0.5]\nplanners = ["slack"]\n',
        "not_toml": 'models = [tiny\n',
        "unknown_planner": 'models = ["tiny"]\nbudgets = [0.5]\nplanners = ["nope"]\n',
        "empty_models": 'models = []\nbudgets = [0.5]\nplanners = ["slack"]\n',
        "ok": 'models = ["tiny"]\nbudgets = [0.9]\nplanners = ["chen-sqrt"]\nworkers = 1\n',
    }
    for k, text in sweeps.items():
        f[k] = tmp / f"{k}.toml"
        f[k].write_text(text)
    f["badjson"] = tmp / "bad.json"
    f["badjson"].write_text("{not json")
    f["badplan"] = tmp / "plan.json"
    f["badplan"].write_text('{"schema_version": 99}')
    f["hf_huge"] = tmp / "config.json"
    f["hf_huge"].write_text('{"model_type": "gpt2", "n_layer": 1000000, "n_embd": 64, "n_head": 2, '
                            '"vocab_size": 100, "n_positions": 64}')
    return f


PLAN = ["plan", "--model", "tiny"]
ROWS = [  # (argv with {file} names, text the message must contain: the field and what is wrong)
    # --budget
    (PLAN + ["--budget", "2.5"], "--budget"),  # a number > 1 is whole bytes
    (PLAN + ["--budget", "-inf"], "--budget"),
    (PLAN + ["--budget", "nan"], "--budget"),
    (PLAN + ["--budget", "-1"], "--budget"),
    (PLAN + ["--budget", "0"], "--budget"),
    (PLAN + ["--budget", "abc"], "--budget"),
    (PLAN + ["--budget", "1e400"], "--budget"),
    (PLAN + ["--budget", ""], "--budget"),
    (PLAN + ["--budget", "12XB"], "--budget"),
    (PLAN + ["--budget", "0.0001"], "budget: 17 B is below the smallest feasible budget"),
    (["compare", "--model", "tiny", "--budget", "nan"], "--budget"),
    (["reproduce", "--budget", "-0.5"], "--budget"),
    # names
    (["plan", "--model", "no-such-model"], "unknown model 'no-such-model'"),
    (PLAN + ["--hardware", "tpu"], "unknown hardware 'tpu'"),
    (PLAN + ["--link", "carrier-pigeon"], "unknown link 'carrier-pigeon'"),
    (PLAN + ["--planner", "nope"], "unknown planner 'nope'"),
    (["compare", "--model", "tiny", "--planners", "slack,nope"], "unknown planner 'nope'"),
    (["reproduce", "--models", "tiny,nope"], "unknown model 'nope'"),
    (["reproduce", "--planners", "nope"], "unknown planner 'nope'"),
    (["graph", "no-such-model"], "unknown model 'no-such-model'"),
    (["nosuchcommand"], "invalid choice"),
    # options and planner parameters
    (PLAN + ["--seq", "0"], "--seq"),
    (PLAN + ["--seq", "x"], "--seq"),
    (PLAN + ["--batch", "-2"], "--batch"),
    (PLAN + ["--attention", "sparse"], "--attention"),
    (PLAN + ["--implementation", "jax"], "--implementation"),
    (PLAN + ["--param", "novalue"], "--param"),
    (PLAN + ["--param", "=3"], "--param"),
    (PLAN + ["--param", "bogus=1"], "slack: bogus: unknown parameter"),
    (PLAN + ["--planner", "milp", "--param", "time_limit_s=-1"],
     "milp: time_limit_s: expected a finite number of seconds >= 2; got -1"),
    (PLAN + ["--planner", "milp", "--param", "solver=gurobi"], "milp: solver: must be one of"),
    (PLAN + ["--max-ops", "5"], "more than max_ops=5"),
    (PLAN + ["--unknown-flag"], "unrecognized arguments: --unknown-flag"),
    (["sweep", "{ok}", "--workers", "0"], "--workers"),
    (["sweep", "{ok}", "--max-runs", "0"], "--max-runs"),
    (["reproduce", "--time-limit", "soon"], "--time-limit"),
    # outputs
    (PLAN + ["--out", "{adir}"], "--out"),
    (PLAN + ["--out", "{afile}/plan.json"], "--out"),
    (PLAN + ["--trace", "{afile}/t.json"], "--trace"),
    (PLAN + ["--figure", "{tmp}/tl.nosuchformat"], "--figure"),
    (PLAN + ["--figure", "{adir}"], "--figure"),
    (["sweep", "{ok}", "--out", "{afile}/r.csv"], "--out"),
    (["sweep", "{ok}", "--out", "{adir}"], "--out"),
    (["sweep", "{ok}", "--cache", "{afile}"], "--cache"),
    (["reproduce", "--out", "{afile}"], "--out"),
    (["calibrate", "--out", "{afile}/hw.toml"], "--out"),
    (["calibrate", "--csv", "{afile}/rows.csv"], "--csv"),
    (["calibrate", "--out", "{preset}"], ("calibrate.out: ", "is a preset; a calibration never overwrites")),
    (["sensitivity", "--out", "{afile}/grid.csv"], "--out"),
    (["sensitivity", "--figure", "{tmp}/s.nosuchformat"], "--figure"),
    (["robustness", "--model", "tiny", "--out", "{afile}/r.csv"], "--out"),
    (["measure", "gpt2-124m", "--csv", "{afile}/m.csv"], "--csv"),
    (["measure", "gpt2-124m", "--profile-out", "{adir}"], "--profile-out"),
    # missing and malformed files
    (["simulate", "--plan", "/no/such/plan.json", "--model", "tiny"], "does not exist"),
    (["simulate", "--plan", "{badjson}", "--model", "tiny"], "bad.json: not valid JSON"),
    (["simulate", "--plan", "{badplan}", "--model", "tiny"], "plan.json: schema_version: must be one of 1; got 99"),
    (["sweep", "/no/such/sweep.toml"], "does not exist"),
    (["graph", "/no/such/config.json"], "config.json: cannot read /no/such/config.json"),
    (["graph", "{hf_huge}"], "more than max_ops=100,000"),
    (["plan", "--model", "{hf_huge}"], "more than max_ops=100,000"),
    (["plan", "--model", "tiny", "--layers", "3"], "unrecognized arguments: --layers"),
    # sweep files
    (["sweep", "{zero_step}"], "zero_step.toml: budgets.step: must be > 0; got 0"),
    (["sweep", "{tiny_step}"], "budgets: 200,000,001 runs, more than max_runs=10,000"),
    (["sweep", "{nan_step}"], "nan_step.toml: budgets.step: expected a finite number; got nan"),
    (["sweep", "{str_step}"], "str_step.toml: budgets.step: expected a number; got 'a'"),
    (["sweep", "{bad_table}"], "bad_table.toml: budgets.step: missing required key"),
    (["sweep", "{big_grid}"], "19,810 runs, more than max_runs=10,000"),
    (["sweep", "{ok}", "--max-runs", "0"], "--max-runs"),
    (["sweep", "{overrides_int}"], "overrides_int.toml: overrides[0]: expected a table (key = value); got 5"),
    (["sweep", "{planners_int}"], "planners_int.toml: planners: expected a string or a list; got 5"),
    (["sweep", "{variants_int}"], "variants_int.toml: variants[0]: expected a table (key = value); got 1"),
    (["sweep", "{unknown_key}"], "unknown_key.toml: colour: unknown key; allowed: "),
    (["sweep", "{missing_models}"], "missing_models.toml: models: missing required key"),
    (["sweep", "{not_toml}"], "not_toml.toml: not valid TOML"),
    (["sweep", "{unknown_planner}"], "unknown_planner.toml: planner 'nope': unknown planner 'nope'"),
    (["sweep", "{empty_models}"], "empty_models.toml: models: must have at least 1 item"),
]


@pytest.mark.parametrize("argv, needle", ROWS, ids=[f"{i}-{' '.join(r[0])[:40]}" for i, r in enumerate(ROWS)])
def test_malformed_input_is_one_line_exit_2(capsys, tmp_path, argv, needle):
    files = _files(tmp_path)
    argv = [a.format(**files) for a in argv]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert len(err.splitlines()) == 1 and err.startswith("slackswap: error: "), err
    assert "Traceback" not in err and "__init__" not in err and ".py" not in err, err
    assert not re.search(r"\b\w+\(\)", err), err          # no function names
    for part in (needle,) if isinstance(needle, str) else needle:
        assert part in err, err


def test_debug_flag_prints_the_traceback(capsys):
    rc = main(["--debug", "plan", "--model", "tiny", "--param", "bogus=1"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" in err and err.splitlines()[-1].startswith("slackswap: error: ")


def test_outputs_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    from slackswap import experiments

    def boom(*a, **k):
        raise AssertionError("a run started")

    monkeypatch.setattr(experiments, "sweep", boom)
    cfg = tmp_path / "s.toml"
    cfg.write_text('models = ["tiny"]\nbudgets = [0.9]\nplanners = ["chen-sqrt"]\n')
    (tmp_path / "f").write_text("")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "f" / "r.csv")]) == 2
    assert "--out" in capsys.readouterr().err
    with pytest.raises(Exception, match="out"):   # the API too: before any run
        experiments.run_sweep_file(cfg, out=tmp_path / "f" / "r.csv")


def _main_to_file(argv, path, monkeypatch, columns):
    """``main(argv)`` in this process with stdout a file (not a terminal) and ``COLUMNS`` set or
    unset; returns the exit code. ``python -m slackswap`` itself: test_cli.py and the Ctrl-C test."""
    with open(path, "w") as fh, monkeypatch.context() as m:
        if columns is None:
            m.delenv("COLUMNS", raising=False)
        else:
            m.setenv("COLUMNS", columns)
        m.setattr(sys, "stdout", fh)
        return main(argv)


def test_compare_output_redirected_is_never_truncated(tmp_path, monkeypatch, capsys):
    """stdout a file (not a terminal), with and without a narrow COLUMNS: every cell whole
    (``main`` in this process, stdout the file; ``python -m slackswap``: test_cli.py)."""
    for columns in (None, "40"):
        out = tmp_path / "out.txt"
        rc = _main_to_file(["compare", "--model", "tiny", "--budget", "0.5",
                            "--planners", "slack,checkpoint-layers,swap-all"], out, monkeypatch, columns)
        text = out.read_text()
        assert rc == 0, capsys.readouterr().err
        assert "…" not in text and "..." not in text, text
        assert "checkpoint-layers" in text and "INFEASIBLE" in text and "recompute" in text
        assert re.search(r"│ slack +│ FEASIBLE +│ 0\.\d{4} │", text), text


def test_robustness_table_redirected_is_never_truncated(tmp_path, monkeypatch, capsys):
    """The commands added beside compare print whole tables too (narrow COLUMNS, no terminal;
    ``main`` in this process, stdout a file)."""
    out = tmp_path / "out.txt"
    rc = _main_to_file(["robustness", "--model", "tiny", "--budget", "0.5", "--planners", "slack,checkpoint-layers",
                        "--samples", "3", "--noise", "0,0.1"], out, monkeypatch, "40")
    text = out.read_text()
    assert rc == 0, capsys.readouterr().err
    assert "…" not in text and "..." not in text, text
    assert "checkpoint-layers" in text and "p95_slowdown" in text


def _sweep_cmd(cfg, cache, workers):
    return [sys.executable, "-m", "slackswap", "sweep", str(cfg), "--cache", str(cache),
            "--workers", str(workers), "--out", str(cache.parent / f"rows{workers}.csv")]


@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_interrupted_then_rerun_has_every_row_once(tmp_path, workers, capsys):
    """SIGINT mid-sweep (``python -m slackswap sweep``): one line naming the cache and the command,
    exit 130; the same command again (``main`` in this process) finishes with every run exactly
    once, the finished ones read from the cache. Mid-sweep by construction, not by timing: once
    a run is in the cache the sweep's processes are stopped (SIGSTOP to its process group), and
    the signal is sent only while fewer than all runs are finished; otherwise (the sweep was
    faster than the check) the attempt starts again with an empty cache."""
    cfg = tmp_path / "s.toml"
    budgets = [round(0.55 + 0.05 * i, 2) for i in range(9)]
    cfg.write_text(f'models = ["tiny"]\nbudgets = {budgets}\nplanners = ["slack", "chen-sqrt"]\n')
    cache = tmp_path / "cache"
    for _attempt in range(5):
        shutil.rmtree(cache, ignore_errors=True)
        # the child gets SIGINT's default disposition (Python then installs its own handler): a
        # child of a background job would otherwise start with SIGINT ignored and never see it
        p = subprocess.Popen(_sweep_cmd(cfg, cache, workers), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=ENV, cwd=ROOT, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        while not (cache.exists() and any(cache.glob("*.json"))) and p.poll() is None:
            time.sleep(0.005)                                # until a run is finished
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGSTOP)                 # the sweep cannot go on now
            if p.poll() is None and len(list(cache.glob("*.json"))) < 18:
                break
            os.killpg(p.pid, signal.SIGCONT)
        p.communicate(timeout=120)                           # finished first: try again
    else:
        pytest.fail("the sweep finished before it could be interrupted, five times")
    p.send_signal(signal.SIGINT)
    os.killpg(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert err.splitlines() == [err.strip()], err
    assert "Traceback" not in err and str(cache) in err and "run the same command" in err, err
    saved = len(list(cache.glob("*.json")))
    capsys.readouterr()
    rc = main(_sweep_cmd(cfg, cache, workers)[3:])   # the same command again, in this process
    out, err = capsys.readouterr()
    assert rc == 0, err
    df = pd.read_csv(tmp_path / f"rows{workers}.csv")
    assert len(df) == 18 and not df.duplicated(["budget", "label"]).any()
    assert sorted(df["budget"].unique().tolist()) == budgets
    assert f"18 runs ({saved} from cache), 0 errors" in out


@pytest.mark.parametrize("width", [20, 60, 200])
def test_print_table_never_cuts_a_cell(width):
    import io

    from rich.console import Console

    from slackswap.cli.commands import _table
    from slackswap.cli.common import print_table

    buf = io.StringIO()
    console = Console(file=buf, width=width)
    t = _table("a title longer than the narrowest console", ["planner", "ratio", "step"], {"ratio", "step"})
    t.add_row("checkpoint-layers", "0.912345", "615.97 us")
    print_table(console, t)
    text = buf.getvalue()
    assert "…" not in text and "..." not in text
    assert "checkpoint-layers" in text and "0.912345" in text and "615.97 us" in text
    assert "a title longer than the narrowest console" in text
