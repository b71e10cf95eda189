"""Regenerate the results tables of README.md and docs/results.md from real runs.

    python scripts/update_results.py            # reproduce + every sweep in data/sweeps/
    python scripts/update_results.py --only reproduce

Every table is computed here (``slackswap reproduce`` and ``slackswap sweep``); nothing is typed.
The README block between ``<!-- results:start -->`` and ``<!-- results:end -->`` and the whole of
docs/results.md are rewritten; raw rows go to results/ (not committed). A table has one row per
full setting (``report.setting_index``); wall times are stated with the machine and the date.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import time
import warnings
from pathlib import Path

from slackswap import experiments, report
from slackswap.core.errors import CapacityWarning

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ["budget", "link", "attention", "shape", "slack_switches", "optimality_gap"]


def _md(df, floatfmt=".4f") -> str:
    return report.to_markdown(df, floatfmt=floatfmt).strip()


def machine() -> str:
    """This machine in words: cores and CPU model (``/proc/cpuinfo``), else the architecture."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {cpu} machine"


def timing(seconds: float, day: datetime.date | None = None) -> str:
    """A measured wall time with where and when: ``"54 s wall on a 2-core ... machine, 2026-11-30"``."""
    return f"{seconds:.0f} s wall on a {machine()}, {(day or datetime.date.today()).isoformat()}"


def _capacity(df) -> list[str]:
    notes = report.capacity_notes(df)
    return [("**Memory warning** (static memory plus budget above the GPU's memory; the step is simulated "
             "anyway, docs/models.md \"Static memory\"): " + "; ".join(notes) + ".")] if notes else []


def _rows_note(df, by: str) -> str:
    return (f"One row per setting ({', '.join(report.setting_index(df, by))}); empty cells: the plan does "
            "not fit (or the run failed).")


def reproduce(out: Path) -> tuple[str, float]:
    t0 = time.perf_counter()
    names = ["bert-large", "gpt2-xl", "llama-7b"]
    heur = ["slack", "capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt", "checkpoint-layers", "swap-all"]
    df = experiments.sweep(names, "a100-80gb", 0.5, heur, workers=2, progress=False)
    report.to_csv(df, out / "reproduce.csv")
    pub = report.published_table(df).drop(columns="source")
    ratios = report.ablation_table(df, by="model")
    gaps = report.ablation_table(df, by="model", value="gap_to_bound")
    if report.setting_index(df, by="model") != ["model"]:
        raise RuntimeError("reproduce: expected one setting per model")
    best = (df[df["label"] == "slack"].assign(bound_ratio=lambda d: d["ideal_step_time_s"] / d["lower_bound_s"])
            [["model", "throughput_ratio", "bound_ratio"]].rename(columns={"throughput_ratio": "slack"}))
    best.insert(1, "paper", [float(pub.loc[pub["model"] == m, "paper"].iloc[0]) for m in best["model"]])
    dt = time.perf_counter() - t0
    text = "\n\n".join([
        "Command: `slackswap reproduce` (A100 80GB + PCIe 4.0, budget 50% of the keep-all peak, "
        f"built-in defaults; {timing(dt)}).",
        *_capacity(df),
        "**Published vs ours** (throughput ratio = ideal step / simulated step, `slack` planner):",
        _md(pub),
        "**Every heuristic at 50%** (empty = the plan does not fit the budget):",
        _md(ratios),
        "**Gap to a certified lower bound** (`step / bound - 1`; bound: the aggregated PCIe-capacity relaxation of "
        "`slackswap.bounds`, valid for every plan, in any D2H order and with any hold points):",
        _md(gaps),
        "**The most any plan can reach in our model** (`bound_ratio` = ideal step / certified lower "
        "bound: no plan, by any planner, has a higher throughput ratio in this simulator):",
        _md(best),
    ])
    return text, dt


