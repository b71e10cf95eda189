"""Forward recording for the executor (docs/executor.md, "Recompute").

While a planned step runs its forward pass, a ``TorchDispatchMode`` records every aten call with
the storages it reads and the storages it creates or mutates. A RECOMPUTE tensor is then rebuilt
in the backward pass by replaying the calls that made its storage, their own inputs resolved by
the plan (kept, fetched from host, or rebuilt the same way). Records hold no reference to a tensor
made in the step, only to parameters, buffers and step inputs (alive anyway), so recording keeps
no activation alive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..core.errors import ExecutionError

_SEEDED = getattr(torch.Tag, "nondeterministic_seeded", None)
#: calls left out when a run is matched against its trace: they make no storage, and autograd
#: dispatches a ``detach`` for some saved outputs depending on which hooks are active
_UNCHECKED = frozenset({"aten.detach.default", "aten.alias.default"})


def storage_key(t: torch.Tensor) -> int | None:
    """Identity of a tensor's storage while it lives (None for an empty storage)."""
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


@dataclass(eq=False)
class StorageRec:
    """One storage made in the forward pass: the calls that created it, then mutated it."""

    key: int
    nbytes: int
    calls: list = field(default_factory=list)   # [(Call, output leaf index)]
    created_step: int = 0
    last_read_step: int = 0
    read_since_write: bool = False
    tid: int | None = None                      # graph tensor id, once packed
    tid_version: int = 0                        # the storage version that tensor is
    versions: dict = field(default_factory=dict)  # version -> graph tensor id (from the trace)
    weak: object = None                         # StorageWeakRef: expired once the storage is freed


@dataclass(eq=False)
class Ref:
    """A tensor argument of a recorded call: a constant, or a view of a recorded storage at the
    version it had when the call ran."""

    const: torch.Tensor | None
    rec: StorageRec | None = None
    version: int = 0
    size: tuple = ()
    stride: tuple = ()
    offset: int = 0
    dtype: torch.dtype | None = None


@dataclass(eq=False)
class Call:
    func: object
    spec: object
    leaves: list
    step: int
    rng: tuple | None = None
    created: list = field(default_factory=list)   # [(leaf index, StorageRec)]
    fused: bool = False   # an in-place call on a storage nobody read since its last write


def view_of(base: torch.Tensor, ref: Ref) -> torch.Tensor:
    """The view ``ref`` describes, on the storage of ``base``."""
    out = torch.empty(0, dtype=ref.dtype, device=base.device)
    return out.set_(base.untyped_storage(), ref.offset, ref.size, ref.stride)


def describe(t: torch.Tensor, rec: StorageRec | None, const: torch.Tensor | None = None) -> Ref:
    return Ref(const, rec, len(rec.calls) if rec is not None else 0, tuple(t.shape), tuple(t.stride()),
               t.storage_offset(), t.dtype)


