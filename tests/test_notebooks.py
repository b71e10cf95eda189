"""The notebooks run top to bottom without an error (nbclient, a timeout per cell), stay thin, are
stored with the outputs of their current code, and show what their text says: the objects each
notebook made are taken from its kernel and checked (figures by their artists and extents)."""

import math
import pickle
from pathlib import Path

import nbformat
import pytest
from figure_checks import assert_legend_clear, copy_bars, styles_by_label
from matplotlib.colors import to_hex
from nbclient import NotebookClient

from slackswap import report
from slackswap.experiments import gaps as gap_report

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

# the objects each notebook shows: a variable, or (a call in a cell's source) that cell's output
SHOWN = {
    "01_explore_a_plan": {"result": "result", "timeline": "report.timeline_figure(",
                          "memory": "report.memory_figure(", "plan": "plan", "explorer": "ex"},
    "02_heuristic_vs_exact": {"df": "df", "full": "full", "pareto": "report.pareto_figure(", "gdf": "gdf",
                              "gaps": "report.gap_figure("},
    "03_ablations": {"df": "df", "pareto": "report.pareto_figure("},
    "04_calibration_robustness": {"rob": "rob", "robustness": "report_calib.robustness_figure(",
                                  "cal": "cal", "grid": "grid",
                                  "sensitivity": "report_calib.sensitivity_figure("},
}


def test_the_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS] == ["01_explore_a_plan.ipynb", "02_heuristic_vs_exact.ipynb",
                                           "03_ablations.ipynb", "04_calibration_robustness.ipynb"]
    assert sorted(SHOWN) == [p.stem for p in NOTEBOOKS]


def _kinds(cell):
    """What a code cell shows: (output type, MIME types or stream name), stderr left out."""
    return {(o.output_type, o.get("name") or tuple(sorted(o.get("data", {})))) for o in cell.outputs
            if o.get("name") != "stderr"}