def run_sweep(name: str, out: Path) -> tuple[str, float]:
    path = ROOT / "data" / "sweeps" / f"{name}.toml"
    cfg = experiments.load_sweep(path)
    t0 = time.perf_counter()
    df = experiments.run_sweep_file(path, out=out / f"{name}.csv", progress=False)
    dt = time.perf_counter() - t0
    by = cfg["by"]
    parts = [f"### {name}: {cfg.get('description', '')}",
             f"Command: `slackswap sweep data/sweeps/{name}.toml --out results/{name}.csv` "
             f"({len(df)} runs, {timing(dt)}). {_rows_note(df, by)}"]
    if name == "optimality_gap":
        parts += [_md(report.optimality_table(df)),
                  "The `milp` planner's columns, each named for what it is (docs/milp.md, \"Full-size models: the aggregated relaxation and proven gaps\"): these "
                  "full-size problems exceed the exact formulation (`max_exact_tensors`), so `milp plan` is "
                  "the throughput ratio of its incumbent, the fastest by simulation of every heuristic's plan "
                  "(its warm starts) and the aggregated MILP's decisions, then improved by its incumbent "
                  "search (slack's switch variants and two-tensor moves, within the time limit; docs/milp.md "
                  "\"Full-size models: the aggregated relaxation and proven gaps\", item 4); `milp plan is` names the heuristic whose run it equals (same step time "
                  "and decision counts), so such a row is no independent check of that heuristic, or `own` "
                  "when the search found a faster plan than every heuristic of the row. What the planner "
                  "certifies is `ceiling` (ideal step / its certified bound, the aggregated MILP's dual bound or the LP bound below: no plan of any planner "
                  "has a higher throughput ratio in this simulator) and `proven gap` (1 - bound / step of "
                  "its plan). The exact MILP runs on small problems (tests/test_milp.py, "
                  "notebooks/02_heuristic_vs_exact.ipynb).",
                  "Gap to the certified lower bound (`step / bound - 1`; bound: `slackswap.bounds.lower_bound`, "
                  "the LP of the aggregated PCIe-capacity relaxation, valid for every plan, in any D2H order "
                  "and with any hold points):",
                  _md(report.ablation_table(df[df["planner"] != "milp"], by=by, value="gap_to_bound"))]
    else:
        parts.append(_md(report.ablation_table(df, by=by)))
    parts += _capacity(df)
    return "\n\n".join(parts), dt


def main() -> None:
    warnings.simplefilter("ignore", CapacityWarning)   # the tables print them (report.capacity_notes)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["reproduce", *SWEEPS], action="append")
    args = ap.parse_args()
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    which = args.only or ["reproduce", *SWEEPS]
    stamp = datetime.date.today().isoformat()
    if "reproduce" in which:
        text, _ = reproduce(out)
        readme = ROOT / "README.md"
        body = readme.read_text()
        block = f"<!-- results:start -->\n_Generated {stamp} by `python scripts/update_results.py`._\n\n{text}\n<!-- results:end -->"
        body = re.sub(r"<!-- results:start -->.*?<!-- results:end -->", lambda _: block, body, flags=re.S)
        readme.write_text(body)
    sections = [s for s in which if s in SWEEPS]
    if sections:
        doc = ROOT / "docs" / "results.md"
        old = doc.read_text() if doc.exists() else ""
        found = dict(re.findall(r"<!-- sweep:(\w+) -->\n(.*?)<!-- /sweep -->", old, flags=re.S))
        for name in sections:
            found[name] = run_sweep(name, out)[0] + "\n"
            if name == "optimality_gap":   # the README carries this table too
                readme = ROOT / "README.md"
                block = f"<!-- gaps:start -->\n{found[name]}<!-- gaps:end -->"
                readme.write_text(re.sub(r"<!-- gaps:start -->.*?<!-- gaps:end -->", lambda _, b=block: b,
                                         readme.read_text(), flags=re.S))
        parts = ["# Results\n", f"Ablation tables, generated by `python scripts/update_results.py` (last run {stamp}); "
                 "each section names the command that regenerates it. Throughput ratio = ideal step / "
                 "simulated step on the analytical cost model (docs/hardware.md).\n"]
        parts += [f"<!-- sweep:{n} -->\n{found[n]}<!-- /sweep -->\n" for n in SWEEPS if n in found]
        # hand-made sections (their own commands inside) are kept as they are
        parts += [f"<!-- keep:{n} -->\n{b}<!-- /keep -->\n"
                  for n, b in re.findall(r"<!-- keep:(\w+) -->\n(.*?)<!-- /keep -->", old, flags=re.S)]
        doc.write_text("\n".join(parts))
        # the README carries every ablation table too, folded (one <details> block per sweep file)
        folded = []
        for n in SWEEPS:
            if n in found and n != "optimality_gap":
                title = found[n].splitlines()[0].removeprefix("### ")
                folded.append(f"<details><summary>{title}</summary>\n\n{found[n].split(chr(10), 1)[1].strip()}\n\n</details>\n")
        readme = ROOT / "README.md"
        block = "<!-- ablations:start -->\n" + "\n".join(folded) + "<!-- ablations:end -->"
        readme.write_text(re.sub(r"<!-- ablations:start -->.*?<!-- ablations:end -->", lambda _, b=block: b,
                                 readme.read_text(), flags=re.S))


if __name__ == "__main__":
    main()
