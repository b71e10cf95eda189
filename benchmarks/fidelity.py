"""Fidelity of the simulator on real training steps: measured vs simulated step time and peak.

    python benchmarks/fidelity.py                 # CUDA when present (full presets), else CPU (reduced)
    python benchmarks/fidelity.py --size cpu      # the reduced CPU shapes recorded in README.md
    python benchmarks/fidelity.py --size gpu --out fidelity.csv --figure fidelity.png
    python benchmarks/fidelity.py --hold-budget both --out hold.csv   # each swapping plan twice

For GPT-2 124M and 355M shapes, BERT-base and a small Llama (slackswap.torch.hf_models), it traces the
model on the device, plans it with ``slack`` at 50% and 30% of the keep-all peak, runs keep-all,
recompute-all and both plans ``--repeats`` times each (interleaved; the fastest counts, as each
op's fastest of three traces does in the profile), and prints one row per (model, plan):
step time and peak, measured and simulated. On CUDA the peak is ``torch.cuda.max_memory_allocated``
above the memory before the step (against the simulator's peak); on CPU it is the resident saved
activations counted by the executor's hooks (against the same count on the simulator's schedule).
Goal on a GPU: step within 5% and peak within 2% of the simulator's. The simulated step charges
the fixed cost per op that ``measure`` measures (``overhead fwd us``, ``overhead bwd us``: per
forward and per backward op); ``--no-overhead`` simulates with the traced op times alone.

Sizes: ``gpu`` keeps the presets (batch 8-16, seq 512-1024: activations dominate); ``cpu`` keeps
hidden sizes and heads but runs 4 layers, batch 2, seq 64, vocab 1024, so the whole run takes a
few minutes on a 2-core machine (one intra-op thread unless ``--threads``).

``--hold-budget on`` runs every plan that swaps with ``apply(..., hold_budget=True)`` (the host
waits for the copies the simulator releases before each step; docs/executor.md, "Holding the
simulator's budget on the device"); ``both`` runs each such plan without and with it (rows
``slack@0.5`` and ``slack@0.5 hold``, the same plan). The CSV names the device and the versions.
"""

import argparse
import sys
import time

import pandas as pd
import torch

from slackswap.torch import hf_models as zoo
from slackswap.torch.measure_step import measure

MODELS = ("gpt2-124m", "gpt2-355m", "bert-base", "llama-small")
CPU_SHAPE = {"batch": 2, "seq": 64, "layers": 4, "vocab": 1024}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("cpu", "gpu"), help="default: gpu when CUDA is present")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default 1 for --size cpu: "
                    "on a shared 2-core machine more threads mostly measure contention)")
    ap.add_argument("--out", help="write the rows as CSV")
    ap.add_argument("--host-lead", type=int, help="CUDA: the executor's host_lead (default: none)")
    ap.add_argument("--hold-budget", choices=("off", "on", "both"), default="off",
                    help="run plans that swap with the executor's hold_budget mode: off (default), "
                    "on, or both (one row without and one with it)")
    ap.add_argument("--budgets", default="0.5,0.3", help="fractions of the keep-all peak, one "
                    "planned row each (default 0.5,0.3; at the gpu size llama-small's floor is 0.385)")
    ap.add_argument("--no-overhead", action="store_true", help="simulate with the traced op times "
                    "alone (default: measure the fixed cost per op and charge it on every op; "
                    "docs/profile.md, \"Per-op overhead\")")
    ap.add_argument("--figure", help="write one measured-vs-simulated figure per model (name_{model}.png)")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    size = args.size or ("gpu" if cuda else "cpu")
    if args.threads or size == "cpu":
        torch.set_num_threads(args.threads or 1)
    shape = CPU_SHAPE if size == "cpu" else {}
    try:
        budgets = [float(b) for b in args.budgets.split(",")]
        if not all(0 < b <= 1 for b in budgets):
            raise ValueError
    except ValueError:
        ap.error(f"--budgets: expected fractions in (0, 1] of the keep-all peak, separated by commas, e.g. "
                 f"0.5,0.3; got {args.budgets!r}")
    hold = {"off": False, "on": True, "both": "both"}[args.hold_budget]
    device = torch.cuda.get_device_name() if cuda else "cpu"    # measure runs on CUDA when present
    print(f"device: {device}, torch {torch.__version__}", file=sys.stderr, flush=True)
    rows = []
    for name in args.models.split(","):
        t0 = time.perf_counter()
        model, inputs = zoo.build(name, **shape)
        r = measure(model, inputs, budget=budgets, repeats=args.repeats, name=name,
                    host_lead=args.host_lead, overhead=not args.no_overhead, hold_budget=hold)
        df = r.table()
        df.insert(0, "model", name)
        df["hold budget"] = [row.hold_budget for row in r.rows]
        df["accounted peak MiB"] = [row.accounted_peak / 2**20 if row.accounted_peak is not None
                                    else float("nan") for row in r.rows]
        ov = r.overhead
        df["overhead fwd us"] = ov.fwd_s * 1e6 if ov else 0.0
        df["overhead bwd us"] = ov.bwd_s * 1e6 if ov else 0.0
        rows.append(df)
        if args.figure:
            stem = args.figure.rsplit(".", 1)
            r.figure(f"{stem[0]}_{name}.{stem[1] if len(stem) > 1 else 'png'}")
        print(f"{name}: {time.perf_counter() - t0:.0f} s on {r.device}", file=sys.stderr, flush=True)
    out = pd.concat(rows, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        out.insert(0, "device", device)
        out.insert(1, "torch", torch.__version__)
        out.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
