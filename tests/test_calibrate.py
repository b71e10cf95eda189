"""Calibration (slackswap/calibration/calibrate.py): recover known parameters, identifiability, honest
reports of unreachable rows, calibrated hardware files, targets, CLI; the sensitivity grid."""

import math

import pandas as pd
import pytest

from slackswap import Problem
from slackswap.calibration.calibrate import (
    PARAMETERS,
    Target,
    apply,
    bounds_for,
    calibrate,
    read_targets,
    simulated_targets,
)
from slackswap.calibration.sensitivity import sensitivity_grid
from slackswap.cli import main
from slackswap.core import hardware
from slackswap.core.errors import ConfigError, SlackSwapError

TRUE = {"compute_scale": 0.8, "bandwidth": 14e9}
#: recovered values must be within this relative tolerance of the true ones
RECOVERY_TOL = 0.005


@pytest.fixture(scope="module")
def targets():
    truth = apply(hardware.load("a100-80gb"), TRUE)
    rows = [Target("tiny", None, "step_time_s", 0, "keep-all", overrides={"batch": 64}),
            Target("tiny", 1.0, "step_time_s", 0, "swap-all", overrides={"batch": 64}),
            Target("tiny", 1.0, "step_time_s", 0, "swap-all", overrides={"batch": 8})]
    return simulated_targets(rows, truth)   # the 'measured' rows of a known machine


@pytest.fixture(scope="module")
def fitted(targets):
    return calibrate(targets, ("compute_scale", "bandwidth"), "a100-80gb", bounds={"bandwidth": (8e9, 31.5e9)},
                     profile=3)


def test_recovers_known_parameters_from_a_perturbed_preset(fitted):
    # the preset (compute_scale 1, 25 GB/s) is the perturbed start; the truth is 0.8 and 14 GB/s
    assert fitted.preset == {"compute_scale": 1.0, "bandwidth": 25e9}
    for name, true in TRUE.items():
        assert fitted.values[name] == pytest.approx(true, rel=RECOVERY_TOL), name
    assert fitted.reproduced and fitted.rms < 1e-4
    assert (fitted.rows["preset_sim"] != fitted.rows["target"]).all()


def test_recovers_link_bandwidth_and_latency_from_copy_bound_steps():
    truth = apply(hardware.load("a100-80gb"), {"bandwidth": 22e9, "latency": 25e-6})
    rows = [Target("tiny", 1.0, "step_time_s", 0, "swap-all", overrides={"batch": b}) for b in (2, 16, 64)]
    cal = calibrate(simulated_targets(rows, truth), ("bandwidth", "latency"), "a100-80gb", profile=0)
    assert cal.values["bandwidth"] == pytest.approx(22e9, rel=RECOVERY_TOL)
    assert cal.values["latency"] == pytest.approx(25e-6, rel=RECOVERY_TOL)
    assert math.isfinite(cal.jacobian_cond) and "not scanned" in cal.identifiability["latency"]


def test_profile_scan_finds_both_parameters_identifiable(fitted):
    for name in TRUE:
        assert fitted.identifiability[name].startswith("identifiable"), fitted.identifiability
    assert set(fitted.profiles["parameter"]) == set(TRUE) and len(fitted.profiles) == 6


def test_a_parameter_the_targets_do_not_see_is_not_identifiable(targets):
    cal = calibrate(targets[:1], ("bandwidth",), "a100-80gb", grid=2, profile=3, max_evals=5)
    assert cal.identifiability["bandwidth"].startswith("not identifiable")


def test_an_unreachable_row_is_reported_with_its_closest_residual(targets):
    far = [Target(t.model, t.budget, t.metric, 3 * t.value, t.planner, overrides=t.overrides) for t in targets[:1]]
    cal = calibrate(far, ("compute_scale",), "a100-80gb", grid=3, profile=0, max_evals=10)
    lo, _ = bounds_for("compute_scale", hardware.load("a100-80gb"))
    assert not cal.reproduced and cal.values["compute_scale"] == pytest.approx(lo)
    assert cal.rows["closest"].iloc[0] < -0.3
    assert "NOT reproduced by any setting tried within the bounds" in cal.summary()


def test_calibrated_hardware_file_loads_back_with_provenance(fitted, tmp_path):
    path = fitted.write_hardware(tmp_path / "cal.toml")
    hw = hardware.load(str(path))
    base = hardware.load("a100-80gb")
    assert hw.link.d2h_bytes_per_s == pytest.approx(fitted.values["bandwidth"])
    assert hw.gpu.matmul_efficiency(1e11) == pytest.approx(min(1.0, 0.75 * fitted.values["compute_scale"]))
    assert hw.gpu.memory_efficiency(1e8) == base.gpu.memory_efficiency(1e8)
    assert "Calibrated (bandwidth" in hw.link.sources["d2h_bandwidth"]
    assert "Calibrated (compute_scale" in hw.gpu.sources["efficiency.matmul"]
    assert hw.gpu.sources["peak.bf16"] == base.gpu.sources["peak.bf16"]
    p = Problem.build("tiny", hw, None, batch=64)
    assert p.ideal_step_s == pytest.approx(fitted.rows["target"].iloc[0], rel=1e-3)   # the keep-all row


