"""The SlackSwap advantage on pipelined stages of published configurations (docs/parallel.md,
"The sweep: pipeline depth, micro-batches and GPUs per switch").

    python benchmarks/parallel_sweep.py                  # the full sweep -> benchmarks/results/parallel-sweep.csv
    python benchmarks/parallel_sweep.py --quick --out /tmp/q.csv      # a CI-sized sweep on tiny
    python benchmarks/parallel_sweep.py --figure docs/figures/parallel-sweep.png   # draw the CSV

Each case is a model on a GPU under a published parallel setting (data/parallel/): the first
pipeline stage (stage 0, which holds the most micro-batches in flight under 1F1B) at a budget of
``--budget`` (0.5) of that stage's keep-all peak (its 1F1B timeline's). One axis at a time moves away from the
published setting, the others stay as published:

* ``pp``: the pipeline depth (the number of stages; it must divide the layers), with the
  published micro-batch count (at least ``pp``);
* ``microbatches``: micro-batches per step and pipeline, at the published depth (a count the setting refuses, or
  a budget below the smallest feasible one, gives a row that says so);
* ``stage``: the planned stage ``s``, which holds ``pp - s`` micro-batches in flight under 1F1B
  (the first stage the most), at the published depth and micro-batch count (the budget is then
  0.5 of that stage's own keep-all peak);
* ``GPUs per switch``: how many GPUs of the node share one PCIe switch's uplink to the host
  (``Hardware.with_node(gpus_per_switch=g)``, docs/hardware.md, "The node: GPUs sharing a
  host"), at the published pipeline. ``llama-2-7b-fsdp-8gpu`` (no pipeline) is swept on this
  axis only.

Per row: the throughput ratio (ideal step / simulated step, 0 when the plan does not fit) of
``slack``; of the best recompute-only plan (``dp-checkpoint``, ``checkpoint-layers`` and ``slack``
with ``mode="recompute_only"``: the best of them); of the best offload-only plan (``swap-all`` and
``slack`` with ``mode="swap_only"``); the certified ceiling ``ideal / lower_bound(problem)`` (no
plan has a higher ratio, ``slackswap.bounds``); and slack's advantage over the better of the two
single-technique plans, ``slack / max(recompute-only, offload-only) - 1``. Ratios come from the
simulator and do not depend on the machine; wall times do (the CSV's note).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from slackswap import Problem, planners, simulate
from slackswap.bounds import lower_bound
from slackswap.core import hardware as hw_mod
from slackswap.core.errors import SlackSwapError
from slackswap.core.paths import check_output
from slackswap.models import parallel as par_mod

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "parallel-sweep.csv"

#: single-technique plans: the best of each list counts (``(planner, parameters)``)
RECOMPUTE_ONLY = (("dp-checkpoint", {}), ("checkpoint-layers", {}), ("slack", {"mode": "recompute_only"}))
OFFLOAD_ONLY = (("swap-all", {}), ("slack", {"mode": "swap_only"}))
COLUMNS = ("case", "axis", "pp", "microbatches", "stage", "in flight", "GPUs per switch", "copy link (GB/s)",
           "static + budget (GiB)", "slack", "recompute-only", "offload-only", "ceiling", "advantage")
AXES = ("pp", "microbatches", "stage", "GPUs per switch")


@dataclass(frozen=True)
class Case:
    """A model on a GPU under a parallel setting, and the values of each axis to sweep."""

    label: str
    model: str
    hardware: str
    parallel: str | dict
    pp: tuple[int, ...] = ()
    microbatches: tuple[int, ...] = ()
    stages: tuple[int, ...] = ()
    switch: tuple[int, ...] = (1, 2, 4, 8)
    overrides: dict = field(default_factory=dict)


FULL = (
    Case("gpt3-175b-tp8-pp8", "gpt3-175b", "a100-80gb", "gpt3-175b-tp8-pp8",
         pp=(4, 8, 12, 16, 24), microbatches=(8, 16, 32, 64, 128), stages=(0, 2, 4, 6, 7)),
    Case("llama-2-70b-tp4-pp4", "llama-2-70b", "h100-sxm", "llama-2-70b-tp4-pp4",
         pp=(2, 4, 8, 16), microbatches=(4, 8, 16, 32, 64), stages=(0, 1, 2, 3)),
    Case("llama-2-7b-fsdp-8gpu", "llama-2-7b", "a100-80gb", "llama-2-7b-fsdp-8gpu"),
)
#: CI-sized: tiny with 24 layers (a stage of more than 64 planning tensors: slack skips its small-problem search), tensor 2 with sequence parallelism, pipeline 2
QUICK = (
    Case("tiny-tp2-pp2", "tiny", "a100-80gb", {"tp": 2, "sp": True, "pp": 2, "microbatches": 4},
         pp=(2, 3), microbatches=(2, 4), stages=(0, 1), switch=(1, 4), overrides={"layers": 24}),
)


def settings(case: Case):
    """``(axis, Parallel, gpus_per_switch)`` of every row of ``case``: one axis at a time."""
    base = par_mod.as_parallel(case.parallel)
    default_switch = hw_mod.load(case.hardware).node.gpus_per_switch
    for pp in case.pp:
        yield "pp", dict(pp=pp, microbatches=max(base.microbatches, pp)), default_switch
    for m in case.microbatches:
        yield "microbatches", dict(microbatches=m), default_switch
    for st in case.stages:
        yield "stage", dict(stage=st), default_switch
    for g in case.switch:
        yield "GPUs per switch", {}, g


def best(problem, candidates) -> tuple[float, str]:
    """The highest throughput ratio among ``candidates`` (0 if none fits) and its planner."""
    top, name = 0.0, "none fits"
    for planner, params in candidates:
        try:
            plan = planners.get(planner, **params).plan(problem)
        except SlackSwapError:        # e.g. a chain-only planner on a graph that is no chain
            continue
        r = simulate(problem, plan, detail=False)
        ratio = r.throughput_ratio if r.fits else 0.0
        if ratio > top:
            label = planner + "".join(f" {k}={v}" for k, v in params.items())
            top, name = ratio, label
    return top, name


def in_flight(problem, parallel) -> int:
    """Micro-batches whose activations stage ``parallel.stage`` holds at once under 1F1B."""
    from slackswap.timeline.pipeline import pipeline_of

    pipe = pipeline_of(problem)
    return 1 if pipe is None else pipe.in_flight


def run_row(case: Case, axis: str, changes: dict, switch: int, budget: float) -> dict:
    base = par_mod.as_parallel(case.parallel)
    row = {"case": case.label, "axis": axis, "GPUs per switch": switch}
    try:
        parallel = base.replace(**changes)
    except SlackSwapError as exc:
        return {**row, **changes, "note": str(exc)}
    hw = hw_mod.load(case.hardware).with_node(gpus_per_switch=switch)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")    # capacity warnings go into the row
            p = Problem.build(case.model, hw, budget=budget, parallel=parallel, **case.overrides)
    except SlackSwapError as exc:              # e.g. a budget below the smallest feasible one
        return {**row, "pp": parallel.pp, "microbatches": parallel.microbatches, "stage": parallel.stage,
                "note": str(exc)}
    row.update({"pp": parallel.pp, "microbatches": parallel.microbatches, "stage": parallel.stage,
                "in flight": in_flight(p, parallel),
                "copy link (GB/s)": hw.copy_link(parallel.gpus).d2h_bytes_per_s / 1e9,
                "static + budget (GiB)": (p.static_bytes + p.budget_bytes) / 2**30,
                "warning": "; ".join(p.memory_warnings)})
    t0 = time.perf_counter()
    s = simulate(p, planners.get("slack").plan(p), detail=False)
    row["slack"] = s.throughput_ratio if s.fits else 0.0
    row["recompute-only"], row["recompute-only planner"] = best(p, RECOMPUTE_ONLY)
    row["offload-only"], row["offload-only planner"] = best(p, OFFLOAD_ONLY)
    lb = lower_bound(p)[0]
    row["ceiling"] = p.ideal_step_s / lb if lb > 0 else 1.0
    other = max(row["recompute-only"], row["offload-only"])
    row["advantage"] = row["slack"] / other - 1 if other > 0 else math.inf
    row["wall_s"] = time.perf_counter() - t0
    return row


def sweep(cases, budget: float = 0.5, log=None) -> list[dict]:
    rows = []
    for case in cases:
        for axis, changes, switch in settings(case):
            row = run_row(case, axis, changes, switch, budget)
            rows.append(row)
            if log:
                log(format_row(row))
    return rows


def _ratio(x) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def format_row(row: dict) -> list[str]:
    """The CSV cells of one row (a setting refused or below the floor keeps only its note)."""
    if "slack" not in row:
        cells = [str(row.get(c, "")) for c in COLUMNS[:9]]
        return cells + ["not run: " + row["note"], "", "", "", ""]
    adv = row["advantage"]
    cells = [row["case"], row["axis"], str(row["pp"]), str(row["microbatches"]), str(row["stage"]),
             str(row["in flight"]), str(row["GPUs per switch"]), f"{row['copy link (GB/s)']:.2f}",
             f"{row['static + budget (GiB)']:.2f}", _ratio(row["slack"]),
             f"{_ratio(row['recompute-only'])} ({row['recompute-only planner']})",
             f"{_ratio(row['offload-only'])} ({row['offload-only planner']})", _ratio(row["ceiling"]),
             "only slack fits" if math.isinf(adv) else f"{100 * adv:+.1f}%"]
    return cells


def write_csv(rows, path: Path, command: str, seconds: float, budget: float = 0.5) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    warned = [f"{r['case']} {r['axis']} = {r[r['axis']]}" for r in rows if r.get("warning")]
    note = (f"{seconds:.0f} s in all; budget {budget} of the planned stage's keep-all peak; throughput ratio, "
            f"0 = does not fit; advantage = slack / max(recompute-only, offload-only) - 1")
    if warned:
        note += "; static memory plus the budget exceed the GPU's memory (a capacity warning) on: " + ", ".join(warned)
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(f"# date: {datetime.date.today().isoformat()}\n")
        fh.write("# machine: 2-core development machine (shared with other jobs)\n")
        fh.write(f"# command: {command}\n")
        fh.write(f"# note: {note}\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(format_row(r))


def read_csv(path: Path) -> list[dict]:
    """The rows of a sweep CSV, ratios as floats (a refused row has none)."""
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
    out = []
    for rec in csv.DictReader(lines):
        if rec["slack"].startswith("not run"):
            continue
        row = dict(rec)
        for c in ("slack", "recompute-only", "offload-only", "ceiling"):
            row[c] = float(rec[c].split(" ")[0])
        for c in ("pp", "microbatches", "stage", "in flight", "GPUs per switch"):
            row[c] = int(rec[c])
        out.append(row)
    return out


def figure(rows: list[dict]):
    """One column per axis, one colour per case. Top: the throughput ratios, slack solid,
    recompute-only dashed, offload-only dotted, the certified ceiling thin. Bottom: slack's
    advantage over the better single-technique plan, in percent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["case"] for r in rows))
    colours = dict(zip(cases, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    fig, grid = plt.subplots(2, len(AXES), figsize=(15, 6.4), sharey="row", sharex="col",
                             gridspec_kw={"height_ratios": (3, 2)})
    styles = (("slack", "-", "o"), ("recompute-only", "--", "s"), ("offload-only", ":", "^"))
    for (top, bottom), axis in zip(grid.T, AXES, strict=True):
        for case in cases:
            pts = sorted((r for r in rows if r["case"] == case and r["axis"] == axis), key=lambda r: r[axis])
            if not pts:
                continue
            x = [r[axis] for r in pts]
            for col, ls, mk in styles:
                top.plot(x, [r[col] for r in pts], ls=ls, marker=mk, ms=4, color=colours[case], label=f"{case}: {col}")
            top.plot(x, [r["ceiling"] for r in pts], color=colours[case], lw=3, alpha=0.25,
                     label=f"{case}: certified ceiling")
            adv = [100 * (r["slack"] / max(r["recompute-only"], r["offload-only"]) - 1) for r in pts]
            bottom.plot(x, adv, marker="o", ms=4, color=colours[case], label=f"{case}: advantage")
        top.set_title(f"axis: {axis}")
        bottom.axhline(0, color="grey", lw=0.8)
        if axis != "stage":
            bottom.set_xscale("log", base=2)
        bottom.set_xlabel({"pp": "pipeline depth (stages)", "microbatches": "micro-batches per step",
                           "stage": "planned stage (in flight: pp - stage)",
                           "GPUs per switch": "GPUs sharing a PCIe switch"}[axis])
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    grid[0, 0].set_ylabel("throughput ratio (ideal / step)")
    grid[1, 0].set_ylabel("slack's advantage (%)")
    seen: dict[str, object] = {}
    for ax in grid[0]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the CI-sized sweep on tiny")
    ap.add_argument("--budget", type=float, default=0.5, help="fraction of the stage's keep-all peak")
    ap.add_argument("--out", type=Path, default=None, help=f"CSV to write (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--figure", type=Path, default=None, help="draw the CSV (--out or the default) into this PNG")
    a = ap.parse_args(argv)
    if not (0 < a.budget <= 1) or math.isnan(a.budget):
        print(f"parallel_sweep: error: --budget: must be in (0, 1]; got {a.budget}", file=sys.stderr)
        return 2
    out = a.out or OUT
    try:   # every output checked before the work (one line, as the command line does)
        check_output(a.figure or out, "--figure" if a.figure else "--out")
    except SlackSwapError as exc:
        print(f"parallel_sweep: error: {exc}", file=sys.stderr)
        return 2
    if a.figure:
        try:
            rows = read_csv(out)
        except OSError as exc:
            print(f"parallel_sweep: error: --out: cannot read {out}: {exc.strerror}", file=sys.stderr)
            return 2
        except (KeyError, ValueError, IndexError) as exc:
            print(f"parallel_sweep: error: --out: {out} is not a sweep CSV of this script ({exc!r})", file=sys.stderr)
            return 2
        fig = figure(rows)
        fig.savefig(a.figure, dpi=110)
        print(f"wrote {a.figure}")
        return 0
    t0 = time.perf_counter()
    rows = sweep(QUICK if a.quick else FULL, a.budget, log=lambda cells: print(" | ".join(cells), flush=True))
    command = "python benchmarks/parallel_sweep.py" + (" --quick" if a.quick else "") + \
        (f" --budget {a.budget}" if a.budget != 0.5 else "") + (f" --out {a.out}" if a.out else "")
    write_csv(rows, out, command, time.perf_counter() - t0, a.budget)
    print(f"wrote {out} ({len(rows)} rows, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
