"""Speed of the interactive explorer (slackswap/explore.py, notebook 01): one change per widget.

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
The first view of each model (build + plan + simulate + redraw) is timed once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

from slackswap.errors import CapacityWarning
from slackswap.explore import Explorer

STAGES = ("build", "plan", "simulate", "draw")


def timed(ex: Explorer, **change) -> dict[str, float]:
    c, t = time.process_time(), time.perf_counter()
    ex.update(**change)
    t1 = time.perf_counter()
    ex.png()
    t2 = time.perf_counter()
    out = dict(ex.times, update=t1 - t, render=t2 - t1, total=t2 - t, cpu=time.process_time() - c)
    out["own"] = out["update"] - out["plan"] - out["simulate"]
    return out


def row(name: str, runs: list[dict[str, float]]) -> str:
    med = {k: statistics.median(r[k] for r in runs) * 1e3 for k in runs[0]}
    return (f"| {name} | {med['build']:.1f} | {med['plan']:.1f} | {med['simulate']:.1f} | {med['draw']:.1f} | "
            f"{med['own']:.1f} | {med['update']:.1f} | {med['render']:.1f} | {med['total']:.1f} | {med['cpu']:.1f} |")


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
          "render PNG ms | total ms | total CPU ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
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
              f"{first * 1e3:.1f} | | | |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