def _run(path, tmp_path):
    """Execute the notebook; its cells and the objects of ``SHOWN`` taken from its kernel."""
    stored = nbformat.read(path, as_version=4)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    out = tmp_path / "shown.pkl"
    exprs = {}
    for name, what in SHOWN[path.stem].items():
        if what.endswith("("):
            (n,) = [i for i, c in enumerate(code) if what in c.source]
            exprs[name] = f"Out[{n + 1}]"  # cells run in order from 1 (checked below)
        else:
            exprs[name] = what
    items = ", ".join(f"{k!r}: {v}" for k, v in exprs.items())
    nb.cells.append(nbformat.v4.new_code_cell(f"import pickle\npickle.dump({{{items}}}, open({str(out)!r}, 'wb'))"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.cells.pop()
    with open(out, "rb") as f:
        return stored, nb, pickle.load(f)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_shows_what_it_says(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "pip install" not in code and "def " not in code and "class " not in code  # thin: no library logic
    stored, ran, shown = _run(path, tmp_path)
    errors = [o for c in ran.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    cells = [c for c in ran.cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    # stored as executed top to bottom, with the outputs the current code gives (none cleared or stale)
    kept = [c for c in stored.cells if c.cell_type == "code"]
    assert [c.execution_count for c in kept] == list(range(1, len(kept) + 1))
    assert [_kinds(c) for c in kept] == [_kinds(c) for c in cells]
    images = [o for c in cells for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, "every notebook shows at least one figure"
    CHECKS[path.stem](shown)


def _pareto(fig, df):
    """One legend clear of every panel; each label drawn in its planner's colour and marker."""
    assert_legend_clear(fig)
    planner = dict(zip(df["label"], df["planner"], strict=True))
    for label, styles in styles_by_label(fig).items():
        assert styles == {report.planner_style(planner[label])}, label


def _check_01(shown):
    r = shown["result"]
    assert r.fits
    fig = shown["timeline"]
    assert "slack" in fig._suptitle.get_text()
    bars = copy_bars(fig, r)
    assert bars["d2h"][0] and bars["h2d"][0]  # the plan swaps: its copies are drawn, one bar each
    assert_legend_clear(fig)
    assert_legend_clear(shown["memory"])
    # the explorer: its first state is the plan above; the budget change reused the problem
    ex = shown["explorer"]
    first = ex._kept[("gpt2-xl", "a100-80gb", 0.5, "slack")]
    assert first[1].decisions == shown["plan"].decisions and first[2].step_time_s == r.step_time_s
    assert (ex.budget, ex.builds, ex.plans) == (0.3, 1, 2) and ex.result.fits
    assert "budget 0.30" in ex.figure._suptitle.get_text()
    assert_legend_clear(ex.figure)


def _check_02(shown):
    df, full = shown["df"], shown["full"]
    assert set(df.loc[df["planner"] == "milp", "status"]) <= {"OPTIMAL", "INFEASIBLE"}
    fits = df[df["planner"] != "milp"].groupby("label")["fits"].sum()
    assert fits["slack"] == fits.max()  # "slack is the heuristic that fits at the most budgets"
    gaps = df.loc[df["fits"].astype(bool) & (df["planner"] != "milp"), "gap_to_milp"]
    assert (gaps >= -1e-9).all() and gaps.max() > 0.01  # no heuristic beats the optimum; some are off
    milp = full[full["planner"] == "milp"]
    assert len(milp) == 3
    for _, row in milp.iterrows():  # "slack is within half a percent of a certified bound"
        assert math.isfinite(row["planner_bound_s"])
        assert 0 <= 1 - row["planner_bound_s"] / row["step_time_s"] < 0.005, row["model"]
    _pareto(shown["pareto"], df)
    slack = df[(df["label"] == "slack") & df["fits"].astype(bool)]
    assert len(slack) == 14 and (slack["gap_to_milp"].abs() < 1e-9).all()  # "matches the optimum on all 14"
    # "where the greedy loses": the full planner matches brute force, its greedy passes alone do not
    gdf = shown["gdf"]
    summary = gap_report.summary(gdf).set_index("label")
    assert summary.loc["slack", "worst_gap"] < 1e-9 and summary.loc["slack", "infeasible_but_solvable"] == 0
    assert summary.loc["slack, no search", "worst_gap"] > 0.05
    _pareto(shown["gaps"], gdf)


def _check_03(shown):
    df, fig = shown["df"], shown["pareto"]
    _pareto(fig, df)  # the legend sits below the panel: it covers no line, swap-all's included
    (ax,) = fig.get_axes()
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    swap_all = df[(df["planner"] == "swap-all") & df["fits"].astype(bool)]
    assert len(lines["swap-all"].get_xdata()) == len(swap_all) > 0


def _check_04(shown):
    rob, fig = shown["rob"], shown["robustness"]
    assert_legend_clear(fig)
    # each label in its planner's colour; "slack margin 0.2" is a variant of slack (same colour)
    (ax,) = fig.get_axes()
    colours = {ln.get_label(): to_hex(ln.get_color()) for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert colours["slack"] == colours["slack margin 0.2"] == report.planner_style("slack")[0]
    assert colours["dp-checkpoint"] == report.planner_style("dp-checkpoint")[0]
    zero = rob[rob["noise"] == 0]
    assert zero["ratio_mean"].tolist() == pytest.approx(zero["nominal_ratio"].tolist(), rel=1e-12)  # nominal
    cal = shown["cal"]   # the notebook's text: the known parameters are recovered
    assert cal.values["compute_scale"] == pytest.approx(0.8, rel=5e-3)
    assert cal.values["bandwidth"] == pytest.approx(14e9, rel=5e-3)
    assert len(shown["grid"]) == 9 and shown["sensitivity"].get_axes()


CHECKS = {"01_explore_a_plan": _check_01, "02_heuristic_vs_exact": _check_02, "03_ablations": _check_03,
          "04_calibration_robustness": _check_04}
