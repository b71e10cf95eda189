"""Speed of the interactive explorer (slackswap/report/explore.py, notebook 01): one change per widget.

Run:  python benchmarks/bench_explore.py [--repeat N] [--models gpt2-xl llama-7b] [--planner slack]
Prints, per model and change, the median over N changes of the update (split into problem build,
planner, simulator and the explorer's redraw of its artists), of the PNG render the notebook
displays, and of their sum (what a change costs the reader), in wall time and in the process's
CPU time (on a shared machine the wall time grows with the load, the CPU time much less).
"explorer's own" is the update
without the planner and the simulator: what the explorer adds. Every timed change is to a
setting not seen before (a new budget each time), so the planner runs; "back to a kept setting"
times a change to one seen before (its plan is kept: only a redraw).
Changes, from the model at the planner and a budget of 0.5 - 0.01 i on repetition i:
  budget   the budget down by 0.005 (a new plan)
  planner  the planner to dp-checkpoint (a new plan)
  model    from the other model (at a budget not planned for this one) to this one (both problems
           built already: a model change after the first builds nothing)
  kept     the planner back to the previous one (a kept setting)
The first view of each model (build + plan + simulate + redraw) is timed once. The last row per
model times the alternative to a redraw: new report.timeline_figure + report.memory_figure for
the same result, rendered as the notebook's inline backend does (bbox_inches="tight").
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

from slackswap.core.errors import CapacityWarning
from slackswap.report.explore import Explorer

STAGES = ("build", "plan", "simulate", "draw")


def timed(ex: Explorer, **change) -> dict[str, float]:
    c, t = time.process_time(), time.perf_counter()
    ex.update(**change)
    c1, t1 = time.process_time(), time.perf_counter()
    ex.png()
    c2, t2 = time.process_time(), time.perf_counter()
    out = dict(ex.times, update=t1 - t, render=t2 - t1, total=t2 - t, update_cpu=c1 - c, render_cpu=c2 - c1)
    out["own"] = out["update"] - out["plan"] - out["simulate"]
    return out


def row(name: str, runs: list[dict[str, float]]) -> str:
    med = {k: statistics.median(r[k] for r in runs) * 1e3 for k in runs[0]}
    return (f"| {name} | {med['build']:.1f} | {med['plan']:.1f} | {med['simulate']:.1f} | {med['draw']:.1f} | "
            f"{med['own']:.1f} | {med['update']:.1f} | {med['render']:.1f} | {med['total']:.1f} | "
            f"{med['update_cpu']:.1f} | {med['render_cpu']:.1f} |")


def new_figures(ex: Explorer) -> tuple[float, float]:
    """Wall and CPU seconds of the alternative: new figures for the explorer's current result
    (``report.timeline_figure`` + ``report.memory_figure``), each rendered as the notebook's inline
    backend renders a figure (PNG, ``bbox_inches="tight"``)."""
    import io

    from slackswap import report

    c, t = time.process_time(), time.perf_counter()
    for fig in (report.timeline_figure(ex.result, ex.problem, planner=ex.planner),
                report.memory_figure(ex.result, ex.problem, planner=ex.planner)):
        fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    return time.perf_counter() - t, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", nargs="+", default=["gpt2-xl", "llama-7b"])
    ap.add_argument("--planner", default="slack")
    ap.add_argument("--hardware", default="a100-80gb")
    args = ap.parse_args()
    warnings.simplefilter("ignore", CapacityWarning)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; medians of {args.repeat}")
    print("| model, change | build ms | plan ms | simulate ms | redraw ms | explorer's own ms | update ms | "
          "render PNG ms | total ms | update CPU ms | render CPU ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        other = next(m for m in args.models + ["gpt2-xl", "llama-7b"] if m != model)
        t = time.perf_counter()
        ex = Explorer(model, args.hardware, budget=0.5, planner=args.planner)
        first = time.perf_counter() - t
        ex.update(model=other)
        ex.update(model=model)
        runs = {k: [] for k in ("budget", "planner", "model", "kept")}
        for i in range(args.repeat):
            b = round(0.5 - 0.01 * (i + 1), 3)
            ex.update(budget=b, planner=args.planner)
            runs["budget"].append(timed(ex, budget=round(b - 0.005, 3)))
            runs["planner"].append(timed(ex, planner="dp-checkpoint"))
            runs["kept"].append(timed(ex, planner=args.planner))
            ex.update(model=other, budget=round(b - 0.0025, 4))
            runs["model"].append(timed(ex, model=model))
        for change, r in runs.items():
            print(row(f"{model}, {change}", r))
        print(f"| {model}, first view (Explorer(...): build, plan, simulate, lay out, redraw) | | | | | | "
              f"{first * 1e3:.1f} | | | | |")
        alt = [new_figures(ex) for _ in range(args.repeat)]
        wall, cpu = (statistics.median(a[i] for a in alt) * 1e3 for i in (0, 1))
        print(f"| {model}, instead of a redraw: new timeline_figure + memory_figure, rendered as inline | | | | | | "
              f"| {wall:.1f} | | | {cpu:.1f} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