def test_never_overwrites_a_preset_nor_writes_into_presets_unasked(fitted, tmp_path):
    presets = hardware.hardware_dir()
    with pytest.raises(ConfigError, match="never overwrites a preset"):
        fitted.write_hardware(presets / "a100-80gb.toml", allow_presets=True, overwrite=True)
    with pytest.raises(ConfigError, match="refusing to write into"):
        fitted.write_hardware(presets / "calibrated-a100.toml")
    assert not (presets / "calibrated-a100.toml").exists()
    fitted.write_hardware(tmp_path / "x.toml")
    with pytest.raises(ConfigError, match="exists"):
        fitted.write_hardware(tmp_path / "x.toml")
    with pytest.raises(ConfigError, match=".toml"):
        fitted.write_hardware(tmp_path / "x.txt")


def test_published_targets_and_measured_csv(tmp_path):
    pub = read_targets()
    assert [(t.model, t.metric, t.planner) for t in pub] == [
        ("bert-large", "throughput_ratio", "slack"), ("gpt2-xl", "throughput_ratio", "slack"),
        ("llama-7b", "throughput_ratio", "slack")]
    assert [t.value for t in pub] == [0.963, 0.976, 0.996]
    f = tmp_path / "steps.csv"
    f.write_text("model,budget,planner,batch,step_time_s,weight\ntiny,none,keep-all,64,8.3e-5,2\n"
                 "tiny,0.7,slack,,9e-5,\n")
    rows = read_targets(f)
    assert rows[0] == Target("tiny", None, "step_time_s", 8.3e-5, "keep-all", None, 2.0, {"batch": 64})
    assert rows[1].budget == 0.7 and rows[1].overrides == {} and rows[1].weight == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("model,budget,step_time_s,throughput_ratio\ntiny,0.5,1,0.9\n")
    with pytest.raises(ConfigError, match="exactly one of throughput_ratio, step_time_s"):
        read_targets(bad)
    bad.write_text("model,budget,step_time_s\ntiny,0.5,-1\n")
    with pytest.raises(ConfigError, match="row 2: step_time_s: expected a finite number > 0"):
        read_targets(bad)


@pytest.mark.parametrize("kw,match", [({"params": ("speed",)}, "unknown parameter 'speed'"),
                                      ({"params": ()}, "calibrate.params"),
                                      ({"bounds": {"bandwidth": (3e10, 2e10)}}, "calibrate.bounds"),
                                      ({"bounds": {"latency": (1e-6, 1e-5)}}, "fitted: compute_scale"),
                                      ({"profile": 1}, "calibrate.profile"), ({"grid": 0}, "calibrate.grid")])
def test_bad_arguments_name_the_field(targets, kw, match):
    args = {"params": ("compute_scale",), **kw}
    with pytest.raises(SlackSwapError, match=match):
        calibrate(targets, **args)


def test_every_parameter_has_plausible_bounds_around_the_preset():
    for name in ("a100-80gb", "h100-sxm", "gh200"):
        hw = hardware.load(name)
        for p in PARAMETERS.values():
            lo, hi = bounds_for(p.name, hw)
            assert 0 < lo < hi and lo <= p.get(hw) <= hi, (name, p.name)


def test_cli_calibrate_writes_a_hardware_file(capsys, tmp_path, targets):
    f = tmp_path / "steps.csv"
    pd.DataFrame([{"model": t.model, "budget": "none" if t.budget is None else t.budget, "planner": t.planner,
                   "batch": t.overrides["batch"], "step_time_s": t.value} for t in targets]).to_csv(f, index=False)
    out = tmp_path / "cal.toml"
    argv = ["calibrate", "--targets", str(f), "--params", "bandwidth", "--bound", "bandwidth=8GB/s:31.5GB/s",
            "--grid", "3", "--profile", "0", "--max-evals", "20", "--out", str(out)]
    rc = main(argv)
    text = capsys.readouterr().out
    assert rc == 0 and "calibrated hardware written to" in text and "bandwidth" in text
    assert hardware.load(str(out)).link.d2h_bytes_per_s == pytest.approx(14e9, rel=0.05)
    assert main(argv) == 2 and "exists" in capsys.readouterr().err


def test_sensitivity_grid_and_figure(tmp_path):
    """Every point's plan fits and is at most the certified ceiling; a lower compute scale slows
    the ideal step; at gpt2's 0.7 budget, where the plans swap, a slower link lowers both the
    ratio and the ceiling at each compute scale."""
    from slackswap.report.calibration_figures import sensitivity_figure

    df = sensitivity_grid("gpt2", budget=0.7, compute_scales=(0.5, 1.0), bandwidths=(2e9, 25e9))
    assert len(df) == 4 and set(df["compute_scale"]) == {0.5, 1.0}
    assert (df["ratio"] > 0).all()                # 0 is a plan that does not fit
    assert (df["ratio"] <= df["bound_ratio"] * (1 + 1e-9)).all() and not df["ratio"].isna().any()
    slow, fast = (df.loc[df["compute_scale"] == s, "ideal_step_s"] for s in (0.5, 1.0))
    assert slow.min() > fast.max()
    for _, d in df.groupby("compute_scale"):
        narrow, wide = (d[d["bandwidth"] == b].iloc[0] for b in (2e9, 25e9))
        assert narrow["ratio"] < wide["ratio"] and narrow["bound_ratio"] < wide["bound_ratio"]
    sensitivity_figure(df, path=tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 0
