"""Figures of calibration and robustness (report code: matplotlib only in report/).

- ``sensitivity_figure``: the throughput ratio of a planner (top row) and the certified ceiling
  (bottom row) over compute efficiency scale x link bandwidth, one column per model, with the
  published ratio's contour, the preset's point and the plausible box of ``calibrate.bounds_for``;
- ``robustness_figure``: mean and 5th-percentile throughput ratio under noise, per planner.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..calibration.calibrate import bounds_for
from ..core import hardware as hw_mod
from . import _check_figure_path, _figure, _label_styles, _save, reference_table


def _published(model: str, budget) -> float | None:
    try:
        ref = reference_table()
    except ValueError:
        return None
    hit = ref[(ref["model"] == model) & (np.isclose(ref["budget"].astype(float), float(budget)))]
    return float(hit["throughput_ratio"].iloc[0]) if len(hit) else None


def sensitivity_figure(df, hardware: str = "a100-80gb", points=None, path=None):
    """Contours of ``ratio`` and ``bound_ratio`` (``sensitivity.sensitivity_grid`` rows) over
    link bandwidth (x, GB/s, log scale) and compute efficiency scale (y). Red line: the published
    ratio for that model and budget (``data/reference/``); white circle: the preset (scale 1,
    its bandwidth); dashed box: the plausible ranges of ``calibrate.bounds_for``; ``points``:
    optional ``{model: (compute_scale, bandwidth_bytes_per_s)}`` marked with a star (e.g. a fit)."""
    _check_figure_path(path, "sensitivity_figure")

    hw = hw_mod.load(hardware)
    models = list(dict.fromkeys(df["model"]))
    rows = [("ratio", "slack throughput ratio"), ("bound_ratio", "certified ceiling")]
    rows = [r for r in rows if df[r[0]].notna().any()]
    fig, axes = _figure(len(rows), len(models), height=3.3, width=4.0)
    low = math.floor(float(np.nanmin(df[[r for r, _ in rows]].values)) * 50) / 50
    levels = np.linspace(min(low, 0.98), 1.0, int(round((1.0 - min(low, 0.98)) * 100)) + 1)
    s_lo, s_hi = bounds_for("compute_scale", hw)
    b_lo, b_hi = bounds_for("bandwidth", hw)
    for j, model in enumerate(models):
        d = df[df["model"] == model]
        xs = np.sort(d["bandwidth"].unique()) / 1e9
        ys = np.sort(d["compute_scale"].unique())
        pub = _published(model, d["budget"].iloc[0])
        for i, (col, title) in enumerate(rows):
            ax = axes[i][j]
            z = d.pivot_table(index="compute_scale", columns="bandwidth", values=col).loc[ys].values
            cf = ax.contourf(xs, ys, z, levels=levels, cmap="viridis", extend="min")
            cs = ax.contour(xs, ys, z, levels=levels[::2], colors="k", linewidths=0.3)
            ax.clabel(cs, fontsize=6, fmt="%.2f")
            if pub is not None and np.nanmin(z) < pub < np.nanmax(z):
                ax.contour(xs, ys, z, levels=[pub], colors="red", linewidths=1.8)
            ax.plot([hw.link.d2h_bytes_per_s / 1e9], [1.0], "o", mfc="white", mec="k", ms=6)
            ax.plot([b_lo / 1e9, b_hi / 1e9, b_hi / 1e9, b_lo / 1e9, b_lo / 1e9],
                    [s_lo, s_lo, s_hi, s_hi, s_lo], "w--", lw=1)
            if points and model in points:
                s, b = points[model]
                ax.plot([b / 1e9], [s], "*", color="red", mec="k", ms=11)
            ax.set_xscale("log")
            ax.set_xlim(xs.min(), xs.max())
            ax.set_ylim(ys.min(), ys.max())       # the box may reach beyond the grid: clipped
            ax.set_xticks(xs, [f"{x:g}" for x in xs], fontsize=7)
            ax.minorticks_off()
            ax.set_title(f"{model}: {title}" + (f" (paper {pub:.3f}: red)" if pub and i == 0 else ""), fontsize=8)
            ax.set_xlabel("host link bandwidth per direction (GB/s)", fontsize=8)
            if j == 0:
                ax.set_ylabel("compute efficiency scale (x preset)", fontsize=8)
    fig.colorbar(cf, ax=axes, shrink=0.8, label="throughput ratio")
    from matplotlib.lines import Line2D  # lazy: start-up cost (matplotlib)

    handles = [Line2D([], [], color="red", lw=1.8, label="published ratio (data/reference/)"),
               Line2D([], [], ls="none", marker="o", mfc="white", mec="k", label=f"preset {hardware}"),
               Line2D([], [], color="0.4", ls="--", label="plausible range (calibrate.bounds_for)")]
    if points:
        handles.append(Line2D([], [], ls="none", marker="*", color="red", mec="k", ms=10, label="fit"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    return _save(fig, path)


def robustness_figure(df, path=None, min_ratio: float = 0.5):
    """Throughput ratio under noise (``robustness.robustness_table`` rows): the mean (marked line)
    and the 5th percentile (dotted) per planner, each in its planner's colour against the noise level, one panel per model (or
    one panel when the table has no ``model`` column; with several budgets, the largest).
    Planners that did not fit, or whose nominal ratio is below ``min_ratio``, are left out."""
    _check_figure_path(path, "robustness_figure")
    d = df[df["nominal_ratio"] >= min_ratio]
    models = list(dict.fromkeys(d["model"])) if "model" in d else [None]
    fig, axes = _figure(1, len(models), height=3.4, width=4.6, sharey=True)
    base = d["planner_name"] if "planner_name" in d else d["planner"]
    styles = _label_styles(pd.DataFrame({"label": d["planner"], "planner": base}))
    for ax, model in zip(axes[0], models, strict=True):
        m = d if model is None else d[d["model"] == model]
        if "budget" in m and m["budget"].nunique() > 1:
            m = m[m["budget"] == m["budget"].max()]
        for lab, g in m.groupby("planner", sort=False):
            g = g.sort_values("noise")
            st = styles[lab]
            ax.plot(g["noise"] * 100, g["ratio_mean"], ls=st["ls"], marker=st["marker"], ms=3,
                    color=st["color"], label=lab)
            ax.plot(g["noise"] * 100, g["ratio_p5"], ls=":", color=st["color"], lw=1, label="_p5")
        budget = f", budget {m['budget'].iloc[0]}" if "budget" in m and len(m) else ""
        ax.set_title(f"{model or ''}{budget}", fontsize=9)
        ax.set_xlabel("noise level (% coefficient of variation)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("throughput ratio under noise\nmarked: mean; dotted: 5th pct.")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines() if not h.get_label().startswith("_")}
    fig.legend(handles=list(handles.values()), loc="outside lower center", ncols=min(len(handles), 7), fontsize=8)
    return _save(fig, path)
