"""A plan as a selective checkpointing policy under ``torch.compile`` on CPU (docs/policy.md,
"Selective checkpointing policy: `slackswap.torch.policy`"): seconds to compile and run one step,
and the largest difference of a parameter gradient from the plain step's.

    python benchmarks/bench_policy_compile.py --backend aot_eager
    python benchmarks/bench_policy_compile.py --backend inductor     # needs a C++ compiler
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from torch.utils.checkpoint import checkpoint

from slackswap import Decision, Plan
from slackswap.torch import policy, trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("aot_eager", "inductor", "eager"), default="aot_eager")
    a = ap.parse_args()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    g = trace(net, (x,), device="cpu")
    ref = copy.deepcopy(net)
    ref(x).sum().backward()
    first, second = (t.id for t in g.planning_tensors())
    pol = policy(Plan({first: Decision.KEEP, second: Decision.RECOMPUTE}), g)
    step = torch.compile(lambda x: checkpoint(net, x, use_reentrant=False, context_fn=pol.context_fn),
                         backend=a.backend)
    t0 = time.perf_counter()
    step(x).sum().backward()
    dt = time.perf_counter() - t0
    diff = max((p.grad - q.grad).abs().max().item() for p, q in zip(net.parameters(), ref.parameters(),
                                                                     strict=True))
    print(f"torch {torch.__version__}, backend {a.backend}: compile + step {dt:.1f} s, "
          f"largest gradient difference {diff:.3g}, policies {dict(pol.counts)}")


if __name__ == "__main__":
    main()
