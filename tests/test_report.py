"""report: tables against hand-built rows; figures by their artists, not pixels."""

import math
from dataclasses import asdict

import pandas as pd
import pytest
from figure_checks import assert_legend_clear, copy_bars, drawn, styles_by_label
from matplotlib.colors import to_hex

from slackswap import CostModel, Decision, Plan, Problem, planners, report, simulate
from slackswap.core.errors import ConfigError, SlackSwapError
from slackswap.experiments import RunRow, finish
from slackswap.experiments.synthetic import chain


def _rows():
    base = dict(hardware="a100-80gb", link="pcie4-x16", overrides="{}", params="{}", version="v", budget_bytes=1.0)
    out = []
    for model, steps in (("bert-large", {"slack": 1.25, "chen-sqrt": 1.5, "milp": 1.2}),
                         ("gpt2-xl", {"slack": 1.1, "chen-sqrt": 1.4, "milp": 1.0})):
        for budget in (0.5, 0.7):
            for planner, step in steps.items():
                step = step if budget == 0.5 else 1.0
                out.append(RunRow(**base, model=model, budget=budget, planner=planner, label=planner,
                                  status="FEASIBLE", fits=planner != "chen-sqrt" or budget == 0.5,
                                  step_time_s=step, ideal_step_time_s=1.0, throughput_ratio=1.0 / step,
                                  lower_bound_s=1.0, gap_to_bound=step - 1.0))
    return finish(pd.DataFrame([asdict(r) for r in out]))


def test_published_table_puts_paper_beside_ours(tmp_path):
    ref = tmp_path / "ref.csv"
    ref.write_text("model,hardware,budget,throughput_ratio,tolerance,source\n"
                   "bert-large,a100-80gb,0.5,0.8,0.01,paper\n"
                   "gpt2-xl,a100-80gb,0.5,0.95,0.0,paper\n"
                   "llama-7b,a100-80gb,0.5,0.99,0.0,paper\n")
    t = report.published_table(_rows(), reference=ref)
    assert t["model"].tolist() == ["bert-large", "gpt2-xl"]  # llama-7b was not run
    assert t["paper"].tolist() == [0.8, 0.95]
    assert t["ours"].tolist() == pytest.approx([0.8, 1 / 1.1])
    assert t["difference"].tolist() == pytest.approx([0.0, 1 / 1.1 - 0.95])
    assert t["within"].tolist() == [True, False]
    with pytest.raises(ConfigError, match="does not exist"):
        report.published_table(_rows(), reference=tmp_path / "nope.csv")


def test_shipped_reference_has_the_three_published_models():
    ref = report.reference_table()
    assert sorted(ref["model"]) == ["bert-large", "gpt2-xl", "llama-7b"]
    assert set(ref["budget"]) == {0.5}


def test_gap_table_against_milp_and_bound():
    t = report.gap_table(_rows())
    assert "milp" not in set(t["label"])
    row = t[(t["model"] == "bert-large") & (t["budget"] == 0.5) & (t["label"] == "slack")].iloc[0]
    assert row["gap_to_milp"] == pytest.approx(1.25 / 1.2 - 1) and row["gap_to_bound"] == pytest.approx(0.25)
    assert len(t) == 6  # 8 non-MILP runs; chen-sqrt does not fit at 0.7 (two models)
    s = report.gap_table(_rows(), summary=True).set_index("label")
    assert s.loc["slack", "runs"] == 4
    assert s.loc["slack", "max_gap_to_milp"] == pytest.approx(0.1)
    assert s.loc["chen-sqrt", "max_gap_to_bound"] == pytest.approx(0.5)


def test_ablation_table_pivots_in_sweep_order():
    t = report.ablation_table(_rows(), by="budget")
    assert list(t.columns) == ["model", "budget", "slack", "chen-sqrt", "milp"]
    assert t[["model", "budget"]].values.tolist() == [["bert-large", 0.5], ["bert-large", 0.7],
                                                       ["gpt2-xl", 0.5], ["gpt2-xl", 0.7]]
    assert t["slack"].tolist() == pytest.approx([0.8, 1.0, 1 / 1.1, 1.0])
    assert math.isnan(t["chen-sqrt"].iloc[1])  # does not fit: no throughput
    with pytest.raises(ConfigError, match="not a column"):
        report.ablation_table(_rows(), by="nope")


