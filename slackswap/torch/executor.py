"""Run one real training step under a plan: ``apply(model, plan, graph)`` (docs/executor.md).

>>> import torch
>>> from slackswap import Decision, Plan
>>> from slackswap.torch import apply, trace
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
>>> x = (torch.randn(4, 8),)
>>> g = trace(net, x, device="cpu")
>>> plan = Plan({t.id: Decision.RECOMPUTE for t in g.planning_tensors()})
>>> with apply(net, plan, g) as run:
...     net(*x).sum().backward()
>>> run.stats.recomputed_ops          # the tanh's input (addmm), then the tanh
2
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter, deque
from dataclasses import dataclass

import torch

from ..core.errors import ConfigError, ExecutionError, ParameterError
from ..core.plan import Decision, Plan
from . import _ledger
from ._check import check_plan
from ._record import Recorder, Ref, describe, replay, storage_key, view_of

_node_seq = torch._C._current_autograd_node
_FRAMES_PER_REBUILD = 6   # _rebuild, replay, its comprehension, resolve, _input, and one spare


@dataclass
class ExecStats:
    """What the hooks counted in one step. ``peak_saved_bytes``: the saved-activation peak by the
    accounting of docs/executor.md (None when not tracked)."""

    packs: int = 0
    recomputed_ops: int = 0
    swapped_bytes: int = 0
    fetched_bytes: int = 0
    prefetched: int = 0
    peak_saved_bytes: int | None = None
    decisions: dict | None = None
    #: the step's loss, detached (``run_step``; None under ``apply``, where the loss is yours)
    loss: torch.Tensor | None = None
    held_copies: int = 0


class _Handle:
    __slots__ = ("k", "tid", "ref", "t")

    def __init__(self, k, tid, ref, t=None):
        self.k, self.tid, self.ref, self.t = k, tid, ref, t


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``t`` as a 1-d uint8 tensor."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


class Execution:
    """The context of one planned step; see ``apply``."""

    def __init__(self, model, plan, graph, *, problem=None, issue_points=None, track=True,
                 host_lead=None, hold_budget=False):
        if host_lead is not None and (isinstance(host_lead, bool) or not isinstance(host_lead, int)
                                      or host_lead < 1):
            raise ConfigError(f"host_lead: must be None or an integer >= 1; got {host_lead!r}")
        if not isinstance(hold_budget, bool):
            raise ConfigError(f"hold_budget: must be True or False; got {hold_budget!r}"[:200])
        if hold_budget and problem is None:
            raise ConfigError("hold_budget: needs problem=... (its simulated timeline says which "
                              "copies each step waits for); got problem=None")
        check_plan(plan, graph)
        self.model, self.plan, self.graph, self.info = model, plan, graph, graph.spec
        self.dec = dict(plan.decisions)
        self.device = next((p.device for p in model.parameters()), torch.device("cpu"))
        self.cuda = self.device.type == "cuda"
        sched = _ledger.schedule(graph, plan)       # compiled once for what follows
        self.issue = _ledger.issue_stages(graph, plan, problem, issue_points, sched)
        self.h2d_queue = [t for t in _ledger.h2d_order(graph, plan, sched) if t in self.issue]
        self.pack_op = _ledger.pack_ops(graph)
        self.track = track
        # multi-level plans (hold points): a copy is released by the schedule's stages, not by
        # counted uses (a rebuilt tensor may be read by several rebuilds of one consumer)
        self.hold = dict(plan.hold_points)
        self.last_stage = _ledger.last_use_stages(graph, plan, sched) if self.hold else {}
        self.n_stages = len(graph.ops)
        self.key_tid: dict[tuple, int] = {}          # multi-level: cache key -> graph tensor id
        self.transient: list = []                    # multi-level: copies that end with this stage
        self.ending = None                           # the stage closed last, until another opens
        needs_rec = track or bool(plan.ids(Decision.RECOMPUTE))
        self.rec = Recorder(expected=self.info.aten_ops or None,
                            made=self.info.call_tensors if self.hold else None) if needs_rec else None
        self.stats = ExecStats(decisions=_ledger.count_decisions(plan))
        self.hint = ""
        if self.info.device == "meta" and self.device.type != "meta":
            # a step that does not match its trace: first the likely cause (docs/executor.md)
            dev = self.device.type
            self.hint = (f"graph: traced on meta (kernels={self.info.kernels!r}), this step runs on "
                         f"{dev}, where PyTorch may run other kernels; trace the model with "
                         f"device={dev!r} to apply plans on {dev}. ")
            if self.rec is not None:
                self.rec.hint = self.hint
        self.k = 0
        self.backward = False
        self.keep: dict[int, torch.Tensor] = {}      # KEEP tensors a replay may read
        self.tid_rec: dict = {}                      # planning tid -> its StorageRec
        self.buffers = frozenset(storage_key(b) for b in model.buffers())
        self.host: dict[int, tuple] = {}             # SWAP: tid -> (host buffer, d2h event)
        self.cache: dict[tuple, torch.Tensor] = {}   # fetched / rebuilt storages (flat or base)
        self.passing: dict[tuple, tuple] = {}        # storage versions a rebuild is passing through
        self.h2d_done: dict[tuple, object] = {}      # CUDA: prefetches not yet waited for
        self.uses: Counter = Counter()
        self.first_step: dict[int, int] = {}         # planning tid -> forward step it was made
        self.fwd_end: dict[int, int] = {}
        self.spans: list = []
        self.open: dict[tuple, list] = {}            # cache key -> [tid, first step, last step]
        self.step = 0
        self.stage = None
        self.stage_uses: list = []
        self.q_next = 0
        self._stack = None
        self.host_lead = host_lead if self.cuda else None
        self._marks: deque = deque()                 # CUDA: compute-stream events, newest last
        self._in_flight: deque = deque()             # CUDA: (event, source) of running D2H copies
        if self.cuda:
            self.d2h_stream, self.h2d_stream = torch.cuda.Stream(), torch.cuda.Stream()
        self.held = None                             # hold_budget: the simulator's releases
        if hold_budget:
            self._init_hold(problem, sched)

    def _init_hold(self, problem, sched):
        """``hold_budget``: the simulator's release of swapped sources, step by step
        (``_ledger.hold_schedule``), and the executor's point for each step: after the last
        save before op ``s`` runs (forward), at the opening of the step's backward stage."""
        self.held = _ledger.hold_schedule(problem, self.plan, self.issue)
        self.held_waits = self.held.waits()
        self.held_next = 0
        n, po = len(self.graph.ops), self.pack_op
        fwd = [n - 1] * (len(po) + 1)     # after k saves: wait up to the op of the next known save
        nxt = n - 1
        for k in range(len(po) - 1, -1, -1):
            if po[k] >= 0:
                nxt = po[k]
            fwd[k] = nxt
        self.held_fwd = fwd
        first = sched.stage_first_step
        self.held_stage_last = [(first[j - 1] if j else sched.n_steps - 1) - 1 for j in range(n)]

    def _hold_upto(self, last):
        """``hold_budget``: wait for every copy the simulator releases at a step up to ``last``,
        in its order; a copy not yet issued is waited for at the next point."""
        w = self.held_waits
        while self.held_next < len(w) and w[self.held_next][0] <= last:
            step, tid = w[self.held_next]
            if tid not in self.host:
                return
            self._wait_copy(step, tid)
            self.held_next += 1

    def _wait_copy(self, step, tid):
        """The host waits until the device-to-host copy of ``tid`` has ended and drops the sources
        of ended copies, so the allocator may reuse their memory before step ``step`` of the
        simulator's timeline allocates (the simulator released it there). On CPU the copy ended
        in the pack hook: nothing to wait for."""
        self.stats.held_copies += 1
        if self.cuda:
            self.host[tid][1].synchronize()
            self._reap()

    # ---- context ----
    def __enter__(self):
        self._stack = contextlib.ExitStack()
        if self.rec is not None:
            self._stack.enter_context(self.rec)
            # a recompute rebuilds its missing inputs first, recursively (a few Python frames per
            # level): a chain of recomputed tensors through every layer is deeper than Python's
            # default limit of 1000 frames; the bound is the number of ops the step can record
            old = sys.getrecursionlimit()
            need = old + _FRAMES_PER_REBUILD * max(len(self.info.aten_ops or ()), len(self.graph.ops))
            sys.setrecursionlimit(need)
            self._stack.callback(sys.setrecursionlimit, old)
        self._stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack_hook, self._unpack_hook))
        return self

    def __exit__(self, *exc):
        self._stack.close()
        if self.held is not None and self.cuda:       # prefetches never used: copied before reuse
            for done in self.h2d_done.values():
                torch.cuda.current_stream().wait_event(done)
        for _, src in self._in_flight:               # not yet seen to end: the allocator waits
            src.record_stream(self.d2h_stream)
        self._in_flight.clear()
        if exc[0] is None and self.backward:
            self._close_stage()
            if self.track:
                for key in list(self.open):
                    self._release(key)
                self.stats.peak_saved_bytes = _ledger.peak_of(self.spans, self.step + 1)
        return False

    # ---- forward ----
    def _pack_hook(self, t):
        out = self._unrecorded(self._pack, t)
        if self.held is not None and not self.backward:
            self._unrecorded(self._hold_upto, self.held_fwd[min(self.k, len(self.held_fwd) - 1)])
        return out

    def _unpack_hook(self, h):
        return self._unrecorded(self._unpack, h)

    def _unrecorded(self, fn, x):
        """``fn(x)`` with the forward recorder paused: the hooks' own ops are not the step's."""
        if self.rec is None:
            return fn(x)
        was, self.rec.active = self.rec.active, False
        try:
            return fn(x)
        finally:
            self.rec.active = was and not self.backward

    def _pack(self, t):
        k = self.k
        self.k += 1
        if self.backward:
            return t
        order = self.info.pack_order
        if k >= len(order):
            raise ExecutionError(f"{self.hint}model: the step saves more tensors than its trace ({len(order)}); "
                                 "the model or its input shapes differ from the traced ones")
        self.stats.packs += 1
        self._host_point()
        tid = order[k]
        if tid < 0:
            return t
        nb = t.untyped_storage().nbytes()
        if nb != self.graph.tensors[tid].bytes:
            raise ExecutionError(f"{self.hint}model: saved tensor {k} has {nb} bytes, the trace's tensor {tid} "
                                 f"({self.graph.tensors[tid].name}) {self.graph.tensors[tid].bytes}; "
                                 "the model or its input shapes differ from the traced ones")
        d = self.dec[tid]
        rec = self.rec.lookup(storage_key(t)) if self.rec is not None else None
        if rec is not None:
            rec.tid, rec.tid_version = tid, len(rec.calls)
            self.tid_rec.setdefault(tid, rec)
        self.uses[("t", tid)] += 1
        if self.track and tid not in self.first_step:
            self.first_step[tid] = rec.created_step if rec is not None else max(self.rec.step - 1, 0)
        if d is Decision.KEEP:
            base = t.detach()
            self.keep.setdefault(tid, base)
            return _Handle(k, tid, None, base)
        if d is Decision.SWAP:
            if tid not in self.host:
                self.host[tid] = self._d2h(t)
                self.stats.swapped_bytes += nb
            return _Handle(k, tid, describe(t, None))
        if rec is None:
            raise ExecutionError(f"plan.decisions[{tid}] ({self.graph.tensors[tid].name}): recompute "
                                 "of a tensor whose producing op was not seen in this step")
        return _Handle(k, tid, describe(t, rec))

    def _d2h(self, t):
        flat = _flat(t)
        if not self.cuda:
            return flat.clone(), None
        buf = torch.empty(flat.numel(), dtype=torch.uint8, pin_memory=True)
        self.d2h_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.d2h_stream):
            buf.copy_(flat, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        # the source stays referenced until its own copy ends (``_reap``), then the allocator may
        # reuse it; ``record_stream`` would also wait for every copy queued behind it
        self._in_flight.append((ev, flat))
        return buf, ev

    def _reap(self):
        """Drop the sources of finished device-to-host copies (they end in issue order)."""
        while self._in_flight and self._in_flight[0][0].query():
            self._in_flight.popleft()

    # ---- backward ----
    def _begin_backward(self):
        self.backward = True
        n = len(self.info.pack_order)
        if self.k != n:
            raise ExecutionError(f"{self.hint}model: the step saved {self.k} tensors, its trace {n}; the model or "
                                 "its input shapes differ from the traced ones")
        if self.rec is not None:
            self.rec.check_complete()
            self.rec.active = False
            self.step = self.rec.step
            for tid, rec in self.tid_rec.items():
                self.fwd_end[tid] = max(rec.last_read_step, rec.created_step)
        # replay reads, counted once per rebuilt storage version
        seen = set()

        def visit(rec, version):
            for call, _ in rec.calls[:version]:
                for ref in call.leaves:
                    if isinstance(ref, Ref) and ref.rec is not None and ref.rec is not rec:
                        key = self._key(ref)
                        self.uses[key] += 1
                        if key[0] == "r" and key not in seen:
                            seen.add(key)
                            visit(ref.rec, ref.version)
        for tid in self.plan.ids(Decision.RECOMPUTE):
            rec = self.tid_rec.get(tid)
            if rec is not None and ("t", tid) not in seen:
                seen.add(("t", tid))
                visit(rec, len(rec.calls))
        for tid in list(self.keep):
            if self.uses[("k", tid)] == 0:
                del self.keep[tid]
        if self.track:
            for tid, a in self.first_step.items():
                if self.dec[tid] is not Decision.KEEP:
                    self.spans.append((a, self.fwd_end.get(tid, a), self.graph.tensors[tid].bytes))
                else:
                    self.open[("t", tid)] = [tid, a, self.fwd_end.get(tid, a)]

    def _key(self, ref: Ref) -> tuple:
        """Cache key of what a replay reads: a planning tensor by decision, else a storage."""
        tid = ref.rec.tid
        if tid is None or ref.version != ref.rec.tid_version:
            # not a planning tensor, or an earlier version of one's storage (``shifted == -100``
            # before ``shifted.masked_fill_``): rebuilt like any intermediate
            return ("r", id(ref.rec), ref.version)
        if self.dec[tid] is Decision.KEEP:
            return ("k", tid)
        return ("t", tid)

    def _unpack(self, h):
        if not isinstance(h, _Handle):
            return h
        if not self.backward:
            self._begin_backward()
        stage = self.pack_op[h.k]
        node = _node_seq()
        node = node._sequence_nr() if node is not None else None
        if self.stage is None or node != self.stage[1]:
            self._close_stage()
            self._open_stage(stage, node)
        tid = h.tid
        if self.dec[tid] is Decision.KEEP:
            out = h.t
        elif self.dec[tid] is Decision.SWAP:
            out = view_of(self._fetch(tid), h.ref)
        else:
            out = view_of(self._rebuild(h.ref.rec, h.ref.version, ("t", tid)), h.ref)
        self._use(("t", tid), None)
        return out

    def _open_stage(self, stage, node):
        self._host_point()
        if self.hold and self.ending is not None and stage != self.ending:
            self._end_of_stage(self.ending)   # one graph stage may span several autograd nodes
        self.ending = None
        self.stage = (stage, node)
        self.stage_first = self.step
        self.stage_uses = []
        if self.held is not None and stage >= 0:
            self._hold_upto(self.held_stage_last[stage])
        while self.q_next < len(self.h2d_queue) and stage >= 0 and self.issue[self.h2d_queue[self.q_next]] >= stage:
            tid = self.h2d_queue[self.q_next]
            self.q_next += 1
            if ("t", tid) not in self.cache:
                self._fetch(tid, use=False)
                self.stats.prefetched += 1

    def _close_stage(self):
        if self.stage is None:
            return
        s = self.step
        self.step += 1
        for key in self.stage_uses:
            self._touch(key, s)
        self.ending = self.stage[0]
        self.stage = None

    def _end_of_stage(self, c):
        """Multi-level plans: release the transient copies made in stage ``c`` (regenerated above
        their hold point) and everything whose last read in the schedule is in stage ``c`` or
        before it (docs/timeline.md, "Backward: recompute, prefetch, gradients")."""
        for key in self.transient:
            if key in self.cache:
                self._release(key)
        self.transient.clear()
        for key in dict.fromkeys((*self.cache, *self.open)):
            x = key[1] if key[0] == "t" else self.key_tid.get(key)
            if x is not None and self.last_stage.get(x, c) >= c:
                self._release(key)
        for tid in [t for t in self.keep if self.last_stage.get(t, c) >= c]:
            del self.keep[tid]

    def _fetch(self, tid, use=True):
        """The device copy of swapped ``tid``: copied back now, or the prefetched one. On CUDA the
        copy runs on the H2D stream; the compute stream waits for it only at a use."""
        key = ("t", tid)
        if key in self.cache:
            if use and key in self.h2d_done:
                torch.cuda.current_stream().wait_event(self.h2d_done.pop(key))
            return self.cache[key]
        buf, ev = self.host[tid]
        if self.cuda and self.held is not None:
            # hold_budget: the destination from the compute stream's pool (where the memory the
            # simulator counts as free was freed), copied once the compute stream has reached this
            # point (the simulator's copy starts no earlier than its issue stage is ready)
            flat = torch.empty(buf.numel(), dtype=torch.uint8, device=self.device)
            self.h2d_stream.wait_stream(torch.cuda.current_stream())
            self.h2d_stream.wait_event(ev)
            with torch.cuda.stream(self.h2d_stream):
                flat.copy_(buf, non_blocking=True)
                done = torch.cuda.Event()
                done.record()
            if use:
                torch.cuda.current_stream().wait_event(done)
            else:
                self.h2d_done[key] = done
        elif self.cuda:
            self.h2d_stream.wait_event(ev)
            with torch.cuda.stream(self.h2d_stream):
                flat = buf.to(self.device, non_blocking=True)
                done = torch.cuda.Event()
                done.record()
            flat.record_stream(torch.cuda.current_stream())
            if use:
                torch.cuda.current_stream().wait_event(done)
            else:
                self.h2d_done[key] = done
        else:
            flat = buf.clone()
        self.stats.fetched_bytes += buf.numel()
        self.cache[key] = flat
        self._alloc(key, tid, self.stage_first if self.stage is not None else self.step)
        return flat

    def _rebuild(self, rec, version, key):
        if key in self.cache:
            if key in self.passing:
                self._skip(*self.passing.pop(key))
            return self.cache[key]
        base = None
        for i, (call, out_i) in enumerate(rec.calls[:version]):
            def resolve(ref, base=base):
                if ref.rec is None:
                    return ref.const
                if ref.rec is rec:
                    return view_of(base, ref)
                return view_of(self._input(ref), ref)
            # while call i re-runs, the storage is at version i: an input of the call that reads
            # that version (``masked_fill_(shifted == -100, ...)`` reads ``shifted`` before the
            # write) is given this copy instead of a second rebuild of the same calls
            passing = ("r", id(rec), i) if i and (rec.tid is None or rec.tid_version != i) else None
            if passing is not None and passing not in self.cache:
                self.cache[passing] = base
                self.passing[passing] = (rec, i)
            else:
                passing = None
            try:
                outs = replay(call, resolve, self.buffers)
            finally:
                if passing is not None:
                    self.cache.pop(passing, None)
                    self.passing.pop(passing, None)
            s = self.step
            self.step += 1
            self.stats.recomputed_ops += not call.fused
            for ref in call.leaves:
                if isinstance(ref, Ref) and ref.rec is not None and ref.rec is not rec:
                    self._use(self._key(ref), s)
            if i == 0:
                base = outs[out_i]
                for j, other in call.created:   # the re-run also made these: keep the needed ones
                    planned = other.tid is not None and other.tid_version == 1
                    if other is not rec and (not planned or self.dec[other.tid] is Decision.RECOMPUTE):
                        k2 = ("t", other.tid) if planned else ("r", id(other), 1)
                        if k2 not in self.cache and len(other.calls) == 1 and \
                                (self.uses[k2] > 0 if not self.hold else self._made(k2, other, 1)):
                            self.cache[k2] = outs[j]
                            self._alloc(k2, other.tid, s)
        self.cache[key] = base
        self._alloc(key, key[1] if key[0] == "t" else None, self.step - 1)
        if self.hold:
            self._made(key, rec, version)
        return base

    def _skip(self, rec, version):
        """A rebuild of ``rec`` at ``version`` served by a copy passing through that version:
        the reads its calls would have made, counted by ``_begin_backward``, are not made."""
        for call, _ in rec.calls[:version]:
            for ref in call.leaves:
                if isinstance(ref, Ref) and ref.rec is not None and ref.rec is not rec:
                    self._use(self._key(ref), self.step)

    def _made(self, key, rec, version) -> bool:
        """Multi-level plans: name the graph tensor of a rebuilt copy and mark it transient when
        this stage is above its hold point. True when the copy is resident after the re-run, as
        every output of a re-run op is in the schedule (the executor cannot name the tensor of a
        storage the trace did not see made: then only when some read is still counted)."""
        x = key[1] if key[0] == "t" else rec.versions.get(version)
        if x is None:
            return self.uses[key] > 0
        self.key_tid[key] = x
        if self.stage is not None and self.stage[0] > self.hold.get(x, self.n_stages - 1):
            self.transient.append(key)
        return True

    def _input(self, ref):
        key = self._key(ref)
        if key[0] == "k":
            return self.keep[key[1]]
        if key[0] == "t" and self.dec[key[1]] is Decision.SWAP:
            return self._fetch(key[1])
        return self._rebuild(ref.rec, ref.version, key)

    def _host_point(self):
        """At each save (forward) and backward stage, on CUDA: drop the sources of finished
        copies (``_reap``) and, with ``host_lead``, let the host run at most that many such
        points ahead of the compute stream. The allocator frees a swapped tensor when its copy
        ends on the GPU but allocates at the host's pace: a host far ahead of the GPU holds the
        memory of copies still running next to memory the simulator allocates later."""
        if not self.cuda:
            return
        self._reap()
        if self.host_lead is None:
            return
        ev = torch.cuda.Event()
        ev.record()
        self._marks.append(ev)
        if len(self._marks) > self.host_lead:
            self._marks.popleft().synchronize()

    # ---- accounting ----
    def _alloc(self, key, tid, step):
        if self.track and tid is not None and key[0] == "t":
            self.open[key] = [tid, step, step]

    def _use(self, key, step):
        """One use of ``key`` at ``step`` (None: the backward step of the current stage)."""
        self.uses[key] -= 1
        if key[0] == "k":
            if self.uses[key] <= 0 and not self.hold:
                self.keep.pop(key[1], None)
            key = ("t", key[1])
        if step is None:
            self.stage_uses.append(key)
        else:
            self._touch(key, step)

    def _touch(self, key, step):
        if key in self.open:
            self.open[key][2] = max(self.open[key][2], step)
        if self.hold and (key[0] == "t" or key in self.key_tid):
            return                                   # released at the end of a stage
        if self.uses[key] <= 0 and (key[0] != "t" or self.uses[("k", key[1])] <= 0):
            self._release(key)

    def _release(self, key):
        done = self.h2d_done.pop(key, None)
        if done is not None and self.held is not None:   # compute-pool destination never used
            torch.cuda.current_stream().wait_event(done)
        self.cache.pop(key, None)
        span = self.open.pop(key, None)
        if span is not None:
            self.spans.append((span[1], span[2], self.graph.tensors[span[0]].bytes))


def apply(model, plan, graph, *, problem=None, issue_points=None, track=True,
          host_lead=None, hold_budget=False) -> Execution:
    """A context manager that runs the training step written inside it under ``plan``.

    ``graph``: the ``slackswap.torch.trace`` graph of the same model and input shapes. Inside the
    ``with`` block run the forward, the loss and ``backward()``; every saved tensor is kept,
    swapped to host or recomputed as the plan says. ``problem`` (optional): places the prefetch
    of swapped tensors the plan gives no issue point for as ``simulate`` does (else at first use).
    ``track``: record the saved-activation accounting (``run.stats.peak_saved_bytes``).
    ``host_lead`` (CUDA; default None, no limit): the host waits until the compute stream is at
    most this many saved tensors (forward) or backward stages behind it (docs/executor.md).
    ``hold_budget`` (needs ``problem``): before each step the host waits for the device-to-host
    copies whose sources the simulator releases by that step, and prefetches are allocated from
    the compute stream's pool, so the allocator holds what the simulator counts (docs/executor.md,
    "Holding the simulator's budget on the device"). On CPU only the bookkeeping runs.
    """
    if not isinstance(plan, Plan):
        hint = " (a planner name: plan it first, planners.get(name).plan(problem))" if isinstance(plan, str) else ""
        raise ParameterError(f"apply: plan: expected a Plan{hint}; got {plan!r}"[:200])
    return Execution(model, plan, graph, problem=problem, issue_points=issue_points, track=track,
                     host_lead=host_lead, hold_budget=hold_budget)


def run_step(model, plan, graph, inputs, loss_fn=None, **kw) -> ExecStats:
    """One forward + loss + backward of ``model`` on ``inputs`` under ``plan`` (the loss as in
    ``trace``: ``loss_fn(output, *inputs)``, default ``output.loss`` or the output's sum). Returns
    the step's ``ExecStats`` with the loss, detached, in ``stats.loss``."""
    from .trace import _default_loss  # optional dependency (torch)

    args = tuple(inputs.values()) if isinstance(inputs, dict) else tuple(inputs)
    with apply(model, plan, graph, **kw) as run:
        out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        loss = (loss_fn or _default_loss)(out, *args)
        del out
        loss.backward()
    run.stats.loss = loss.detach()
    return run.stats
