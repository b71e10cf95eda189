"""``trace``: the ``Graph`` of one real PyTorch training step (docs/trace.md).

>>> import torch
>>> from slackswap.torch import trace
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
>>> g = trace(net, (torch.randn(4, 8),), device="cpu")
>>> [op.kind for op in g.ops][:3], g.spec.params
(['matmul', 'elementwise', 'matmul'], 161)
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable, Mapping

import torch

from ..core.errors import ConfigError, SlackSwapWarning
from ..core.graph import BYTES_PER_PARAM, Graph, Op, Tensor
from ._assemble import assemble, op_kind
from ._capture import CudaKernels, Recorder, Recording, module_hooks, storage_key
from ._info import TraceInfo

__all__ = ["TraceInfo", "block_layers", "trace"]

DEVICES = ("meta", "cpu", "cuda")
KERNELS = ("auto", "cuda", "native")
_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def block_layers(model: torch.nn.Module) -> Callable[[str], int | None]:
    """The default ``layer_of``: the ``ModuleList``/``Sequential`` of two or more same-class
    children holding the most parameters is the block list (``transformer.h``,
    ``bert.encoder.layer``, ``model.layers``); a module inside its i-th child is layer i, any
    other module (embeddings, head, loss) has no layer."""
    best, best_n = None, 0
    for name, mod in model.named_modules():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)) or len(mod) < 2:
            continue
        kids = list(mod.children())
        if len({type(k) for k in kids}) != 1:
            continue
        n = sum(p.numel() for p in mod.parameters())
        if n > best_n:
            best, best_n = name, n
    if best is None:
        return lambda path: None
    prefix = best + "." if best else ""

    def layer_of(path: str) -> int | None:
        if not path.startswith(prefix):
            return None
        head = path[len(prefix):].split(".", 1)[0]
        return int(head) if head.isdigit() else None

    return layer_of


def _default_loss(out, *inputs):
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(out, Mapping):
        out = next(iter(out.values()))
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise ConfigError(f"loss_fn: the model returned {type(out).__name__}; pass loss_fn=")
    return out.float().sum()


def _move(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _move(v, device) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_move(v, device) for v in x)
    return x


def _warn_if_checkpointing(model: torch.nn.Module) -> None:
    """Warn when the model checkpoints itself (HF ``gradient_checkpointing_enable()`` sets
    ``gradient_checkpointing = True`` on the modules it wraps): its blocks then save only their
    inputs, so the graph holds a handful of tensors and a plan has almost nothing to decide."""
    on = [name or type(model).__name__ for name, m in model.named_modules()
          if getattr(m, "gradient_checkpointing", False) is True]
    if on:   # the trace runs the step in training mode, where HF checkpoints
        warnings.warn(f"trace: the model checkpoints itself (gradient checkpointing is enabled on "
                      f"{', '.join(on[:3])}{', ...' if len(on) > 3 else ''}): each checkpointed "
                      "block saves only its input, so the graph has few tensors to plan; disable it "
                      "before tracing to plan every activation (HF: model.gradient_checkpointing_"
                      "disable(), or activation_checkpointing_disable() in newer transformers)",
                      SlackSwapWarning, stacklevel=3)


def trace(model: torch.nn.Module, example_inputs, loss_fn=None, *, device: str = "meta",
          layer_of: Callable[[str], int | None] | None = None, name: str | None = None,
          kernels: str = "auto") -> Graph:
    """Run one forward + loss + backward of ``model`` on ``device`` and return its ``Graph``.

    ``example_inputs``: a tuple of positional arguments or a dict of keyword arguments of
    ``model``; tensors are moved to ``device``, and so is the model (a copy when it lives on
    another device). ``loss_fn(output, *inputs)``: default ``output.loss`` when the output has one
    (HF models given ``labels``), else the sum of the output (its first element if a tuple).
    ``layer_of(module_path) -> int | None``: the layer of an op from the qualified name of the
    innermost module running it (default ``block_layers(model)``). ``kernels``: ``"cuda"`` runs
    attention and dropout as on a CUDA GPU (flash attention, ``native_dropout``), ``"native"`` as
    PyTorch chooses on ``device``; ``"auto"`` = ``"cuda"`` on meta, else ``"native"``.
    On cpu/cuda every op is timed (``graph.spec.op_times_s``).
    """
    if device not in DEVICES:
        raise ConfigError(f"device: must be one of {', '.join(DEVICES)}; got {device!r}")
    if kernels not in KERNELS:
        raise ConfigError(f"kernels: must be one of {', '.join(KERNELS)}; got {kernels!r}")
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(example_inputs, (tuple, list, Mapping)):
        raise ConfigError("example_inputs: expected a tuple of positional arguments or a dict "
                          f"of keyword arguments; got {type(example_inputs).__name__}")
    if isinstance(example_inputs, Mapping):
        for k in example_inputs:
            if not isinstance(k, str):
                raise ConfigError("trace: example_inputs: expected a dict of keyword arguments "
                                  f"(string keys); got key {k!r}")
    if device == "cuda":
        from ._check import check_device
        check_device(device, "trace")
    if kernels == "auto":
        kernels = "cuda" if device == "meta" else "native"
    _warn_if_checkpointing(model)
    t_start = time.perf_counter()
    dev = torch.device(device)
    params = list(model.parameters())
    if any(p.device.type != dev.type for p in params):
        if dev.type != "meta" and any(p.is_meta for p in params):
            raise ConfigError(f"device: the model lives on meta (no values); build it on "
                              f"{device} to trace it there")
        model = copy.deepcopy(model).to(dev)
        params = list(model.parameters())
    inputs = _move(example_inputs, dev)
    layer_of = layer_of or block_layers(model)
    excluded = {storage_key(p) for p in params} | {storage_key(b) for b in model.buffers()}
    n_params = sum(p.numel() for p in {storage_key(p): p for p in params}.values())
    named = inputs.items() if isinstance(inputs, Mapping) else (
        (f"input{i}", v) for i, v in enumerate(inputs))
    step_inputs, seen = [], set()
    for nm, v in named:
        if isinstance(v, torch.Tensor) and storage_key(v) not in seen | excluded:
            seen.add(storage_key(v))
            step_inputs.append((storage_key(v), nm, v.untyped_storage().nbytes()))
    rec, stack = Recording(), []
    sync = torch.cuda.synchronize if dev.type == "cuda" else None
    mode = Recorder(rec, stack, timed=device != "meta", sync=sync)

    def pack(t):
        rec.packs.append((len(rec.calls), torch._C._autograd._get_sequence_nr(), storage_key(t)))
        rec.keep.append(t.untyped_storage())
        return t

    # the step is real on cpu/cuda: batch-norm running statistics and other buffers it writes
    # are put back afterwards, as the gradients and the mode are
    buffers = [(mod, nm, b, b.detach().clone()) for mod in model.modules()
               for nm, b in mod._buffers.items() if b is not None and not b.is_meta]
    handles = module_hooks(model, stack)
    was_training = model.training
    model.train()
    start_seq = torch._C._autograd._get_sequence_nr()
    try:
        with torch.enable_grad(), mode:
            fn_mode = CudaKernels() if kernels == "cuda" else None
            if fn_mode is not None:
                fn_mode.__enter__()
            try:
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    out = model(**inputs) if isinstance(inputs, Mapping) else model(*inputs)
                    args = tuple(inputs.values()) if isinstance(inputs, Mapping) else tuple(inputs)
                    loss = (loss_fn or _default_loss)(out, *args)
                    n_packs = len(rec.packs)
            finally:
                if fn_mode is not None:
                    fn_mode.__exit__(None, None, None)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
                raise ConfigError("loss_fn: must return a scalar tensor that requires grad")
            mode.phase = "bwd"
            loss.backward()
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
        for p in params:
            p.grad = None
        with torch.no_grad():
            for mod, nm, b, saved in buffers:
                mod._buffers[nm] = b     # a module that rebinds a buffer gets its own back
                b.copy_(saved)
    del rec.packs[n_packs:]
    ops_, tensors_, pack_order, unattributed, made, owner = assemble(
        rec, inputs=step_inputs, excluded=excluded, start_seq=start_seq)
    return _graph(model, rec, ops_, tensors_, pack_order, unattributed, made, owner, layer_of=layer_of,
                  name=name, device=device, kernels=kernels, n_params=n_params,
                  inputs=inputs, t_start=t_start)


def _graph(model, rec, ops_, tensors_, pack_order, unattributed, made, owner, *, layer_of, name, device,
           kernels, n_params, inputs, t_start) -> Graph:
    names: dict[str, int] = {}
    classes = {n: type(m).__name__.lower() for n, m in model.named_modules()}
    ops = []
    for i, o in enumerate(ops_):
        kind = op_kind(o.atens)
        if kind == "elementwise" and "norm" in classes.get(o.module, ""):
            kind = "norm"  # an unfused norm (HF's RMSNorm: pow, mean, rsqrt, mul)
        base = f"{o.module or 'model'}:{o.atens[0]}"
        k = names.get(base, 0)
        names[base] = k + 1
        nm = base if k == 0 else f"{base}#{k}"
        for j, t in enumerate(o.outputs):
            tensors_[t][0] = nm if len(o.outputs) == 1 else f"{nm}.out{j}"
        ops.append(Op(i, nm, layer_of(o.module), kind, fwd_flops=o.flops,
                      fwd_bytes=o.bytes, bwd_flops=o.bwd_flops, bwd_bytes=o.bwd_bytes,
                      inputs=tuple(dict.fromkeys(o.inputs)), outputs=tuple(o.outputs),
                      saves=tuple(o.saves)))
    tensors = []
    for i, (nm, nb, prod, kind) in enumerate(tensors_):
        tensors.append(Tensor(i, nm, int(nb), prod, kind=kind,
                              recomputable=prod is not None, swappable=True))
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    first = next(iter(inputs.values()) if isinstance(inputs, Mapping) else iter(inputs), None)
    shape = tuple(first.shape) if isinstance(first, torch.Tensor) else ()
    info = TraceInfo(
        model_name=type(model).__name__, device=device, pack_order=tuple(pack_order[0]),
        pack_op=tuple(pack_order[1]),
        op_signature=tuple(o.sig for o in ops_),
        op_times_s=None if device == "meta" else tuple((o.fwd_s, o.bwd_s) for o in ops_),
        name=name or type(model).__name__, dtype=_DTYPES.get(dtype, "fp32"),
        batch=shape[0] if len(shape) >= 1 else None, seq=shape[1] if len(shape) >= 2 else None,
        aten_ops=tuple(str(c.func) for c in rec.calls), call_tensors=made, call_ops=owner,
        params=n_params,
        fwd_flops=sum(o.flops for o in ops_), bwd_flops=sum(o.bwd_flops for o in ops_),
        unattributed_bwd_flops=unattributed[0], kernels=kernels,
        trace_s=time.perf_counter() - t_start)
    return Graph(name or type(model).__name__, ops=tuple(ops), tensors=tuple(tensors),
                 static_bytes=BYTES_PER_PARAM * n_params, spec=info)
