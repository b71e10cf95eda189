"""SimResult: what the simulator says about one plan (docs/timeline.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..core.errors import SlackSwapError
from ..core.paths import check_output, prepare_output
from .host import peak_bytes


@dataclass(frozen=True)
class Event:
    start: float
    end: float
    stream: str          # "compute" | "d2h" | "h2d"
    label: str
    kind: str = ""       # fwd | rec | bwd | opt | d2h | h2d
    op: int | None = None
    tensor: int | None = None
    microbatch: int | None = None   # a pipeline stage's step: the micro-batch (None on one GPU)


@dataclass(frozen=True)
class SimResult:
    """The timeline of one step under one plan. ``feasible`` is False when some allocation can
    never fit the budget; then ``reason`` names the step and the bytes, times are ``inf`` and
    ``peak_bytes`` is those bytes (more than the budget: ``fits`` is False). It is also False
    when the swapped bytes the node's GPUs hold on the host exceed its pinned memory
    (``timeline.host``); then ``reason`` names ``node.pinned_capacity``, times are ``inf`` and
    ``peak_bytes`` and ``host_peak_bytes`` are the step's."""

    feasible: bool
    step_time_s: float
    ideal_step_time_s: float
    peak_bytes: int
    budget_bytes: float
    compute_s: float = 0.0
    recompute_s: float = 0.0
    stall_fwd_s: float = 0.0
    stall_bwd_s: float = 0.0
    swapped_bytes: int = 0
    counts: dict = field(default_factory=dict)
    events: tuple[Event, ...] = ()
    memory_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    memory_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reason: str = ""
    #: a pipeline stage's step (docs/timeline.md, "Pipeline stages (1F1B)"): its micro-batches,
    #: the most of them in flight at once, and the time the stage waited for the other stages
    microbatches: int = 1
    in_flight: int = 1
    bubble_s: float = 0.0
    #: the run's copies, ``timeline.host.peak_bytes``'s arguments: ``host_peak_bytes`` is
    #: computed from them when first read (empty: nothing swapped)
    host_copies: tuple = field(default=(), repr=False, compare=False)

    @cached_property
    def host_peak_bytes(self) -> int:
        """Swapped bytes of this GPU held on the host at once: each from the start of its D2H
        copy to the end of its H2D copy (docs/timeline.md, "Host memory")."""
        return peak_bytes(*self.host_copies) if self.host_copies else 0

    @property
    def throughput_ratio(self) -> float:
        """ideal step / step (1.0 = no slowdown; 0.0 when infeasible)."""
        if not self.feasible or not np.isfinite(self.step_time_s) or self.step_time_s <= 0:
            return 0.0
        return self.ideal_step_time_s / self.step_time_s

    @property
    def fits(self) -> bool:
        return self.feasible and self.peak_bytes <= self.budget_bytes

    @property
    def stall_s(self) -> float:
        return self.stall_fwd_s + self.stall_bwd_s

    def summary(self) -> dict:
        """A flat dict of the scalar results (one row of an experiment table)."""
        return {"feasible": self.feasible, "fits": self.fits, "step_time_s": self.step_time_s,
                "ideal_step_time_s": self.ideal_step_time_s, "throughput_ratio": self.throughput_ratio,
                "peak_bytes": self.peak_bytes, "budget_bytes": self.budget_bytes,
                "compute_s": self.compute_s, "recompute_s": self.recompute_s,
                "stall_fwd_s": self.stall_fwd_s, "stall_bwd_s": self.stall_bwd_s,
                "stall_s": self.stall_s, "swapped_bytes": self.swapped_bytes,
                "host_peak_bytes": self.host_peak_bytes, "reason": self.reason,
                **({"microbatches": self.microbatches, "in_flight": self.in_flight,
                    "bubble_s": self.bubble_s} if self.microbatches > 1 else {})}

    def op_table(self):
        """One row per event (compute steps and copies) as a pandas DataFrame."""
        import pandas as pd  # lazy: start-up cost (pandas)

        return pd.DataFrame([{"stream": e.stream, "kind": e.kind, "label": e.label, "op": e.op,
                              "tensor": e.tensor, "start_s": e.start, "end_s": e.end,
                              "duration_s": e.end - e.start} for e in self.events])

    def require_detail(self, fn: str) -> None:
        """Refuse (``SlackSwapError`` naming ``fn``) a result simulated with ``detail=False``: it
        has no events and no memory curve, so an output drawn from them would be empty."""
        if self.feasible and not self.events:   # a step that fits always has compute events
            raise SlackSwapError(f"{fn}: the result has no timeline; expected a result of "
                                 "simulate(problem, plan, detail=True); got one simulated with detail=False")

    def to_chrome_trace(self, path=None) -> dict:
        """Chrome trace-event JSON (open in chrome://tracing or ui.perfetto.dev); microseconds.
        A result simulated with ``detail=False`` has no timeline: refused (``SlackSwapError``)
        rather than written empty. ``path``: missing parent folders are created."""
        self.require_detail("to_chrome_trace")
        if path is not None:
            check_output(path, "to_chrome_trace(path)")
        tid = {"compute": 1, "d2h": 2, "h2d": 3}
        ev = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": v, "args": {"name": k}} for k, v in tid.items()]
        for e in self.events:
            ev.append({"name": e.label, "cat": e.kind, "ph": "X", "pid": 1, "tid": tid[e.stream],
                       "ts": e.start * 1e6, "dur": (e.end - e.start) * 1e6})
        for t, b in zip(self.memory_times, self.memory_bytes, strict=True):
            ev.append({"name": "activation memory", "ph": "C", "pid": 1, "ts": float(t) * 1e6,
                       "args": {"bytes": int(b)}})
        out = {"traceEvents": ev, "displayTimeUnit": "ms"}
        if path is not None:
            prepare_output(path).write_text(json.dumps(out))
        return out
