"""A plan as a selective activation checkpointing policy (docs/policy.md, "Selective
checkpointing policy: `slackswap.torch.policy`").

``policy(plan, graph)`` returns a ``context_fn`` for ``torch.utils.checkpoint.checkpoint``: inside
every region the user wraps, the output of each aten call is saved (``MUST_SAVE``) when the plan
keeps a tensor that call made, and recomputed (``MUST_RECOMPUTE``) otherwise.

>>> import torch
>>> from torch.utils.checkpoint import checkpoint
>>> from slackswap import Decision, Plan
>>> from slackswap.torch import policy, trace
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
>>> x = torch.randn(4, 8)
>>> g = trace(net, (x,), device="cpu")
>>> plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})   # the tanh output
>>> pol = policy(plan, g)
>>> checkpoint(net, x, use_reentrant=False, context_fn=pol).sum().backward()
>>> dict(pol.counts)          # the tanh saved; t, addmm, t, addmm recomputed
{'recompute': 4, 'save': 1}
"""

from __future__ import annotations

import functools
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from ..core.errors import ConfigError, ExecutionError, ParameterError
from ..core.plan import Decision, Plan
from ._check import check_plan

__all__ = ["SWAP_AS", "CheckpointPlanPolicy", "PolicyRun", "offload_supported", "policy"]

#: how a SWAP decision can be given to selective checkpointing
SWAP_AS = ("save", "offload", "recompute")
_IGNORED = frozenset({"aten.detach.default", "prim.device.default"})   # SAC never asks for these


def offload_supported() -> bool:
    """Does this PyTorch's ``CheckpointPolicy`` have ``MUST_CPU_OFFLOAD``? (Having it is not
    honouring it: docs/policy.md says where it is honoured.)"""
    return hasattr(CheckpointPolicy, "MUST_CPU_OFFLOAD")


def policy(plan: Plan, graph, *, swap: str = "save") -> CheckpointPlanPolicy:
    """The plan as a ``context_fn`` for ``torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False, context_fn=policy(plan, graph))``, per layer or per any region.

    ``graph``: the ``trace`` of the same model and input shapes. ``swap``: what a SWAP decision
    becomes: ``"save"`` (``MUST_SAVE``: kept, default), ``"offload"`` (``MUST_CPU_OFFLOAD``,
    which only ``torch.compile`` with activation offloading honours; eager checkpointing
    recomputes it) or ``"recompute"`` (``MUST_RECOMPUTE``).
    """
    if not isinstance(plan, Plan):
        raise ParameterError(f"policy: plan: expected a Plan; got {type(plan).__name__}")
    if swap not in SWAP_AS:
        raise ConfigError(f"policy: swap: must be one of {', '.join(SWAP_AS)}; got {swap!r}")
    if swap == "offload" and not offload_supported():
        raise ConfigError(f"policy: swap: 'offload' needs CheckpointPolicy.MUST_CPU_OFFLOAD, which "
                          f"PyTorch {torch.__version__} does not have; use 'save' or 'recompute'")
    check_plan(plan, graph)
    return CheckpointPlanPolicy(plan, graph, swap)


class _RecomputeMode(TorchDispatchMode):
    """The recompute context of one region: marks that a backward pass has run (so the next
    region starts a new step), then hands every call to selective checkpointing's own mode."""

    def __init__(self, inner, owner, region):
        super().__init__()
        self.inner, self.owner, self.region = inner, owner, region

    def __enter__(self):
        self.owner._backward_seen = True
        self.owner.replaying = self.region
        return self.inner.__enter__()

    def __exit__(self, *exc):
        self.owner.replaying = None
        return self.inner.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # pragma: no cover - never pushed
        return func(*args, **(kwargs or {}))