def test_markdown_latex_csv():
    df = pd.DataFrame({"planner": ["slack", "a_b"], "ratio": [0.96312, math.nan], "ok": [True, False]})
    assert report.to_markdown(df, floatfmt=".3f") == (
        "| planner | ratio | ok  |\n"
        "|---------|------:|-----|\n"
        "| slack   | 0.963 | yes |\n"
        "| a_b     |       | no  |\n")
    tex = report.to_latex(df, floatfmt=".2f")
    assert r"\begin{tabular}{lrl}" in tex and r"a\_b & " in tex and "slack & 0.96 & yes" in tex
    assert report.to_csv(df).splitlines()[0] == "planner,ratio,ok"


def test_humanize_units():
    df = pd.DataFrame({"step_time_s": [0.0123], "peak_bytes": [3 * 2**30], "gap_to_bound": [0.05],
                       "throughput_ratio": [0.5]})
    assert report.humanize(df).iloc[0].tolist() == ["12.30 ms", "3.00 GiB", "5.00%", "0.5000"]


def test_pareto_figure_has_one_line_per_fitting_planner_per_model(tmp_path):
    fig = report.pareto_figure(_rows(), path=tmp_path / "p.png")
    axes = fig.get_axes()
    assert [a.get_title() for a in axes] == ["bert-large", "gpt2-xl"]
    for ax in axes:
        assert [ln.get_label() for ln in ax.get_lines()] == ["slack", "chen-sqrt", "milp"]
        assert [len(ln.get_xdata()) for ln in ax.get_lines()] == [2, 1, 2]
    legend = assert_legend_clear(fig)
    assert [t.get_text() for t in legend.get_texts()] == ["slack", "chen-sqrt", "milp"]


def test_pareto_figure_keeps_each_planners_colour_when_a_panel_lacks_a_planner():
    """``milp`` fits nowhere for bert-large, so the first panel has no milp line: every planner
    still has one colour and marker in both panels, its toolkit-wide one, and one legend lists all."""
    df = _rows()
    df.loc[(df["model"] == "bert-large") & (df["planner"] == "milp"), "fits"] = False
    df.loc[(df["model"] == "gpt2-xl") & (df["planner"] == "slack"), "fits"] = False
    fig = report.pareto_figure(df)
    a, b = fig.get_axes()
    assert [ln.get_label() for ln in a.get_lines()] == ["slack", "chen-sqrt"]
    assert [ln.get_label() for ln in b.get_lines()] == ["chen-sqrt", "milp"]
    styles = styles_by_label(fig)
    assert {k: len(v) for k, v in styles.items()} == {"slack": 1, "chen-sqrt": 1, "milp": 1}
    for planner, ((colour, marker),) in styles.items():
        assert (colour, marker) == report.planner_style(planner)
    legend = assert_legend_clear(fig)
    assert [t.get_text() for t in legend.get_texts()] == ["slack", "chen-sqrt", "milp"]
    handles = {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)}
    assert {k: (to_hex(h.get_color()), h.get_marker()) for k, h in handles.items()} == {
        k: report.planner_style(k) for k in handles}


def test_one_style_per_planner_across_the_toolkit():
    from slackswap import planners

    names = planners.available()
    assert set(names) <= set(report.PLANNER_STYLE)  # every shipped planner has a fixed style
    styles = [report.planner_style(n) for n in names]
    assert len({c for c, _ in styles}) == len(names) and len({m for _, m in styles}) == len(names)
    # any other name: the same style every time, one of the toolkit's markers
    assert report.planner_style("my-planner") == report.planner_style("my-planner")


