"""slackswap.torch.measure_step and ``slackswap measure``: measured vs simulated on the current device
(CPU here); a plan over its budget still runs and is reported as exceeding it."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from slackswap import Decision, Plan  # noqa: E402
from slackswap.cli import main  # noqa: E402
from slackswap.core import profile  # noqa: E402
from slackswap.torch import hf_models as zoo  # noqa: E402
from slackswap.torch.measure_step import measure  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # small models: one intra-op thread (conftest.py)


@pytest.fixture(scope="module")
def tiny():
    model, inputs = zoo.build("gpt2-tiny")
    return measure(model, inputs, budget=[0.5, 0.4], repeats=1, device="cpu"), model, inputs


def test_rows_compare_each_plan_with_the_simulator(tiny):
    """Each row's simulated step is the simulator's own for that plan and problem (a plan
    when over its budget judged without a limit), its peak the hooks' count; the planned rows fit."""
    from slackswap import planners
    from slackswap.timeline import simulate

    m, _, _ = tiny
    assert [r.plan for r in m.rows] == ["keep-all", "recompute-all", "slack@0.5", "slack@0.4"]
    assert m.device == "cpu" and "hooks" in m.peak_kind
    for r in m.rows:
        assert r.peak == r.sim_peak > 0           # CPU: the hooks' count equals the schedule's
        assert r.step_s > 0 and r.sim_step_s > 0 and len(r.step_all_s) == 1
    pb = m.problem
    ids = pb.planning_ids
    want = {"keep-all": (Plan({t: Decision.KEEP for t in ids}), pb),
            "recompute-all": (Plan({t: Decision.RECOMPUTE for t in ids}), pb)}
    for b in (0.5, 0.4):
        want[f"slack@{b}"] = (planners.get("slack").plan(pb.with_budget(b)), pb.with_budget(b))
    for r in m.rows:
        plan, judge = want[r.plan]
        assert r.counts == plan.counts() and r.budget_bytes == judge.budget_bytes, r.plan
        sim = simulate(judge, plan, detail=False)
        assert r.fits_sim == sim.feasible, r.plan
        if not sim.feasible:                      # over its budget: judged without a limit
            sim = simulate(judge.with_budget(None), plan, detail=False)
        assert r.sim_step_s == sim.step_time_s, r.plan
    assert m.rows[1].sim_step_s > m.rows[0].sim_step_s   # recompute-all repeats forward ops
    keep, rec = m.rows[0], m.rows[1]
    assert rec.recomputed_ops > 0 and keep.recomputed_ops == 0
    assert not keep.fits and "NO" in m.table()["fits"][0]   # keep-all is over 50%
    assert all(r.fits for r in m.rows[2:])
    assert m.rows[3].budget_bytes < m.rows[2].budget_bytes


def test_a_plan_over_the_budget_runs_and_is_flagged(tiny):
    _, model, inputs = tiny
    from slackswap.torch import trace

    g = trace(model, inputs, device="cpu")
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()}, planner="mine")
    m = measure(model, inputs, plan=plan, budget=0.5, repeats=1, device="cpu")
    row = m.rows[-1]
    assert row.plan == "mine" and not row.fits and row.peak == row.sim_peak


def test_cli_measure_writes_table_figure_and_profile(capsys, tmp_path, monkeypatch):
    """The table, the profile and the figure: a PNG of the figure's size with more than a
    background, whose two panels draw the table's simulated and measured step and peak per plan."""
    import matplotlib.image
    import pandas as pd

    from slackswap.report import measure_figures as report_measure

    figs, draw = [], report_measure.measurement_figure

    def kept(m, path=None):                            # the figure the CLI drew, for its artists
        figs.append(draw(m, path))
        return figs[-1]

    monkeypatch.setattr(report_measure, "measurement_figure", kept)
    out = {k: tmp_path / n for k, n in (("fig", "f.png"), ("csv", "t.csv"), ("prof", "p.json"))}
    rc = main(["measure", "gpt2-tiny", "--repeats", "1", "--budget", "0.5", "--figure", str(out["fig"]),
               "--csv", str(out["csv"]), "--profile-out", str(out["prof"])])
    text = capsys.readouterr().out
    assert rc == 0
    assert "step ratio" in text and "saved activations, hooks" in text
    assert "keep-all: exceeds the budget" in text
    assert "per-op overhead (charged on every op): forward " in text
    assert "per_op_overhead_ms" in json.loads(out["prof"].read_text())
    assert out["csv"].read_text().startswith("plan,")
    df = pd.read_csv(out["csv"])
    assert list(df["plan"]) == ["keep-all", "recompute-all", "slack"]
    (fig,) = figs
    png = matplotlib.image.imread(out["fig"])
    w, h = fig.get_size_inches() * 120                 # report._save's dpi
    assert png.shape[:2] == (round(h), round(w))
    assert len({tuple(px) for px in png.reshape(-1, png.shape[-1])}) > 10   # not a blank page
    panels = fig.get_axes()
    assert len(panels) == 2
    for ax, (sim, got) in zip(panels, (("sim step ms", "step ms"), ("sim peak MiB", "peak MiB")), strict=True):
        assert [t.get_text() for t in ax.get_xticklabels()] == list(df["plan"])
        bars = {c.get_label(): [b.get_height() for b in c] for c in ax.containers}
        assert bars["simulated"] == pytest.approx(list(df[sim]), rel=1e-9)
        assert bars["measured"] == pytest.approx(list(df[got]), rel=1e-9)
    g, costs = profile.load(out["prof"])          # docs/profile.md's whole-graph format
    assert len(g.ops) == len(costs.fwd_s) > 10
    assert json.loads(out["prof"].read_text())["device"] == "cpu"


def test_cli_measure_unknown_model_is_one_error_line(capsys):
    assert main(["measure", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown torch model 'no-such-model'" in err[0]


def test_cuda_figure_marks_each_plans_own_budget(tiny):
    # the figure of a CUDA measurement (device name changed: the figure reads only the rows)
    import dataclasses

    m = dataclasses.replace(tiny[0], device="cuda:0", rows=list(tiny[0].rows))
    fig = m.figure()
    ax = fig.axes[1]
    (marks,) = [c for c in ax.collections if c.get_label() == "budget (each plan's)"]
    ys = sorted({round(seg[0][1], 6) for seg in marks.get_segments()})
    want = sorted({round(r.budget_bytes / 2**20, 6) for r in m.rows})
    assert ys == want and len(want) == 2        # 0.5 for the baselines and slack@0.5, and 0.4
    assert len(marks.get_segments()) == len(m.rows)