class CheckpointPlanPolicy:
    """A ``context_fn``: each call returns the two contexts of one checkpointed region.

    The aten calls of the regions are matched, in order, to the traced forward
    (``TraceInfo.aten_ops``): each call of a region is the next traced call of the same aten op
    whose made tensors have the bytes of the call's outputs; calls outside every region are
    skipped. The first region after a backward pass starts a new step (``reset()`` does it by
    hand). ``counts``: the policies returned, ``"save"``, ``"recompute"``, ``"offload"``.
    ``not_saved``: graph tensors the plan keeps (or swaps) that are recomputed all the same,
    being written in place (selective checkpointing cannot cache those).
    """

    def __init__(self, plan: Plan, graph, swap: str):
        info = graph.spec
        self.graph, self.swap = graph, swap
        self.aten_ops = info.aten_ops
        self.made = info.call_tensors
        if not self.made:
            raise ExecutionError(f"graph: {graph.name!r} has no per-call tensors "
                                 "(TraceInfo.call_tensors); trace it again with this version")
        dec = plan.decisions
        swap_policy = {"save": CheckpointPolicy.MUST_SAVE, "recompute": CheckpointPolicy.MUST_RECOMPUTE,
                       "offload": getattr(CheckpointPolicy, "MUST_CPU_OFFLOAD", None)}[swap]
        self.policies = []
        for made in self.made:
            ds = {dec.get(t) for t in made}
            if Decision.KEEP in ds:
                p = CheckpointPolicy.MUST_SAVE
            elif Decision.SWAP in ds:
                p = swap_policy
            else:           # RECOMPUTE, a tensor no op saves, or nothing made: rebuilt when needed
                p = CheckpointPolicy.MUST_RECOMPUTE
            self.policies.append(p)
        self.not_saved: list[int] = []
        self._unsave_written(info.call_ops, dec)
        self.bytes = [[graph.tensors[t].bytes for t in made] for made in self.made]
        self.counts: Counter = Counter()
        self.pos = 0
        self._backward_seen = False
        self._region: list[int] = []          # the traced calls of the region running forward
        #: the traced calls of the region being replayed (None outside a replay)
        self.replaying: list[int] | None = None

    def _unsave_written(self, call_ops, dec) -> None:
        """Selective checkpointing cannot save what is written in place: autograd bumps the
        version of an in-place call's output after the call, and an op the trace fused in-place
        writes into (a BatchNorm then ``relu_``) has its output written by a later call; either
        cached, the backward pass stops with "Tensor cached during selective activation
        checkpoint has been mutated". Those calls are recomputed; the tensors the plan kept or
        swapped there are listed in ``not_saved``."""
        written = set()
        for k, name in enumerate(self.aten_ops):
            if _in_place(name):
                if call_ops and call_ops[k] >= 0 and not self.made[k]:
                    written.add(call_ops[k])          # a write fused into op call_ops[k]
                self._recompute(k, dec)
        if call_ops:
            for k, op in enumerate(call_ops):
                if op in written and self.made[k]:
                    self._recompute(k, dec)

    def _recompute(self, k, dec) -> None:
        if self.policies[k] is not CheckpointPolicy.MUST_RECOMPUTE:
            self.policies[k] = CheckpointPolicy.MUST_RECOMPUTE
            self.not_saved.extend(t for t in self.made[k] if dec.get(t) in (Decision.KEEP, Decision.SWAP))

    @property
    def context_fn(self):
        """The same policy as a ``functools.partial``, the form ``torch.compile`` accepts as a
        ``context_fn`` (it refuses other callables). Under ``torch.compile`` the policy is asked
        while the region is compiled, once per tracing pass, not at every step."""
        return functools.partial(create_selective_checkpoint_contexts, self.policy_fn)

    def reset(self) -> None:
        """The next region call is matched from the start of the traced forward."""
        self.pos = 0
        self._backward_seen = False

    def __call__(self):
        if self._backward_seen:
            self.reset()
        fwd, rec = create_selective_checkpoint_contexts(self.policy_fn)
        self._region = []
        return fwd, _RecomputeMode(rec, self, self._region)

    def saved_call(self, k: int) -> bool:
        """Is the output of traced call ``k`` saved (cached, so never replayed)?"""
        return self.policies[k] is CheckpointPolicy.MUST_SAVE

    def track(self) -> PolicyRun:
        """A context manager around one eager step (its forward and backward pass) run with this
        policy: counts the saved-activation bytes the step holds (docs/policy.md, "What a
        policy run holds: `CheckpointPlanPolicy.track()`"). After the block,
        ``run.peak_saved_bytes`` is the peak, the value ``simulated_saved_peak(graph, plan,
        regions=..., swap=...)`` gives for the same regions.

        >>> with pol.track() as run:                      # doctest: +SKIP
        ...     model(**inputs).loss.backward()
        >>> run.peak_saved_bytes                          # doctest: +SKIP
        """
        return PolicyRun(self)

    def _match(self, name: str, out) -> int | None:
        nbytes = None
        # from the last match on; then from the start (torch.compile traces a region more than
        # once, with no backward pass in between)
        for k in (*range(self.pos, len(self.aten_ops)), *range(self.pos)):
            if self.aten_ops[k] != name:
                continue
            want = self.bytes[k]
            if want and out is not None:   # PyTorch versions whose context has the output
                if nbytes is None:
                    nbytes = sorted(t.untyped_storage().nbytes() for t in _tensors(out))
                if not set(want) <= set(nbytes):
                    continue
            return k
        return None

    def policy_fn(self, ctx, op, *args, **kwargs):
        """The ``policy_fn`` of ``create_selective_checkpoint_contexts``."""
        name = str(op)
        if name in _IGNORED:
            return CheckpointPolicy.PREFER_RECOMPUTE
        k = self._match(name, getattr(ctx, "op_output", None))
        if k is None:
            hint = ""
            if self.graph.spec.device == "meta":
                hint = (f"graph: traced on meta (kernels={self.graph.spec.kernels!r}), where PyTorch "
                        "may run other kernels than where the model runs; trace it there. ")
            raise ExecutionError(f"{hint}model: the checkpointed call {name} matches no call of the traced "
                                 f"forward ({len(self.aten_ops)} calls); the model or its input "
                                 "shapes differ from the traced ones")
        self.pos = k + 1
        if not getattr(ctx, "is_recompute", False):
            self._region.append(k)
        p = self.policies[k]
        self.counts[_NAMES[p]] += 1
        return p


