"""benchmarks/parallel_sweep.py on its CI-sized case (tiny, 24 layers, tensor 2 with sequence
parallelism, pipeline 2): every plan's ratio is at most the certified ceiling, the axes change
what they name, the CSV is in the results format and reads back, the figure's legend is clear,
and a malformed budget is a one-line error."""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from pathlib import Path

import pytest
from figure_checks import assert_legend_clear

ROOT = Path(__file__).resolve().parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod          # the dataclasses of the script look their module up
    spec.loader.exec_module(mod)
    return mod


ps = _load("parallel_sweep", "benchmarks/parallel_sweep.py")
ubr = _load("update_benchmarks_readme", "scripts/update_benchmarks_readme.py")
CASE = ps.QUICK[0]
TOL = 1e-9


@functools.cache
def _rows(axis):
    return tuple(ps.run_row(CASE, a, ch, g, 0.5) for a, ch, g in ps.settings(CASE) if a == axis)


def rows_of(axis):
    """The quick case's rows along ``axis`` (computed once per test process)."""
    return [dict(r) for r in _rows(axis)]


def check_row(r):
    assert "note" not in r, r.get("note")
    for col in ("slack", "recompute-only", "offload-only"):
        assert 0 <= r[col] <= r["ceiling"] + TOL, (col, r)
    assert 0 < r["ceiling"] <= 1
    other = max(r["recompute-only"], r["offload-only"])
    assert r["advantage"] == (r["slack"] / other - 1 if other else math.inf)
    assert r["slack"] > 0          # slack fits where the single-technique plans do


@pytest.mark.parametrize("axis, key, values", [("pp", "pp", CASE.pp), ("microbatches", "microbatches", CASE.microbatches)])
def test_pipeline_axes(axis, key, values):
    rows = rows_of(axis)
    assert [r[key] for r in rows] == list(values)
    for r in rows:
        check_row(r)
        assert r["GPUs per switch"] == 2 and r["in flight"] >= 1


def test_stage_axis_holds_fewer_micro_batches_further_down():
    rows = rows_of("stage")
    assert [(r["stage"], r["in flight"]) for r in rows] == [(0, 2), (1, 1)]
    for r in rows:
        check_row(r)


def test_switch_axis_shares_the_link_and_lowers_the_ceiling():
    """a100-80gb's node: a 25 GB/s uplink per PCIe switch; 4 GPUs (tp 2 x pp 2) copy at once, so
    one GPU alone on a switch gets 25 GB/s and four on one switch 6.25 GB/s each. Less bandwidth
    cannot lower the certified bound, so the ceiling does not rise."""
    one, four = rows_of("GPUs per switch")
    assert (one["GPUs per switch"], four["GPUs per switch"]) == (1, 4)
    assert (one["copy link (GB/s)"], four["copy link (GB/s)"]) == (25.0, 6.25)
    for r in (one, four):
        check_row(r)
    assert four["ceiling"] <= one["ceiling"]
    assert four["offload-only"] <= one["offload-only"]


def test_csv_reads_back_in_the_results_format(tmp_path):
    rows = rows_of("GPUs per switch")
    rows.append({"case": CASE.label, "axis": "microbatches", "pp": 2, "microbatches": 1, "GPUs per switch": 2,
                 "note": "parallel: microbatches: must be >= pp (2) for the 1F1B schedule; got 1"})
    path = tmp_path / "sweep.csv"
    ps.write_csv(rows, path, "python benchmarks/parallel_sweep.py --quick", 1.0)
    meta, table = ubr.read_table(path)
    assert table[0] == list(ps.COLUMNS) and len(table) == 4
    assert meta["command"] == "python benchmarks/parallel_sweep.py --quick"
    assert table[3][ps.COLUMNS.index("slack")].startswith("not run: parallel: microbatches")
    back = ps.read_csv(path)
    assert len(back) == 2
    for r, b in zip(rows[:2], back, strict=True):
        for col in ("slack", "recompute-only", "offload-only", "ceiling"):
            assert b[col] == pytest.approx(r[col], abs=5e-5)


def test_figure_of_the_csv(tmp_path):
    path = tmp_path / "sweep.csv"
    ps.write_csv(rows_of("GPUs per switch"), path, "python benchmarks/parallel_sweep.py --quick", 1.0)
    fig = ps.figure(ps.read_csv(path))
    assert_legend_clear(fig)
    top, bottom = fig.get_axes()[:4], fig.get_axes()[4:]
    assert [ax.get_title() for ax in top] == [f"axis: {a}" for a in ps.AXES]
    labels = {line.get_label() for line in top[3].get_lines()}
    assert labels == {f"{CASE.label}: {c}" for c in ("slack", "recompute-only", "offload-only", "certified ceiling")}
    (adv,) = [line for line in bottom[3].get_lines() if line.get_label().endswith("advantage")]
    rows = rows_of("GPUs per switch")
    want = [100 * (r["slack"] / max(r["recompute-only"], r["offload-only"]) - 1) for r in rows]
    assert list(adv.get_ydata()) == pytest.approx(want, abs=0.01)


@pytest.mark.parametrize("value", ["nan", "0", "1.5"])
def test_bad_budget_is_one_line(value, capsys):
    assert ps.main(["--quick", "--budget", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--budget: must be in (0, 1]" in err


def test_figure_of_a_missing_or_foreign_csv_is_one_line(tmp_path, capsys):
    png = tmp_path / "f.png"
    assert ps.main(["--figure", str(png), "--out", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: cannot read" in err
    other = tmp_path / "other.csv"
    other.write_text("model,budget\nbert-large,0.5\n")
    assert ps.main(["--figure", str(png), "--out", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a sweep CSV of this script" in err
    assert not png.exists()
