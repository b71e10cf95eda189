"""Calibrate, sensitivity, robustness and calibration target CSVs: every malformed input is one
line naming the file or entry point and the field, the same from the command line (exit 2, one
stderr line) and from the API, raised before any work (docs/errors.md, "Calibration, sensitivity
and robustness"). Valid target files and options are still accepted (property tests)."""

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackswap.calibration.calibrate import Target, calibrate, read_targets
from slackswap.calibration.options import (
    ENGINES,
    MAX_SAMPLES,
    check_calibrate,
    check_robustness,
    check_sensitivity,
)
from slackswap.calibration.robustness import robustness_sweep, robustness_table
from slackswap.calibration.sensitivity import sensitivity_grid
from slackswap.cli import main
from slackswap.core.errors import BudgetError, ConfigError, SlackSwapError

HEAD = "model,budget,step_time_s\n"

# (file name, content, expected line with {path} for the file as given)
TARGET_FILES = [
    ("empty.csv", b"", "{path}: expected a CSV with a header row (model, budget and one of throughput_ratio, "
                       "step_time_s); got an empty file"),
    ("blank.csv", b"\n  \n", "{path}: expected a CSV with a header row (model, budget and one of "
                             "throughput_ratio, step_time_s); got an empty file"),
    ("binary.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "{path}: expected a UTF-8 text CSV; got binary data"),
    ("latin1.csv", "model,budget,step_time_s\ntiny,0.5,1\nbébé,0.5,1\n".encode("latin-1"),
     "{path}: expected a UTF-8 text CSV; got binary data"),
    ("abc.csv", b"model,budget,throughput_ratio\ntiny,0.5,abc\n",
     "{path}: row 2: throughput_ratio: expected a finite number > 0; got 'abc'"),
    ("nan.csv", HEAD.encode() + b"tiny,0.5,1\ntiny,0.5,nan\n",
     "{path}: row 3: step_time_s: expected a finite number > 0; got 'nan'"),
    ("inf.csv", HEAD.encode() + b"tiny,0.5,inf\n", "{path}: row 2: step_time_s: expected a finite number > 0; got 'inf'"),
    ("empty_value.csv", HEAD.encode() + b"tiny,0.5,\n",
     "{path}: row 2: step_time_s: expected a finite number > 0; got ''"),
    ("zero.csv", HEAD.encode() + b"tiny,0.5,0\n", "{path}: row 2: step_time_s: expected a finite number > 0; got '0'"),
    ("ragged.csv", HEAD.encode() + b"tiny,0.5,1\ntiny,0.5,1,7\n", "{path}: row 3: expected 3 fields (as the header); got 4"),
    ("short.csv", HEAD.encode() + b"tiny,0.5\n", "{path}: row 2: expected 3 fields (as the header); got 2"),
    ("negative_weight.csv", b"model,budget,step_time_s,weight\ntiny,0.5,1,-1\n",
     "{path}: row 2: weight: expected a finite number >= 0; got '-1'"),
    ("nan_weight.csv", b"model,budget,step_time_s,weight\ntiny,0.5,1,inf\n",
     "{path}: row 2: weight: expected a finite number >= 0; got 'inf'"),
    ("batch.csv", b"model,budget,step_time_s,batch\ntiny,0.5,1,2.5\n",
     "{path}: row 2: batch: expected an integer >= 1; got '2.5'"),
    ("seq.csv", b"model,budget,step_time_s,seq\ntiny,0.5,1,0\n", "{path}: row 2: seq: expected an integer >= 1; got '0'"),
    ("model.csv", HEAD.encode() + b",0.5,1\n", "{path}: row 2: model: expected a model name; got ''"),
    ("budget.csv", HEAD.encode() + b"tiny,2.5,1\n",
     "{path}: row 2: budget: a number > 1 is bytes and must be whole; got '2.5'"),
    ("columns.csv", b"model,budget,ratio\ntiny,0.5,1\n",
     "{path}: row 1: expected columns model, budget and exactly one of throughput_ratio, step_time_s; "
     "got model, budget, ratio"),
    ("two_metrics.csv", b"model,budget,step_time_s,throughput_ratio\ntiny,0.5,1,0.9\n",
     "{path}: row 1: expected columns model, budget and exactly one of throughput_ratio, step_time_s; "
     "got model, budget, step_time_s, throughput_ratio"),
    ("twice.csv", b"model,budget,step_time_s,model\ntiny,0.5,1,tiny\n",
     "{path}: row 1: expected distinct column names; got 'model' twice"),
    ("header_only.csv", HEAD.encode(), "{path}: expected at least one target row after the header; got none"),
]


def _cli(argv, capsys) -> str:
    """The one stderr line of ``slackswap argv`` (exit 2), without the ``slackswap: error:`` prefix."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("slackswap: error: "), err
    return err.removeprefix("slackswap: error: ").rstrip("\n")


@pytest.mark.parametrize("name, content, expected", TARGET_FILES, ids=[r[0] for r in TARGET_FILES])
def test_a_bad_target_file_is_one_line_naming_file_row_and_column(name, content, expected, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(content)
    line = expected.format(path=path)
    with pytest.raises(SlackSwapError) as api:
        read_targets(path)
    assert str(api.value) == line and type(api.value) is (BudgetError if name == "budget.csv" else ConfigError)
    with pytest.raises(SlackSwapError) as api:        # calibrate reads the file before any fit
        calibrate(str(path), params=("compute_scale",), grid=1, profile=0, max_evals=1)
    assert str(api.value) == line
    assert _cli(["calibrate", "--targets", str(path), "--grid", "1", "--profile", "0"], capsys) == line


# (command line, the same call through the API, expected line). The API calls would fail later
# on purpose (an unknown model, a missing sweep file): the line shows the check came first.
def _sens(**kw):
    args = dict(models=["no-such-model"], compute_scales=[1.0], bandwidths=[25e9], workers=1)
    return lambda: sensitivity_grid(**{**args, **kw})


def _cal(**kw):
    return lambda: calibrate(**{"targets": "no-such-file.csv", **kw})


def _rob(**kw):
    return lambda: robustness_sweep("no-such-sweep.toml", **kw)


OPTIONS = [
    (["sensitivity", "--models", "no-such-model", "--compute-scales", "0.5,nan"], _sens(compute_scales=[0.5, math.nan]),
     "sensitivity.compute_scales[1]: expected a finite number; got nan"),
    (["sensitivity", "--models", "no-such-model", "--compute-scales", "inf"], _sens(compute_scales=[math.inf]),
     "sensitivity.compute_scales[0]: expected a finite number; got inf"),
    (["sensitivity", "--models", "no-such-model", "--compute-scales", "0.5,0"], _sens(compute_scales=[0.5, 0.0]),
     "sensitivity.compute_scales[1]: must be > 0; got 0.0"),
    (["sensitivity", "--models", "no-such-model", "--compute-scales", "0.5,0.5"], _sens(compute_scales=[0.5, 0.5]),
     "sensitivity.compute_scales: expected distinct values (0.5 twice); got [0.5, 0.5]"),
    (["sensitivity", "--models", "no-such-model", "--compute-scales", ","], _sens(compute_scales=[]),
     "sensitivity.compute_scales: must have at least 1 item(s); got []"),
    (["sensitivity", "--models", "no-such-model", "--bandwidths", "25,-1"], _sens(bandwidths=[25e9, -1e9]),
     "sensitivity.bandwidths[1]: must be > 0; got -1000000000.0"),
    (["sensitivity", "--models", ","], _sens(models=[]), "sensitivity.models: must have at least 1 item(s); got []"),
    (["sensitivity", "--models", "no-such-model", "--workers", "0"], _sens(workers=0),
     "sensitivity.workers: must be >= 1; got 0"),
    (["calibrate", "--targets", "no-such-file.csv", "--tol", "nan"], _cal(tol=math.nan),
     "calibrate.tol: expected a finite number; got nan"),
    (["calibrate", "--targets", "no-such-file.csv", "--tol", "-0.1"], _cal(tol=-0.1), "calibrate.tol: must be >= 0; got -0.1"),
    (["calibrate", "--targets", "no-such-file.csv", "--bound", "compute_scale=0.5:inf"],
     _cal(params=("compute_scale", "bandwidth"), bounds={"compute_scale": (0.5, math.inf)}),
     "calibrate.bounds.compute_scale[1]: expected a finite number; got inf"),
    (["calibrate", "--targets", "no-such-file.csv", "--bound", "compute_scale=nan:1"],
     _cal(bounds={"compute_scale": [math.nan, 1]}), "calibrate.bounds.compute_scale[0]: expected a finite number; got nan"),
    (["calibrate", "--targets", "no-such-file.csv", "--params", ","], _cal(params=[]),
     "calibrate.params: must have at least 1 item(s); got []"),
    (["calibrate", "--targets", "no-such-file.csv", "--params", "bandwidth,bandwidth"],
     _cal(params=["bandwidth", "bandwidth"]),
     "calibrate.params: expected distinct values ('bandwidth' twice); got ['bandwidth', 'bandwidth']"),
    (["calibrate", "--targets", "no-such-file.csv", "--grid", "0"], _cal(grid=0), "calibrate.grid: must be >= 1; got 0"),
    (["calibrate", "--targets", "no-such-file.csv", "--profile", "1"], _cal(profile=1),
     "calibrate.profile: must be 0 (no scan) or >= 2; got 1"),
    (["calibrate", "--targets", "no-such-file.csv", "--max-evals", "-3"], _cal(max_evals=-3),
     "calibrate.max_evals: must be >= 1; got -3"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--engines", ","], _rob(engines=[]),
     "robustness.engines: must have at least 1 item(s); got []"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--engines", "d2h,gpu"], _rob(engines=["d2h", "gpu"]),
     "robustness.engines[1]: must be one of 'compute', 'd2h', 'h2d' or 'latency'; got 'gpu'"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--engines", "d2h,d2h"], _rob(engines=("d2h", "d2h")),
     "robustness.engines: expected distinct values ('d2h' twice); got ['d2h', 'd2h']"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--noise", "0.1,nan"], _rob(noise=[0.1, math.nan]),
     "robustness.noise[1]: expected a finite number; got nan"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--noise", "1"], _rob(noise=[1.0]),
     "robustness.noise[0]: must be < 1; got 1.0"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--samples", "1000000000"], _rob(samples=1_000_000_000),
     "robustness.samples: must be <= max_samples (10000; raise it with --max-samples or max_samples=); "
     "got 1000000000"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--samples", "30", "--max-samples", "20"],
     _rob(samples=30, max_samples=20),
     "robustness.samples: must be <= max_samples (20; raise it with --max-samples or max_samples=); got 30"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--max-samples", "0"], _rob(max_samples=0),
     "robustness.max_samples: must be >= 1; got 0"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--samples", "0"], _rob(samples=0),
     "robustness.samples: must be >= 1; got 0"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--correlation", "nan"], _rob(correlation=math.nan),
     "robustness.correlation: expected a finite number; got nan"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--correlation", "1.5"], _rob(correlation=1.5),
     "robustness.correlation: must be <= 1; got 1.5"),
    (["robustness", "--sweep", "no-such-sweep.toml", "--seed", "-1"], _rob(seed=-1), "robustness.seed: must be >= 0; got -1"),
    (["robustness", "--model", "tiny", "--engines", ","], lambda: robustness_table(None, ["slack"], engines=[]),
     "robustness.engines: must have at least 1 item(s); got []"),
]


@pytest.mark.parametrize("argv, api, expected", OPTIONS, ids=[" ".join(r[0][:1] + r[0][3:]) for r in OPTIONS])
def test_an_option_and_its_api_argument_give_the_same_line_before_any_work(argv, api, expected, capsys):
    with pytest.raises(SlackSwapError) as err:
        api()
    assert str(err.value) == expected
    assert _cli(argv, capsys) == expected


@pytest.mark.parametrize("argv, given", [
    (["--model", "tiny"], "--model 'tiny'"), (["--planners", "slack"], "--planners ['slack']"),
    (["--batch", "4"], "--batch 4"), (["--link", "pcie4"], "--link 'pcie4'")])
def test_robustness_refuses_problem_options_with_a_sweep(argv, given, capsys):
    line = _cli(["robustness", "--sweep", "no-such-sweep.toml", *argv], capsys)
    assert line == (f"robustness: --sweep: expected no {given.split()[0]} with a sweep file (the file names its "
                    f"models, planners and overrides); got {given}")


# ---------------------------------------------------------------- valid input is still accepted
_finite_pos = st.floats(min_value=1e-9, max_value=1e6, allow_nan=False, allow_infinity=False)
_row = st.fixed_dictionaries({
    "budget": st.one_of(st.just("none"), st.just(""), st.floats(min_value=0.01, max_value=1.0).map(repr),
                        st.integers(min_value=2, max_value=2**40).map(str)),
    "value": _finite_pos, "batch": st.one_of(st.none(), st.integers(1, 512)),
    "weight": st.one_of(st.none(), st.floats(min_value=0, max_value=100)),
    "planner": st.sampled_from(["", "slack", "keep-all"])})


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_row, min_size=1, max_size=5))
def test_valid_target_files_are_read_as_written(rows):
    lines = ["model,budget,step_time_s,batch,weight,planner"]
    for r in rows:
        lines.append(",".join(["tiny", r["budget"], repr(r["value"]), "" if r["batch"] is None else str(r["batch"]),
                               "" if r["weight"] is None else repr(r["weight"]), r["planner"]]))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.csv"
        path.write_text("\n".join(lines) + "\n")
        got = read_targets(path, planner="swap-all")
    assert len(got) == len(rows)
    for t, r in zip(got, rows, strict=True):
        assert isinstance(t, Target) and t.model == "tiny" and t.metric == "step_time_s"
        assert t.value == r["value"] and t.planner == (r["planner"] or "swap-all")
        assert t.overrides == ({} if r["batch"] is None else {"batch": r["batch"]})
        assert t.weight == (1.0 if r["weight"] is None else r["weight"])
        assert (t.budget is None) == (r["budget"] in ("none", ""))


_distinct = lambda s, **kw: st.lists(s, unique=True, **kw)  # noqa: E731


@settings(max_examples=80, deadline=None)
@given(noise=_distinct(st.floats(min_value=0, max_value=0.99), min_size=1, max_size=5),
       samples=st.integers(1, MAX_SAMPLES), seed=st.integers(0, 2**32), corr=st.floats(0, 1),
       engines=_distinct(st.sampled_from(ENGINES), min_size=1))
def test_valid_robustness_options_are_accepted_unchanged(noise, samples, seed, corr, engines):
    opts = check_robustness(tuple(noise), samples, seed, corr, tuple(engines))
    assert (opts.noise, opts.samples, opts.seed, opts.correlation, opts.engines) == (
        noise, samples, seed, corr, engines)


@settings(max_examples=80, deadline=None)
@given(scales=_distinct(_finite_pos, min_size=1, max_size=6), bws=_distinct(_finite_pos, min_size=1, max_size=6),
       workers=st.integers(1, 64), tol=st.floats(0, 1), grid=st.integers(1, 9),
       profile=st.one_of(st.just(0), st.integers(2, 9)), lo=_finite_pos, width=_finite_pos)
def test_valid_sensitivity_and_calibrate_options_are_accepted_unchanged(scales, bws, workers, tol, grid, profile,
                                                                        lo, width):
    opts = check_sensitivity("gpt2-xl", scales, bws, True, workers)
    assert (opts.models, opts.compute_scales, opts.bandwidths, opts.workers) == (["gpt2-xl"], scales, bws, workers)
    cal = check_calibrate(("compute_scale",), {"compute_scale": (lo, lo + width)}, grid, profile, 40, tol)
    assert (cal.params, cal.bounds, cal.grid, cal.profile, cal.tol) == (
        ["compute_scale"], {"compute_scale": (lo, lo + width)}, grid, profile, tol)


def test_numpy_arrays_and_scalars_are_accepted_as_lists_and_numbers():
    import numpy as np

    opts = check_sensitivity("tiny", np.linspace(0.5, 1.0, 3), np.array([12.5e9, 25e9]), True, np.int64(2))
    assert opts.compute_scales == [0.5, 0.75, 1.0] and opts.bandwidths == [12.5e9, 25e9] and opts.workers == 2
    assert check_robustness(np.array([0.0, 0.1]), np.int64(5), 0, np.float64(0.5), ENGINES).noise == [0.0, 0.1]
    with pytest.raises(SlackSwapError, match=r"^sensitivity\.compute_scales\[1\]: expected a finite number; got nan$"):
        sensitivity_grid("no-such-model", compute_scales=np.array([0.5, np.nan]), workers=1)


def test_max_samples_raises_the_limit():
    assert MAX_SAMPLES == 10_000
    assert check_robustness([0.1], MAX_SAMPLES, 0, 0.5, ENGINES).samples == MAX_SAMPLES
    assert check_robustness([0.1], 20_000, 0, 0.5, ENGINES, max_samples=20_000).samples == 20_000
    with pytest.raises(SlackSwapError, match=r"^robustness\.samples: must be <= max_samples \(10000;"):
        check_robustness([0.1], MAX_SAMPLES + 1, 0, 0.5, ENGINES)


@pytest.mark.parametrize("bound, expected", [
    ("bandwidth=1GB/s:inf", "argument --bound: bandwidth: cannot read 'inf' as a bandwidth "
                            "(examples: \"25GB/s\", \"2TB/s\", 2.5e10)"),
    ("compute_scale=a:1", "argument --bound: compute_scale: expected numbers LO:HI; got 'a:1'"),
    ("latency=1us:x", "argument --bound: latency: cannot read 'x' as a time (examples: \"10us\", \"2ms\")")])
def test_a_bound_that_is_not_a_range_of_numbers_is_one_line(bound, expected, capsys):
    assert _cli(["calibrate", "--targets", "no-such-file.csv", "--bound", bound], capsys) == expected


@pytest.mark.parametrize("kw, argv, expected", [
    ({"hardware": "no-such-hw"}, ["--hardware", "no-such-hw"],
     "unknown hardware 'no-such-hw'; known: "),
    ({"planner": "no-such-planner"}, ["--planner", "no-such-planner"], "unknown planner 'no-such-planner'; known: "),
    ({"budget": -1}, None, "sensitivity.budget: bytes must be > 0 (or a fraction in (0, 1] of the keep-all peak, "
                           "or 'inf'); got -1")])
def test_sensitivity_checks_hardware_planner_and_budget_before_any_point(kw, argv, expected, capsys):
    with pytest.raises(SlackSwapError) as err:      # the model is unknown too: found only in a point
        _sens(**kw)()
    assert str(err.value).startswith(expected)
    if argv:
        assert _cli(["sensitivity", "--models", "no-such-model", *argv], capsys) == str(err.value)