class Recorder(TorchDispatchMode):
    """Records the forward aten calls of a step, checking each against the trace's ``expected``
    sequence; passes calls through once ``active`` is False (backward pass, replays, hooks)."""

    def __init__(self, expected=None, made=None):
        super().__init__()
        self.expected = None if expected is None else [f for f in expected if f not in _UNCHECKED]
        # per checked call: the graph tensors the trace saw it make (TraceInfo.call_tensors)
        self.made = None if expected is None or not made else \
            [m for f, m in zip(expected, made, strict=True) if f not in _UNCHECKED]
        self.active = True
        self.n_calls = 0            # forward calls seen (folded ones too)
        self.step = 0               # forward calls that made or wrote a storage
        self.live: dict[int, StorageRec] = {}
        self.extra: list[str] = []  # calls after the traced forward, before the backward pass
        self.hint = ""              # put before a mismatch message (a graph traced on meta)
        self.made_recs: list[StorageRec] | None = None   # every record made, when a list is given

    def lookup(self, k) -> StorageRec | None:
        """The record of the live storage with key ``k``: None when there is none, or when the
        storage recorded there has been freed (its address may now hold a tensor made outside
        the recorder, such as a constant from ``torch.tensor``; it must not be taken for it)."""
        rec = self.live.get(k) if k is not None else None
        if rec is not None and rec.weak is not None and rec.weak.expired():
            del self.live[k]
            return None
        return rec

    def check_complete(self) -> None:
        extra = [f for f in self.extra if f != "aten.ones_like.default"]
        if self.expected is not None and (self.n_calls != len(self.expected) or extra):
            raise ExecutionError(f"{self.hint}model: the step ran {self.n_calls + len(extra)} aten ops in its forward pass, "
                                 f"its trace {len(self.expected)}; the model or its inputs differ "
                                 "from the traced ones")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.active:
            return func(*args, **kwargs)
        if self.expected is not None and str(func) not in _UNCHECKED:
            i = self.n_calls
            if i >= len(self.expected):   # past the traced forward: backward() seeds its gradient
                if torch._C._current_graph_task_id() == -1:
                    self.extra.append(str(func))
                return func(*args, **kwargs)
            if self.expected[i] != str(func):
                raise ExecutionError(f"{self.hint}model: aten op {i} of the step is {func}, its trace has "
                                     f"{self.expected[i]}; "
                                     "the model or its input shapes differ from the traced ones")
            self.n_calls += 1
            idx = i
        else:
            idx = None
        rng = None
        if _SEEDED is not None and _SEEDED in func.tags:
            rng = _rng_state(args, kwargs)
        out = func(*args, **kwargs)
        leaves, spec = tree_flatten((args, kwargs))
        call = Call(func, spec, [], self.step, rng)
        in_keys = set()
        for x in leaves:
            if isinstance(x, torch.Tensor):
                k = storage_key(x)
                in_keys.add(k)
                rec = self.lookup(k)
                if rec is not None:
                    call.leaves.append(describe(x, rec))
                else:
                    call.leaves.append(Ref(x))
            else:
                call.leaves.append(x)
        mutable = func._schema.is_mutable
        real = False
        wrote = []
        for i, y in enumerate(tree_flatten(out)[0]):
            if not isinstance(y, torch.Tensor):
                continue
            k = storage_key(y)
            if k is None:
                continue
            if k in in_keys:
                if mutable and k in self.live:
                    rec = self.live[k]
                    w_step = rec.calls[-1][0].step
                    # as the trace fuses it (_assemble.py): unread since its write, and every
                    # other input written before the writer ran
                    call.fused = not rec.read_since_write and all(
                        q not in self.live or q == k or self.live[q].calls[-1][0].step < w_step
                        for q in in_keys)
                    rec.calls.append((call, i))
                    rec.read_since_write = False
                    wrote.append(rec)
                    real = True
                continue
            if any(r.key == k for _, r in call.created):
                continue   # a second output on a storage this call just made
            rec = StorageRec(k, y.untyped_storage().nbytes(), created_step=self.step,
                             last_read_step=self.step, weak=StorageWeakRef(y.untyped_storage()))
            rec.calls.append((call, i))
            call.created.append((i, rec))
            self.live[k] = rec
            if self.made_recs is not None:
                self.made_recs.append(rec)
            real = True
        if self.made is not None and real and idx is not None:
            _name(self.made[idx], [r for _, r in call.created], wrote)
        if real:
            written = {r.key for _, r in call.created} | {k for k in in_keys if k in self.live
                                                           and self.live[k].calls[-1][0] is call}
            for k in in_keys:
                if k in self.live:
                    self.live[k].last_read_step = self.step
                    if k not in written:
                        self.live[k].read_since_write = True
            self.step += 1
        return out


def _name(tids, created, wrote) -> None:
    """Give each storage version a call made the graph tensor id the trace gave it
    (``StorageRec.versions``): created storages first, then the written ones. A write the trace
    fused into its writer is the writer's tensor; counts that differ from the trace name only
    the created storages."""
    if len(tids) < len(created):
        return
    for rec, t in zip(created, tids, strict=False):
        rec.versions[len(rec.calls)] = t
    rest = tids[len(created):]
    for j, rec in enumerate(wrote):
        v = len(rec.calls)
        if not rest:
            if v - 1 in rec.versions:
                rec.versions[v] = rec.versions[v - 1]
        elif len(rest) == len(wrote):
            rec.versions[v] = rest[j]


def _rng_state(args, kwargs):
    devs = {x.device for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)}
    cuda = [d for d in devs if d.type == "cuda"]
    return (torch.get_rng_state(), {d.index: torch.cuda.get_rng_state(d) for d in cuda})


def replay(call: Call, resolve, protect=frozenset()):
    """Run ``call`` again with its tensor arguments resolved by ``resolve(ref)``; returns the
    flat outputs. Tensors whose storage is in ``protect`` (module buffers) are passed as copies,
    so a re-run never writes them twice (batch-norm running statistics)."""
    from torch.utils._pytree import tree_unflatten  # optional dependency (torch)

    leaves = [x if not isinstance(x, Ref) else
              x.const.clone() if x.rec is None and storage_key(x.const) in protect else resolve(x)
              for x in call.leaves]
    args, kwargs = tree_unflatten(leaves, call.spec)
    with torch.no_grad():
        if call.rng is None:
            out = call.func(*args, **kwargs)
        else:
            cpu, cuda = call.rng
            with torch.random.fork_rng(devices=list(cuda)):
                torch.set_rng_state(cpu)
                for d, s in cuda.items():
                    torch.cuda.set_rng_state(s, d)
                out = call.func(*args, **kwargs)
    return tree_flatten(out)[0]
