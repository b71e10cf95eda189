"""Reports: tables (markdown / LaTeX / CSV) and figures from sweep rows (docs/experiments.md, "Reports").

The only module that imports matplotlib. Figures are ``matplotlib.figure.Figure`` objects built
without pyplot (no global state, no display needed: the Agg canvas renders them); they are saved
only when a ``path`` is given.

Tables take the DataFrame of ``experiments.sweep``:

- ``published_table``: the paper's throughput ratios (``data/reference/slackswap_paper.csv``,
  arXiv 2610.13003, A100 + PCIe 4.0, budget 50%) beside ours, with the difference;
- ``gap_table``: each planner's step time over the MILP optimum and over the lower bound;
- ``ablation_table``: one value (default throughput ratio), one row per full setting, one column
  per variant;
- ``optimality_table``: heuristics beside the ``milp`` planner's plan, its certified ceiling and
  proven gap;
- ``capacity_notes``: the runs whose static memory plus budget exceed the GPU's memory.
"""

from __future__ import annotations

import math
import zlib

from ..core.errors import ConfigError, ParameterError, SlackSwapError
from ..core.paths import check_output, data_dir, prepare_output, user_path
from ..core.plan import Decision
from ..core.schema import check_type
from ..core.units import format_bytes, format_seconds
from ..experiments.gaps import FAMILIES, family_key
from ..timeline import SimResult
from ..timeline.problem import Problem
from .tables import (  # noqa: F401 - re-exported: report is the tables' public home
    AGGREGATIONS,
    SETTINGS,
    ablation_table,
    capacity_notes,
    optimality_table,
    setting_index,
)

REFERENCE = "reference/slackswap_paper.csv"
HEURISTICS = ("slack", "capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers",
              "swap-all", "recompute-all", "keep-all")


# ---------------------------------------------------------------- tables
def reference_table(path=None):
    """The published numbers (columns model, hardware, budget, throughput_ratio, tolerance, source)."""
    import pandas as pd  # lazy: start-up cost (pandas)

    p = user_path(path) if path is not None else data_dir() / REFERENCE
    if not p.exists():
        raise ConfigError(f"reference: {p} does not exist (the paper's table)")
    ref = pd.read_csv(p)
    need = {"model", "hardware", "budget", "throughput_ratio", "tolerance", "source"}
    if not need <= set(ref.columns):
        raise ConfigError(f"reference {p.name}: missing columns {sorted(need - set(ref.columns))}")
    return ref


def _budget_key(s):
    return s.astype(float).round(4)


def published_table(df, planner: str = "slack", reference=None):
    """Paper value beside ours for every published (model, hardware, budget) found in ``df``
    (rows of ``planner``; label ``planner`` first). Columns: model, hardware, budget, paper, ours,
    difference (ours - paper), tolerance, within (|difference| <= tolerance), source."""
    import pandas as pd  # lazy: start-up cost (pandas)

    ref = reference_table(reference)
    ours = df[df["planner"] == planner].copy()
    ours = ours.sort_values("label", key=lambda s: s != planner, kind="stable")
    ours["_b"] = _budget_key(ours["budget"])
    ours = ours.drop_duplicates(["model", "hardware", "_b"])
    ref = ref.copy()
    ref["_b"] = _budget_key(ref["budget"])
    m = ref.merge(ours[["model", "hardware", "_b", "throughput_ratio", "status"]], how="inner",
                  on=["model", "hardware", "_b"], suffixes=("_paper", ""))
    out = pd.DataFrame({
        "model": m["model"], "hardware": m["hardware"], "budget": m["budget"],
        "paper": m["throughput_ratio_paper"], "ours": m["throughput_ratio"],
        "difference": m["throughput_ratio"] - m["throughput_ratio_paper"], "tolerance": m["tolerance"],
    })
    out["within"] = out["difference"].abs() <= out["tolerance"]
    out["source"] = m["source"]
    return out.reset_index(drop=True)


