"""Time the researcher's workflow: ``slackswap reproduce`` on its defaults (target < 60 s) and a
100-run sweep of heuristics with 2 processes (target < 2 min). Plain script; prints the numbers.

Run: python benchmarks/bench_reproduce.py
"""

from __future__ import annotations

import subprocess
import sys
import time


def bench_reproduce() -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "slackswap", "reproduce"], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"reproduce failed: {r.stderr.strip()}")
    print(r.stdout)
    return dt


def bench_sweep() -> tuple[float, int, int]:
    from slackswap import experiments

    budgets = [round(0.3 + 0.05 * i, 2) for i in range(10)]  # 0.30 .. 0.75
    planners = ["slack", "capuchin", "dp-checkpoint", "chen-greedy", "chen-sqrt"]
    models = ["bert-large", "gpt2-xl"]  # 2 x 10 x 5 = 100 runs
    t0 = time.perf_counter()
    df = experiments.sweep(models, "a100-80gb", budgets, planners, workers=2, progress=False)
    dt = time.perf_counter() - t0
    return dt, len(df), int((df["status"] == "ERROR").sum())


if __name__ == "__main__":
    t_rep = bench_reproduce()
    t_sweep, n, errors = bench_sweep()
    print(f"reproduce (defaults: 3 models x heuristics at budget 0.5): {t_rep:.1f} s (target < 60 s)")
    print(f"sweep of {n} heuristic runs, 2 processes: {t_sweep:.1f} s (target < 120 s), {errors} ERROR rows")