class PolicyRun:
    """What ``CheckpointPlanPolicy.track()`` counted in one step: ``peak_saved_bytes`` (None
    until the block ends), ``replayed_calls`` (calls the regions re-ran in the backward pass)."""

    def __init__(self, pol: CheckpointPlanPolicy):
        self.pol = pol
        self.peak_saved_bytes: int | None = None
        self.replayed_calls = 0
        self._mode = None

    def __enter__(self) -> PolicyRun:
        from ._sac_ledger import SacLedger

        if self._mode is not None:
            raise ExecutionError("track: this run is already recording; call pol.track() again "
                                 "for another step")
        self.pol.reset()
        self._mode = SacLedger(self.pol)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        mode, self._mode = self._mode, None
        mode.__exit__(*exc)
        if exc[0] is None:
            self.peak_saved_bytes = mode.finish()
            self.replayed_calls = mode.replayed


def _in_place(name: str) -> bool:
    """``aten.relu_.default`` and the like: an aten op whose name ends in an underscore."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[1].endswith("_") and not parts[1].startswith("_")


def _tensors(out):
    from torch.utils._pytree import tree_flatten  # optional dependency (torch)

    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


_NAMES = {CheckpointPolicy.MUST_SAVE: "save", CheckpointPolicy.MUST_RECOMPUTE: "recompute"}
if offload_supported():
    _NAMES[CheckpointPolicy.MUST_CPU_OFFLOAD] = "offload"
