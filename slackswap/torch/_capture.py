"""Recording one training step: every aten op (``TorchDispatchMode``), every saved tensor
(``saved_tensors_hooks``) and the module each op runs in (module hooks). See docs/trace.md.

A forward call is matched to the autograd node it creates by the autograd sequence number: a
differentiable op creates its node (taking number n) before its kernel is dispatched, so the
kernel, and every pack-hook call of that node (inputs before the kernel, outputs after), sees
``_get_sequence_nr() == n + 1``; during backward ``_current_autograd_node()._sequence_nr() == n``
names the same node, hence the forward op whose backward is running.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

_seq_peek = torch._C._autograd._get_sequence_nr
_current_node = torch._C._current_autograd_node
_F = torch.nn.functional
_LOCAL_SCALAR = torch.ops.aten._local_scalar_dense.default


def storage_key(t) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, AttributeError):
        return None


def nbytes(t) -> int:
    return t.numel() * t.element_size()


@dataclass
class Call:
    """One aten op dispatched during the forward (+ loss)."""

    func: object
    seq: int
    module: str
    ins: dict            # storage key -> storage bytes, of tensor arguments (in order)
    outs: list           # (storage key, storage bytes, dtype, numel) of tensor outputs
    writes: list         # storage keys mutated in place
    flops: float
    read: int
    written: int
    seconds: float = 0.0


@dataclass
class Recording:
    calls: list = field(default_factory=list)
    packs: list = field(default_factory=list)     # (calls so far, sequence number, storage key)
    bwd: list = field(default_factory=list)       # (node seq or None, flops, bytes, seconds)
    keep: list = field(default_factory=list)      # storages held so that no id is reused


def _flops(func, args, kwargs, out) -> float:
    fn = flop_registry.get(func._overloadpacket)
    if fn is None:
        return 0.0
    try:
        return float(fn(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not cover this overload: count nothing
        return 0.0


def _written_args(func, args, kwargs) -> list:
    """Tensors the op mutates (schema arguments with a write alias: in-place and out= ops)."""
    out = []
    schema = func._schema
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        if isinstance(v, torch.Tensor):
            out.append(v)
    return out


# GPU cycles of the queued sleep behind which an op's kernels are launched: about 50 us at the
# H100/H200 boost clock, longer than the host needs to dispatch one aten op
_SLEEP_CYCLES = 100_000


def _cuda_timed(func, args, kwargs, sync):
    """Run ``func`` on CUDA and return ``(out, seconds)``: the op's time in a step where the host
    keeps the GPU fed, ``max(GPU time, host dispatch time)``. The kernels are queued behind a GPU
    sleep, so the events around them measure GPU time alone (no launch gap, no synchronize); the
    host time is the dispatch alone, which a real step overlaps with earlier kernels. Timing with
    ``synchronize`` around each op instead adds the launch and synchronize latency to every op
    (tens of microseconds, a quarter of a GPT-2 124M step at batch 8 x 1024)."""
    sync()
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(_SLEEP_CYCLES)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    out = func(*args, **kwargs)
    host = time.perf_counter() - t0
    end.record()
    end.synchronize()
    return out, max(start.elapsed_time(end) / 1e3, host)


class Recorder(TorchDispatchMode):
    """Records forward calls while ``phase == "fwd"`` and attributes backward calls to nodes."""

    def __init__(self, rec: Recording, module_stack: list, timed: bool, sync=None):
        super().__init__()
        self.rec, self.stack, self.timed, self.sync = rec, module_stack, timed, sync
        self.phase = "fwd"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _LOCAL_SCALAR and args[0].device.type == "meta":
            # a value read on meta (``if mask.all():``): True for bool, 0 otherwise (docs/trace.md)
            return True if args[0].dtype == torch.bool else 0
        if self.timed and self.sync:
            out, dt = _cuda_timed(func, args, kwargs, self.sync)
        elif self.timed:
            t0 = time.perf_counter()
            out = func(*args, **kwargs)
            dt = time.perf_counter() - t0
        else:
            out = func(*args, **kwargs)
            dt = 0.0
        flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        flat_out = [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)]
        read = sum(nbytes(a) for a in flat_in)
        written = sum(nbytes(a) for a in flat_out)
        flops = _flops(func, args, kwargs, out)
        if self.phase == "fwd":
            ins = {}
            for a in flat_in:
                k = storage_key(a)
                if k is not None and k not in ins:
                    ins[k] = a.untyped_storage().nbytes()
            outs = [(storage_key(t), t.untyped_storage().nbytes(), t.dtype, t.numel())
                    for t in flat_out]
            writes = [storage_key(t) for t in _written_args(func, args, kwargs)]
            self.rec.calls.append(Call(func, _seq_peek(), self.stack[-1] if self.stack else "",
                                       ins, [o for o in outs if o[0] is not None],
                                       [w for w in writes if w is not None], flops, read, written, dt))
            # hold the storages (not the tensors: a held tensor changes what PyTorch dispatches,
            # e.g. an extra ``detach``) so that no storage id is reused during the step
            self.rec.keep.append([t.untyped_storage() for t in flat_out])
        else:
            node = _current_node()
            ins = {storage_key(a) for a in flat_in}
            view = bool(flat_out) and all(storage_key(t) in ins for t in flat_out)
            self.rec.bwd.append((None if node is None else node._sequence_nr(), flops,
                                 0 if view else read + written, dt))  # a view moves no bytes
        return out


class CudaKernels(TorchFunctionMode):
    """Run attention and dropout as PyTorch runs them on a CUDA GPU, whatever the trace device.

    ``F.scaled_dot_product_attention`` without a mask becomes the flash kernel (saves q, k, v, the
    output and an fp32 log-sum-exp; the math fallback PyTorch picks on meta/CPU with dropout saves
    the ``s x s`` probabilities); ``F.dropout`` in training becomes ``native_dropout`` (saves a
    1-byte mask; the CPU/meta path saves a mask of the input's dtype).
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _F.dropout:
            kw = dict(zip(("input", "p", "training", "inplace"), args, strict=False))
            kw.update(kwargs)
            p, training = float(kw.get("p", 0.5)), bool(kw.get("training", True))
            if training and 0.0 < p < 1.0 and not kw.get("inplace", False):
                return torch.ops.aten.native_dropout(kw["input"], p, True)[0]
        if func is _F.scaled_dot_product_attention:
            names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                     "enable_gqa")
            kw = dict(zip(names, args, strict=False))
            kw.update(kwargs)
            q, k, v = kw["query"], kw["key"], kw["value"]
            if kw.get("attn_mask") is None and q.shape[-3] == k.shape[-3] == v.shape[-3]:
                res = torch.ops.aten._scaled_dot_product_flash_attention(
                    q, k, v, float(kw.get("dropout_p", 0.0)), bool(kw.get("is_causal", False)),
                    False, scale=kw.get("scale"))
                return res[0]
        return func(*args, **kwargs)


def module_hooks(model, stack: list) -> list:
    """Forward pre/post hooks on every submodule that maintain ``stack`` (qualified names)."""
    handles = []
    for name, mod in model.named_modules():
        def pre(_m, _a, name=name):
            stack.append(name)

        def post(_m, _a, _o):
            stack.pop()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post, always_call=True))
    return handles