def test_pareto_variants_share_their_planners_colour_and_differ_by_line_style():
    df = _rows()
    variant = df[df["planner"] == "slack"].assign(label="order=size")
    fig = report.pareto_figure(pd.concat([df, variant], ignore_index=True))
    ax = fig.get_axes()[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["order=size"].get_color() == lines["slack"].get_color()
    assert lines["order=size"].get_marker() == lines["slack"].get_marker()
    assert lines["order=size"].get_linestyle() != lines["slack"].get_linestyle()
    assert_legend_clear(fig)


def test_pareto_legend_covers_no_line_with_one_panel():
    """One model (notebook 03): the legend sits below the panel, not over the lowest line."""
    df = _rows()
    fig = report.pareto_figure(df[df["model"] == "bert-large"])
    assert_legend_clear(fig)


def test_timeline_figure_draws_every_event_and_the_budget():
    g = chain(4, sizes=[2, 2, 2, 2])  # docs/timeline.md, "Worked example (unit costs)": swap-all at budget 6 bytes
    problem = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6)
    r = simulate(problem, Plan({t.id: Decision.SWAP for t in g.planning_tensors()}), detail=True)
    assert r.step_time_s == 16
    fig = report.timeline_figure(r, problem)
    gantt, mem = fig.get_axes()[:2]
    bars = [p for c in gantt.containers for p in c]
    assert len(bars) == len(r.events) == 4 + 4 + 1 + 3 + 3  # fwd, bwd, opt, d2h, h2d
    kinds = {c.get_label(): len(c) for c in gantt.containers}
    assert kinds == {"forward": 4, "backward": 4, "optimizer": 1, "swap out (D2H)": 3, "swap in (H2D)": 3}
    assert max(p.get_x() + p.get_width() for p in bars) == 16
    assert gantt.get_ylim() == (2.5, -0.5)  # all three lanes, compute on top
    lines = {ln.get_label(): ln for ln in mem.get_lines()}
    assert set(lines) == {"activation memory", "budget 6 B"}
    assert list(lines["budget 6 B"].get_ydata()) == [6, 6]
    assert max(lines["activation memory"].get_ydata()) == r.peak_bytes == 6
    with pytest.raises(SlackSwapError, match="detail=True"):   # tests/test_errors_outputs.py: the exact line
        report.timeline_figure(simulate(problem, Plan({t.id: Decision.SWAP for t in g.planning_tensors()}),
                                         detail=False))


def test_timeline_figure_shows_each_copy_and_a_clear_title_and_legend():
    """Back-to-back copies are separate bars a reader can tell apart (one rectangle per copy,
    neighbours in different shades); the title, the one legend and the panels do not overlap.
    gpt2-xl with 12 layers (was 48) at 0.5: slack's plan copies 43 tensors each way, many back
    to back."""
    p = Problem.build("gpt2-xl", "a100-80gb", budget=0.5, layers=12)
    plan = planners.get("slack").plan(p)
    r = simulate(p, plan, detail=True)
    fig = report.timeline_figure(r, p, planner="slack")
    gantt, mem = fig.get_axes()
    bars = copy_bars(fig, r)
    for kind in ("d2h", "h2d"):
        rects, touching = bars[kind]
        assert len(rects) > 10 and touching, "the link is busy: some copies run back to back"
    title = fig._suptitle
    assert title is not None and "slack" in title.get_text() and "throughput ratio" in title.get_text()
    legend = assert_legend_clear(fig)
    rd = drawn(fig)
    for ax in fig.get_axes():
        assert not title.get_window_extent(rd).overlaps(ax.get_tightbbox(rd))
    assert {t.get_text() for t in legend.get_texts()} >= {"forward", "backward", "swap out (D2H)", "swap in (H2D)",
                                                           "activation memory"}
    curve = {ln.get_label(): ln for ln in mem.get_lines()}["activation memory"]
    assert to_hex(curve.get_color()) == report.planner_style("slack")[0]
    assert max(curve.get_ydata()) * 2**30 == pytest.approx(r.peak_bytes)
    budget = [ln for ln in mem.get_lines() if ln.get_label().startswith("budget")]
    assert len(budget) == 1 and budget[0].get_ydata()[0] * 2**30 == pytest.approx(p.budget_bytes)


def test_memory_figure_legend_is_clear_of_the_curve():
    g = chain(4, sizes=[2, 2, 2, 2])
    problem = Problem.from_graph(g, CostModel.unit(g), budget_bytes=6)
    r = simulate(problem, Plan({t.id: Decision.SWAP for t in g.planning_tensors()}), detail=True)
    fig = report.memory_figure(r, problem, planner="swap-all")
    assert_legend_clear(fig)
    (curve,) = [ln for ln in fig.get_axes()[0].get_lines() if ln.get_label() == "activation memory"]
    assert curve.get_color() == report.planner_style("swap-all")[0]
# ---------------------------------------------------------------- one row per full setting
def _swept_rows():
    """gpt2-xl over two links x two budgets; every run's step encodes its own setting."""
    base = dict(model="gpt2-xl", hardware="a100-80gb", overrides="{}", params="{}", version="v", budget_bytes=1.0,
                status="FEASIBLE", fits=True, ideal_step_time_s=1.0)
    out = []
    for i, link in enumerate(("pcie4-x16", "pcie5-x16")):
        for j, budget in enumerate((0.35, 0.5)):
            for k, planner in enumerate(("slack", "capuchin")):
                step = 1 + (i * 4 + j * 2 + k) / 100
                out.append(RunRow(**base, link=link, budget=budget, planner=planner, label=planner,
                                  step_time_s=step, throughput_ratio=1 / step))
    return finish(pd.DataFrame([asdict(r) for r in out]))