def gap_table(df, summary: bool = False):
    """Every non-MILP run's throughput ratio, its gap to the MILP optimum and to the lower bound
    (step / reference - 1; 0 = optimal). With ``summary``, per label: runs, mean and max gaps."""
    import pandas as pd  # lazy: start-up cost (pandas)

    d = df[(df["planner"] != "milp") & df["fits"].astype(bool)]
    cols = ["model", "hardware", "budget", "label", "throughput_ratio", "gap_to_milp", "gap_to_bound"]
    t = d[cols].reset_index(drop=True)
    if not summary:
        return t
    g = t.groupby("label", sort=False)
    return pd.DataFrame({"runs": g.size(), "mean_gap_to_milp": g["gap_to_milp"].mean(),
                         "max_gap_to_milp": g["gap_to_milp"].max(),
                         "mean_gap_to_bound": g["gap_to_bound"].mean(),
                         "max_gap_to_bound": g["gap_to_bound"].max()}).reset_index()


# ---------------------------------------------------------------- table formats
def _cell(v, floatfmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else format(v, floatfmt)
    try:
        import pandas as pd  # lazy: start-up cost (pandas)

        if v is pd.NA:
            return ""
    except ImportError:  # pragma: no cover
        pass
    return str(v)


def _rows(df, floatfmt):
    return [[_cell(v.item() if hasattr(v, "item") else v, floatfmt) for v in row]
            for row in df.itertuples(index=False, name=None)]


def to_markdown(df, floatfmt: str = ".4f", path=None) -> str:
    """A GitHub markdown table (numbers right-aligned); written to ``path`` when given."""
    _check_path(path, "to_markdown")
    import pandas as pd  # lazy: start-up cost (pandas)

    heads = [str(c) for c in df.columns]
    rows = _rows(df, floatfmt)
    width = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    num = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, width, num, strict=True)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2)) for w, n in zip(width, num, strict=True)) + "|"
    text = "\n".join([line(heads), sep, *(line(r) for r in rows)]) + "\n"
    if path is not None:
        _write(text, path)
    return text


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def to_latex(df, floatfmt: str = ".4f", caption: str | None = None, path=None) -> str:
    """A booktabs ``tabular`` (special characters escaped); written to ``path`` when given."""
    _check_path(path, "to_latex")
    import pandas as pd  # lazy: start-up cost (pandas)

    def esc(s: str) -> str:
        return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in s)

    align = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
                    else "l" for c in df.columns)
    lines = [r"\begin{table}[t]", r"\centering"] if caption else []
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(esc(str(c)) for c in df.columns) + r" \\",
              r"\midrule"]
    lines += [" & ".join(esc(c) for c in r) + r" \\" for r in _rows(df, floatfmt)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines += [rf"\caption{{{esc(caption)}}}", r"\end{table}"]
    text = "\n".join(lines) + "\n"
    if path is not None:
        _write(text, path)
    return text


def to_csv(df, path=None) -> str:
    """CSV text (no index); written to ``path`` when given."""
    _check_path(path, "to_csv")
    text = df.to_csv(index=False)
    if path is not None:
        _write(text, path)
    return text


# ---------------------------------------------------------------- figures
# One colour and marker per planner, the same in every panel and every figure (tab10 for the
# heuristics and baselines, black and grey for the exact planners). Variants of one planner
# (labels other than the planner's name) keep its colour and marker and differ by line style.
PLANNER_STYLE = {
    "slack": ("#1f77b4", "o"), "capuchin": ("#ff7f0e", "s"), "dp-checkpoint": ("#2ca02c", "^"),
    "chen-greedy": ("#d62728", "v"), "chen-sqrt": ("#9467bd", "D"), "checkpoint-layers": ("#8c564b", "<"),
    "swap-all": ("#e377c2", ">"), "recompute-all": ("#bcbd22", "p"), "keep-all": ("#17becf", "h"),
    "milp": ("#000000", "*"), "brute": ("#7f7f7f", "X"),
}
_OTHER_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")
_OTHER_MARKERS = ("P", "d", "H", "8")
_VARIANT_LINESTYLES = ("--", ":", "-.", (0, (5, 1, 1, 1)))
_LEGEND_FONTSIZE = 8


def planner_style(planner: str) -> tuple[str, str]:
    """(colour, marker) of ``planner``: fixed for the toolkit's planners (``PLANNER_STYLE``); for
    any other name a choice that depends only on the name, so it too is the same in every figure."""
    if planner in PLANNER_STYLE:
        return PLANNER_STYLE[planner]

    h = zlib.crc32(planner.encode())
    return _OTHER_COLORS[h % len(_OTHER_COLORS)], _OTHER_MARKERS[h // len(_OTHER_COLORS) % len(_OTHER_MARKERS)]


def _label_styles(df) -> dict[str, dict]:
    """Line keywords per label of ``df`` (in sweep order): its planner's colour and marker; a solid
    line for the planner itself, a dashed or dotted one for each other label of the same planner."""
    pairs = dict.fromkeys(zip(df["label"], df["planner"], strict=True))
    out, variants = {}, {}
    for label, planner in pairs:
        if label in out:
            continue
        color, marker = planner_style(planner)
        if label == planner:
            ls = "-"
        else:
            i = variants[planner] = variants.get(planner, -1) + 1
            ls = _VARIANT_LINESTYLES[i % len(_VARIANT_LINESTYLES)]
        out[label] = dict(color=color, marker=marker, ls=ls)
    return out


def _figure(nrows: int = 1, ncols: int = 1, height: float = 3.5, width: float = 6.0, **kw):
    from matplotlib.figure import Figure  # lazy: start-up cost (matplotlib)

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _legend_below(fig, handles, labels, ncols: int):
    """The figure's one legend, below every panel (it covers no data); at most ``ncols`` columns,
    fewer when the labels would not fit the figure's width."""
    column_in = 0.8 + 0.07 * max(map(len, labels), default=0) * _LEGEND_FONTSIZE / 10
    ncols = max(1, min(ncols, len(labels), int(fig.get_figwidth() / column_in)))
    return fig.legend(handles, labels, loc="outside lower center", ncols=ncols,
                      fontsize=_LEGEND_FONTSIZE, frameon=False)


def _check_path(path, fn: str) -> None:
    """Check an output ``path`` of ``fn`` as the command line checks its outputs (one line naming
    ``fn(path)``), before any work; None: nothing is written."""
    if path is not None:
        check_output(path, f"{fn}(path)")


def check_figure(path, option: str) -> None:
    """``check_output`` of a figure's path plus a file type matplotlib can write (by the suffix);
    ``option`` names it in the one-line error (``--figure``, ``timeline_figure(path)``)."""
    check_output(path, option)
    from matplotlib.figure import Figure  # lazy: start-up cost (matplotlib)

    kinds = Figure().canvas.get_supported_filetypes()
    suffix = user_path(path).suffix.lstrip(".").lower()
    if suffix not in kinds:
        raise SlackSwapError(f"{option}: cannot write a figure as {suffix or 'a file without a suffix'!r} "
                             f"({path}); allowed suffixes: {', '.join(sorted(kinds))}")


def _check_figure_path(path, fn: str) -> None:
    if path is not None:
        check_figure(path, f"{fn}(path)")


def _write(text: str, path) -> None:
    if path is not None:
        prepare_output(path).write_text(text)


def _save(fig, path):
    if path is not None:
        fig.savefig(prepare_output(path), dpi=120)
    return fig


def pareto_figure(df, value: str = "throughput_ratio", path=None):
    """Throughput ratio against budget, one line per planner label, one panel per model
    (the Pareto view: how much memory can be saved at what throughput). Runs that do not fit
    are left out of their line. Each planner has the same colour and marker in every panel
    (``planner_style``); one legend below the panels names every label."""
    _check_figure_path(path, "pareto_figure")
    from matplotlib.lines import Line2D  # lazy: start-up cost (matplotlib)

    models = list(dict.fromkeys(df["model"]))
    fig, axes = _figure(1, max(1, len(models)), height=3.6, width=4.8, sharey=True)
    styles = _label_styles(df)
    for ax, model in zip(axes[0], models, strict=False):
        d = df[(df["model"] == model) & df["fits"].astype(bool)]
        for label, st in styles.items():
            s = d[d["label"] == label].sort_values("budget")
            if len(s):
                ax.plot(s["budget"], s[value], ms=4, label=label, **st)
        ax.set_title(model)
        ax.set_xlabel("activation budget (fraction of keep-all peak)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(value.replace("_", " "))
    handles = [Line2D([], [], ms=4, **st) for st in styles.values()]
    _legend_below(fig, handles, list(styles), ncols=8)
    return _save(fig, path)


# event kind -> (legend name, colour); copies alternate between the colour and a lighter shade so
# that back-to-back copies on a busy link stay separate bars
def gap_figure(df, path=None):
    """The gap study of ``experiments.gaps.compare``'s rows: mean (top row) and worst (bottom row) gap to the optimum in percent against budget level,
    link speed and graph shape; one line per variant in its planner's colour
    (``report.planner_style``; variants of one planner differ by line style)."""
    _check_figure_path(path, "gap_figure")
    from matplotlib.lines import Line2D  # lazy: start-up cost (matplotlib)


    d = df[df["optimum_s"].notna()]
    styles = _label_styles(d)
    fig, axes = _figure(2, 3, height=2.6, width=3.6, sharey="row")
    for j, fam in enumerate(FAMILIES):
        dd = d.assign(bin=family_key(d, fam))
        bins = sorted(set(dd["bin"]), key=lambda b: (fam == "link" and tuple(map(float, b.split(" + "))), b))
        for label, st in styles.items():
            g = dd[dd["label"] == label].groupby("bin")["gap"]
            mean, worst = g.mean().reindex(bins) * 100, g.max().reindex(bins) * 100
            x = range(len(bins))
            axes[0][j].plot(x, mean, ms=4, label=label, **st)
            axes[1][j].plot(x, worst, ms=4, label=label, **st)
        for i in (0, 1):
            ax = axes[i][j]
            ax.set_xticks(range(len(bins)), bins, rotation=30 if fam == "link" else 0, fontsize=7)
            ax.grid(alpha=0.3)
        axes[1][j].set_xlabel(FAMILIES[fam])
    axes[0][0].set_ylabel("mean gap (%)")
    axes[1][0].set_ylabel("worst gap (%)")
    _legend_below(fig, [Line2D([], [], ms=4, **st) for st in styles.values()], list(styles), ncols=4)
    return _save(fig, path)


_KINDS = {"fwd": ("forward", "#4c72b0"), "rec": ("recompute", "#dd8452"), "bwd": ("backward", "#55a868"),
          "opt": ("optimizer", "#8172b3"), "d2h": ("swap out (D2H)", "#c44e52"),
          "h2d": ("swap in (H2D)", "#937860")}
_COPY_KINDS = ("d2h", "h2d")
_STREAMS = ("compute", "d2h", "h2d")
_MEMORY_COLOR, _BUDGET_COLOR = "#333333", "#c44e52"


def _lighter(color: str, f: float = 0.45):
    from matplotlib.colors import to_rgb  # lazy: start-up cost (matplotlib)

    return tuple(c + (1 - c) * f for c in to_rgb(color))


def _time_unit(t: float) -> tuple[str, float]:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= scale:
            return unit, scale
    return "ns", 1e-9


def _byte_unit(b: float) -> tuple[str, float]:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return unit, scale
    return "B", 1.0


def _memory_axes(ax, result, problem, ts: float, color: str):
    """The activation-memory step curve and the budget line on ``ax`` (times scaled by ``ts``)."""
    budget = problem.budget_bytes if problem is not None else result.budget_bytes
    top = max([float(max(result.memory_bytes, default=0))] + ([budget] if math.isfinite(budget) else []))
    bu, bs = _byte_unit(top)
    ax.step(result.memory_times / ts, result.memory_bytes / bs, where="post", color=color,
            label="activation memory")
    if math.isfinite(budget):
        ax.axhline(budget / bs, color=_BUDGET_COLOR, ls="--", label=f"budget {format_bytes(budget)}")
    ax.set_ylim(-0.03 * top / bs, 1.08 * top / bs if top > 0 else 1)  # zero and the budget off the frame
    ax.set_ylabel(f"activations ({bu})")
    ax.grid(alpha=0.3)


def _figure_args(fn: str, result, problem) -> None:
    """Refuse swapped or wrong arguments: ``fn(result, problem=None)``."""

    check_type(result, SimResult, f"{fn}(result)", "a SimResult (simulate(problem, plan)); the "
               "order is (result, problem)", ParameterError)
    if problem is not None:
        check_type(problem, Problem, f"{fn}(problem)", "a Problem or None", ParameterError)


def timeline_figure(result, problem=None, path=None, title: str | None = None, planner: str | None = None):
    """Gantt chart of one simulated step (``simulate(problem, plan, detail=True)``): one row per
    engine (compute, D2H, H2D), one bar per event coloured by kind; each copy is its own bar
    (consecutive copies alternate two shades). Below it the activation-memory curve with the
    budget line (docs/timeline.md, "Memory and the budget"); the title above, one legend below. With ``planner``
    the title names it and the memory curve takes its colour (``planner_style``)."""
    _figure_args("timeline_figure", result, problem)
    _check_figure_path(path, "timeline_figure")
    result.require_detail("timeline_figure")
    if not result.events:
        raise ConfigError("timeline_figure: the result has no events; simulate with detail=True")
    end = max(e.end for e in result.events)
    tu, ts = _time_unit(end)
    fig, axes = _figure(2, 1, height=2.6, width=9.0, sharex=True)
    gantt, mem = axes[0][0], axes[1][0]
    for kind, (name, color) in _KINDS.items():
        ev = sorted((e for e in result.events if e.kind == kind), key=lambda e: e.start)
        if not ev:
            continue
        colors = [color if i % 2 == 0 or kind not in _COPY_KINDS else _lighter(color) for i in range(len(ev))]
        gantt.barh([_STREAMS.index(e.stream) for e in ev], [(e.end - e.start) / ts for e in ev],
                   left=[e.start / ts for e in ev], height=0.6, color=colors, label=name, linewidth=0)
    gantt.set_yticks(range(len(_STREAMS)), ["compute", "D2H", "H2D"])
    gantt.set_ylim(len(_STREAMS) - 0.5, -0.5)  # every lane, top down, even an idle one
    _memory_axes(mem, result, problem, ts, planner_style(planner)[0] if planner else _MEMORY_COLOR)
    mem.set_xlabel(f"time ({tu})")
    h1, l1 = gantt.get_legend_handles_labels()
    h2, l2 = mem.get_legend_handles_labels()
    _legend_below(fig, h1 + h2, l1 + l2, ncols=4)
    head = f"{planner}: " if planner else ""
    fig.suptitle(title or (f"{head}step {format_seconds(result.step_time_s)}, throughput ratio "
                           f"{result.throughput_ratio:.3f}, peak {format_bytes(result.peak_bytes)}"), fontsize=10)
    return _save(fig, path)


def memory_figure(result, problem=None, path=None, planner: str | None = None):
    """The activation-memory curve alone, with the budget line (the curve in ``planner``'s colour
    when given); the legend below the axes."""
    _figure_args("memory_figure", result, problem)
    result.require_detail("memory_figure")
    _check_figure_path(path, "memory_figure")
    fig, axes = _figure(1, 1, height=3.0, width=8.0)
    ax = axes[0][0]
    tu, ts = _time_unit(max(float(max(result.memory_times, default=0)), 1e-12))
    _memory_axes(ax, result, problem, ts, planner_style(planner)[0] if planner else _MEMORY_COLOR)
    ax.set_xlabel(f"time ({tu})")
    _legend_below(fig, *ax.get_legend_handles_labels(), ncols=2)
    return _save(fig, path)


# ---------------------------------------------------------------- text
def plan_summary(problem, plan, result) -> list[str]:
    """Human-readable lines: the plan's decisions (count, bytes) and its simulated result."""

    lines = [f"plan: {plan.planner} {dict(plan.params)}  status {plan.info.status.value}  solve "
             f"{format_seconds(plan.info.wall_s)}" + (f"  ({plan.info.message})" if plan.info.message else "")]
    for d in Decision:
        ids = plan.ids(d)
        lines.append(f"  {d.value:<9} {len(ids):>5} tensors  {format_bytes(sum(problem.graph.tensors[t].bytes for t in ids))}")
    if plan.hold_points:
        lines.append(f"  hold points {len(plan.hold_points)} (multi-level recompute: regenerated tensors freed and "
                     "rebuilt again, docs/timeline.md, \"Backward: recompute, prefetch, gradients\")")
    r = result
    if not r.feasible:
        return lines + [f"simulated: INFEASIBLE: {r.reason}"]
    return lines + [
        f"simulated step {format_seconds(r.step_time_s)} (ideal {format_seconds(r.ideal_step_time_s)}): "
        f"throughput ratio {r.throughput_ratio:.4f}",
        f"  peak activations {format_bytes(r.peak_bytes)} of budget {format_bytes(problem.budget_bytes)} "
        f"({'fits' if r.fits else 'DOES NOT FIT'}); static {format_bytes(problem.static_bytes)}",
        f"  stall {format_seconds(r.stall_s)} (fwd {format_seconds(r.stall_fwd_s)}, bwd "
        f"{format_seconds(r.stall_bwd_s)}), recompute {format_seconds(r.recompute_s)}, "
        f"swapped {format_bytes(r.swapped_bytes)} each way"] + ([
        f"  pipeline (1F1B): {r.microbatches} micro-batches, up to {r.in_flight} in flight, "
        f"bubble {format_seconds(r.bubble_s)} (waits for the other stages)"] if r.microbatches > 1 else []) \
        + _host_lines(problem, r)


def _host_lines(problem, r) -> list[str]:
    """One line on the host's share when the hardware has a node and the plan swaps."""
    hw = getattr(problem, "hardware", None)
    node = getattr(hw, "node", None)
    if node is None or not r.swapped_bytes:
        return []
    gpus = 1 if problem.parallel is None else problem.parallel.gpus
    n = node.copying(gpus)
    link = hw.copy_link(gpus)
    return [f"  host: {n} GPU(s) of the node copy at once, {node.per_switch(gpus)} per switch: "
            f"{link.d2h_bytes_per_s / 1e9:g} GB/s per direction each (the link alone: {hw.link.d2h_bytes_per_s / 1e9:g} GB/s); "
            f"{format_bytes(r.host_peak_bytes)} held on the host at once per GPU, "
            f"{format_bytes(n * r.host_peak_bytes)} of {format_bytes(node.pinned_capacity_bytes)} pinned"]


def humanize(df):
    """A copy with human units as strings: ``*_s`` columns in s/ms/us, ``*_bytes`` in GiB/MiB,
    ratios to 4 decimals, gaps in percent; empty where missing."""

    def fmt(col, v):
        if v is None or v is _NA or (isinstance(v, float) and math.isnan(v)):
            return ""
        if col.endswith("_s"):
            return format_seconds(v)
        if col.endswith("_bytes"):
            return format_bytes(v)
        if col.startswith("gap"):
            return f"{100 * v:.2f}%"
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    out = df.copy().astype(object)
    for c in out.columns:
        out[c] = [fmt(str(c), v.item() if hasattr(v, "item") else v) for v in df[c]]
    return out


try:
    from pandas import NA as _NA
except ImportError:  # pragma: no cover
    _NA = None
