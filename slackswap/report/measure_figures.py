"""The figure of ``slackswap measure``: measured vs simulated step time and peak per plan
(docs/executor.md). Drawn with the helpers of ``report`` (one legend below the panels)."""

from __future__ import annotations

import math

import numpy as np

from . import _check_figure_path, _figure, _legend_below, _save

_SIMULATED, _MEASURED = "#7a9cc6", "#d08c60"


def measurement_figure(m, path=None):
    """Two panels for a ``slackswap.torch.measure_step.Measurement``: step time (ms) and peak (MiB),
    simulated beside measured for every plan it ran; on CUDA each plan's budget over its bars
    on the peak panel."""
    _check_figure_path(path, "measurement_figure")

    fig, axes = _figure(1, 2, height=3.6, width=5.0)
    x = np.arange(len(m.rows))
    names = [r.plan for r in m.rows]
    panels = (([r.sim_step_s * 1e3 for r in m.rows], [r.step_s * 1e3 for r in m.rows], "step time (ms)",
               "step time"),
              ([r.sim_peak / 2**20 for r in m.rows], [r.peak / 2**20 for r in m.rows], "MiB",
               f"peak: {m.peak_kind}"))
    for ax, (sim, got, unit, title) in zip(axes[0], panels, strict=True):
        ax.bar(x - 0.2, sim, 0.4, label="simulated", color=_SIMULATED)
        ax.bar(x + 0.2, got, 0.4, label="measured", color=_MEASURED)
        ax.set_xticks(x, names, fontsize=8, rotation=15)
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=9, wrap=True)
    if m.device.startswith("cuda"):
        # each plan's own budget over its pair of bars (slack@0.5 and slack@0.3 differ; the
        # baselines are judged by the first budget)
        marks = [(i, r.budget_bytes / 2**20) for i, r in enumerate(m.rows) if math.isfinite(r.budget_bytes)]
        if marks:
            axes[0][1].hlines([b for _, b in marks], [i - 0.45 for i, _ in marks],
                              [i + 0.45 for i, _ in marks], color="k", ls="--", lw=1.2,
                              label="budget (each plan's)")
    _legend_below(fig, *axes[0][1].get_legend_handles_labels(), ncols=3)
    fig.suptitle(f"{m.model} on {m.device}: measured vs simulated", fontsize=10)
    return _save(fig, path)


__all__ = ["measurement_figure"]