def test_ablation_table_keeps_every_swept_setting_apart():
    df = _swept_rows()
    t = report.ablation_table(df, by="link")
    assert list(t.columns) == ["model", "budget", "link", "slack", "capuchin"]
    assert len(t) == 4
    for r in t.itertuples():   # each cell is the run of exactly this (link, budget)
        for planner in ("slack", "capuchin"):
            run = df[(df["link"] == r.link) & (df["budget"] == r.budget) & (df["label"] == planner)]
            assert getattr(r, planner) == run["throughput_ratio"].item()
    assert report.setting_index(df, by="budget") == ["model", "link", "budget"]


def test_ablation_table_merges_settings_only_when_asked_and_never_silently():
    df = _swept_rows()
    t = report.ablation_table(df, by="link", agg="max", over="budget")
    assert list(t.columns) == ["model", "link", "slack", "capuchin"] and len(t) == 2
    assert t["slack"].tolist() == pytest.approx([1.0, 1 / 1.04])
    with pytest.raises(ConfigError, match="share a row"):
        report.ablation_table(pd.concat([df, df]), by="link")
    with pytest.raises(ConfigError, match="agg and over together"):
        report.ablation_table(df, by="link", agg="mean")
    with pytest.raises(ConfigError, match="agg='first'"):
        report.ablation_table(df, by="link", agg="first", over="budget")


def _optimality_rows():
    base = dict(model="llama-7b", hardware="a100-80gb", link="pcie4-x16", overrides="{}", params="{}", version="v",
                budget_bytes=1.0, fits=True, ideal_step_time_s=1.0, n_keep=5, n_swap=3, n_recompute=2)
    out = []
    for budget, milp_step, counts in ((0.3, 1.25, {}), (0.5, 1.1, {"n_swap": 4, "n_recompute": 1})):
        out.append(RunRow(**base, budget=budget, planner="slack", label="slack", status="FEASIBLE",
                          step_time_s=1.25, throughput_ratio=0.8))
        out.append(RunRow(**{**base, **counts}, budget=budget, planner="milp", label="milp", status="FEASIBLE",
                          step_time_s=milp_step, throughput_ratio=1 / milp_step, planner_bound_s=1.0 / 0.9))
    return finish(pd.DataFrame([asdict(r) for r in out]))


def test_optimality_table_labels_the_milp_plan_and_its_certified_bound():
    t = report.optimality_table(_optimality_rows())
    assert "milp" not in t.columns   # no column that reads as an independent optimum
    assert list(t.columns) == ["model", "budget", "slack", "milp plan", "milp plan is", "milp status", "ceiling",
                               "proven gap"]
    assert t["milp plan is"].tolist() == ["slack", "own"]
    assert t["ceiling"].tolist() == pytest.approx([0.9, 0.9])
    assert t["proven gap"].tolist() == pytest.approx([1 - (1 / 0.9) / 1.25, 1 - (1 / 0.9) / 1.1])


def test_optimality_table_names_whichever_heuristic_the_milp_plan_equals():
    df = _optimality_rows()
    dp = df[df["label"] == "milp"].copy()
    dp["planner"] = dp["label"] = "dp-checkpoint"
    t = report.optimality_table(pd.concat([df, dp], ignore_index=True))
    assert t["milp plan is"].tolist() == ["slack", "dp-checkpoint"]   # slack first on a tie


def test_capacity_notes_name_the_settings_that_exceed_the_gpu():
    df = _rows()
    assert report.capacity_notes(df) == []
    df.loc[df["model"] == "gpt2-xl", "warning"] = "static memory 1 GiB alone exceeds the 1 MiB"
    assert report.capacity_notes(df) == ["gpt2-xl on a100-80gb: static memory 1 GiB alone exceeds the 1 MiB"]


def test_table_paths_expand_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    report.to_markdown(_rows(), path="~/t.md")
    report.to_csv(_rows(), path="~/t.csv")
    assert (tmp_path / "t.md").exists() and (tmp_path / "t.csv").exists()
    report.pareto_figure(_rows(), path="~/pareto.png")
    assert (tmp_path / "pareto.png").stat().st_size > 0 and not (tmp_path / "~").exists()


def test_ablation_rows_put_the_ablated_setting_innermost():
    t = report.ablation_table(_swept_rows(), by="link")
    assert t[["budget", "link"]].values.tolist() == [[0.35, "pcie4-x16"], [0.35, "pcie5-x16"],
                                                      [0.5, "pcie4-x16"], [0.5, "pcie5-x16"]]
