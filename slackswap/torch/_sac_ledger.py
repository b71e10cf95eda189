"""The saved-activation accounting of a step run with ``policy(plan, graph)`` (docs/policy.md,
"What a policy run holds: `CheckpointPlanPolicy.track()`").

One ``TorchDispatchMode``, entered around the forward and backward pass, sees every aten call of
the step (the regions' replays included). It counts the bytes of planning tensors (tensors some
backward op saves) held at each step, as ``apply``'s accounting does (docs/executor.md, "The
saved-activation accounting"), but reads the lifetimes from the run instead of from the plan:

* forward: the storage each call makes is named by the trace (``TraceInfo.call_tensors``; the
  executor's ``Recorder``), and lives from that call to the last forward call that reads it;
* a storage still allocated when the backward pass begins is held by autograd or by the
  checkpoint (saved outside a region, cached by the policy, a region's input), and lives until
  the last backward call before PyTorch frees it (``StorageWeakRef.expired``, checked at every
  backward call);
* a call a region replays is named by the traced call it repeats (the region's calls, in order,
  less those the policy saved), and what it makes lives from there until freed, the same way.

Steps are the forward calls that make or write a storage, then every backward call.
"""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..core.errors import ExecutionError
from . import _ledger
from ._record import Recorder, storage_key

try:   # the ops selective checkpointing neither asks the policy about nor caches
    from torch.utils.checkpoint import SAC_IGNORED_OPS as _SAC_IGNORED
except ImportError:  # pragma: no cover - older PyTorch
    _SAC_IGNORED = {torch.ops.aten.detach.default}


class _Live:
    """One planning tensor's storage while the backward pass may hold it."""

    __slots__ = ("tid", "start", "last", "weak")

    def __init__(self, tid, start, weak):
        self.tid, self.start, self.last, self.weak = tid, start, start, weak


class SacLedger(TorchDispatchMode):
    """The dispatch mode of ``CheckpointPlanPolicy.track()``; ``finish()`` returns the peak."""

    def __init__(self, pol):
        super().__init__()
        info = pol.graph.spec
        self.pol = pol
        self.planning = {t.id for t in pol.graph.planning_tensors()}
        self.sizes = [t.bytes for t in pol.graph.tensors]
        self.rec = Recorder(info.aten_ops, info.call_tensors)
        self.rec.made_recs = []
        self.spans: list[tuple[int, int, int]] = []   # (first, last step, bytes)
        self.live: dict[int, _Live] = {}       # storage key -> what holds it in the backward pass
        self.backward = False
        self.step = 0
        self.replayed = 0                       # replayed calls named by a traced call
        self._replay: tuple | None = None        # (region's calls, position) while one replays

    # ---- forward ----
    def _begin_backward(self) -> None:
        self.backward = True
        self.rec.active = False
        self.rec.check_complete()
        self.step = self.rec.step
        for r in self.rec.made_recs:
            named = sorted((v, t) for v, t in r.versions.items())
            for j, (v, tid) in enumerate(named):
                start = r.calls[v - 1][0].step
                if j + 1 < len(named):                        # overwritten in place by a later call
                    end = r.calls[named[j + 1][0] - 1][0].step
                    if tid in self.planning:
                        self.spans.append((start, end, self.sizes[tid]))
                elif tid in self.planning:
                    if r.weak is not None and not r.weak.expired():
                        lv = _Live(tid, start, r.weak)
                        lv.last = max(r.last_read_step, self.step)
                        self.live[r.key] = lv
                    else:
                        self.spans.append((start, max(start, r.last_read_step), self.sizes[tid]))
        self.rec.made_recs = None

    # ---- backward ----
    def _reap(self) -> None:
        for k in [k for k, lv in self.live.items() if lv.weak.expired()]:
            self._close(self.live.pop(k))
        for lv in self.live.values():
            lv.last = self.step

    def _close(self, lv: _Live) -> None:
        self.spans.append((lv.start, lv.last, self.sizes[lv.tid]))

    def _name_replay(self, func, args, kwargs, out) -> None:
        calls, j = self._replay
        name = str(func)
        aten = self.pol.aten_ops
        while j < len(calls) and (self.pol.saved_call(calls[j]) or aten[calls[j]] != name):
            j += 1
        if j >= len(calls):
            raise ExecutionError(f"model: the replayed call {name} matches no call of its region's "
                                 "traced forward; the model or its input shapes differ from the "
                                 "traced ones")
        k = calls[j]
        self._replay = (calls, j + 1)
        self.replayed += 1
        made = self.pol.made[k]
        if not made:
            return
        in_keys = {storage_key(x) for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)}
        created, wrote, seen = [], [], set()
        for y in tree_flatten(out)[0]:
            key = storage_key(y) if isinstance(y, torch.Tensor) else None
            if key is None or key in seen:
                continue
            seen.add(key)
            if key in in_keys:
                wrote.append((key, None))        # written in place: a new version
            else:
                created.append((key, y))
        for (key, y), tid in zip(created + wrote, made, strict=False):
            old = self.live.pop(key, None)
            if old is not None:
                old.last = self.step
                self._close(old)
                weak = old.weak
            elif y is not None:
                weak = StorageWeakRef(y.untyped_storage())
            else:
                continue
            if tid in self.planning:
                self.live[key] = _Live(tid, self.step, weak)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.backward:
            if torch._C._current_graph_task_id() == -1:
                return self.rec.__torch_dispatch__(func, types, args, kwargs)
            self._begin_backward()
        self._reap()
        region = self.pol.replaying
        if (self._replay[0] if self._replay else None) is not region:
            self._replay = None if region is None else (region, 0)
        out = func(*args, **kwargs)
        if self._replay is not None and func not in _SAC_IGNORED:
            self._name_replay(func, args, kwargs, out)
        self.step += 1
        return out

    def finish(self) -> int:
        """The peak, once the step has run (its backward pass included)."""
        if not self.backward:
            raise ExecutionError("track: the step ran no backward pass inside the `with` block; "
                                 "run the forward and the backward pass there")
        for lv in self.live.values():
            self._close(lv)
        self.live.clear()
        return _ledger.peak_of(self.spans, self.step + 1)
