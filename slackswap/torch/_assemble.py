"""Turn a ``Recording`` into ``Graph`` ops and tensors (the grain is described in docs/trace.md).

* A call whose outputs all alias its inputs' storages (views, ``detach``, ``split``) is folded:
  it becomes no op; its backward work goes to the op that wrote the storage it views.
* An in-place call on a storage that no other op has read since its writer ran (``bernoulli_``
  after ``empty_like``, ``relu_`` after a norm) is fused into that writer when every other tensor
  it reads existed before the writer ran; any other in-place call is an op of its own whose output
  is a new version of the storage.
* Every other call is one op; each storage it creates is one graph tensor (bytes: the storage).
* Parameters and buffers are no graph tensors (they are ``static_bytes``); step inputs and
  tensors created outside the step are tensors with ``producer=None``.
"""

from __future__ import annotations

import torch

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "convolution",
           "_convolution", "mv", "addmv", "dot", "cudnn_convolution", "mkldnn_convolution",
           "_int_mm", "_scaled_mm"}
_ATTENTION_PREFIX = ("_scaled_dot_product", "_flash_attention", "_efficient_attention")
_NORM = {"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
         "_native_batch_norm_legit_no_training", "native_group_norm", "_fused_rms_norm",
         "rms_norm", "_batch_norm_with_update", "cudnn_batch_norm"}
_SOFTMAX = {"_softmax", "_safe_softmax", "_log_softmax"}
_LOSS = {"nll_loss_forward", "nll_loss2d_forward", "mse_loss", "binary_cross_entropy",
         "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss"}
_DROPOUT = {"native_dropout", "bernoulli", "bernoulli_"}
_FACTORY = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
            "full_like", "arange", "scalar_tensor", "empty_strided", "new_empty", "new_zeros",
            "new_ones", "new_full", "rand", "randn", "rand_like", "randn_like", "tril", "triu"}


def op_kind(names: list[str]) -> str:
    """The cost-model kind of an op from the aten ops it groups (the first one decides, except
    that a group holding ``bernoulli_`` is dropout)."""
    if any(n in _DROPOUT for n in names):
        return "dropout"
    n = names[0]
    if n in _MATMUL:
        return "matmul"
    if n.startswith(_ATTENTION_PREFIX):
        return "attention"
    if n in _NORM:
        return "norm"
    if n in _SOFTMAX:
        return "softmax"
    if n in _LOSS:
        return "loss"
    if n in ("embedding", "embedding_bag", "_embedding_bag"):
        return "embedding"
    if n in _FACTORY:
        return "factory"
    if n in ("clone", "_to_copy", "copy", "copy_", "contiguous", "cat", "stack", "index_select",
             "gather", "constant_pad_nd"):
        return "copy"
    return "elementwise"


def _tensor_kind(out, index: int, first, grad_node: bool) -> str:
    """``out``, ``first``: (key, storage bytes, dtype, numel) of this and the first output."""
    dtype, numel = out[2], out[3]
    if dtype.is_floating_point or dtype.is_complex:
        same = first is not None and numel == first[3]
        return "activation" if grad_node and (index == 0 or same) else "stats"
    return "mask" if dtype in (torch.bool, torch.uint8) else "index"


class _Op:
    __slots__ = ("name", "module", "atens", "sig", "flops", "bytes", "inputs", "outputs", "saves",
                 "fwd_s", "bwd_flops", "bwd_bytes", "bwd_s")

    def __init__(self, module, aten, sig):
        self.module, self.atens, self.sig = module, [aten], sig
        self.flops = self.bytes = self.fwd_s = self.bwd_flops = self.bwd_bytes = self.bwd_s = 0.0
        self.inputs, self.outputs, self.saves = [], [], []


def assemble(rec, *, inputs, excluded, start_seq):
    """Ops (``_Op``) and tensors (``(name, bytes, producer, kind)``), the pack order (tensor and
    op of every pack call), the backward totals no op could be charged with, and per call the
    graph tensors it made (the storages it created, in output order, then the new versions of the
    storages it wrote in place; empty for a folded or fused call), and per call the op it is or
    was fused into (-1 for a folded call): ``(ops, tensors, (pack_order, pack_op), unattributed,
    made, call_ops)``.

    ``inputs``: ``[(storage key, name, bytes)]`` of the step inputs; ``excluded``: storage keys of
    parameters and buffers.
    """
    tensors: list[list] = []
    cur: dict[int, int] = {}          # storage key -> graph tensor id of its current version
    writer: dict[int, int] = {}       # storage key -> op that wrote its current version
    readers: dict[int, set] = {}      # storage key -> ops that read its current version
    ops: list[_Op] = []
    owner: list[int | None] = []      # per call: the op it was charged to
    made: list[tuple[int, ...]] = []  # per call: the graph tensors it made
    folded: set[int] = set()          # calls folded into another op (no op of their own)
    for key, name, nb in inputs:
        cur[key] = len(tensors)
        tensors.append([name, nb, None, "input"])
    n_ext = 0
    packs_at: dict[int, list] = {}
    for p in rec.packs:
        packs_at.setdefault(p[0], []).append(p)
    pending = []                      # (pack tensor id or None, seq)
    calls = rec.calls
    prev_seq = start_seq
    for ci, c in enumerate(calls):
        for _, seq, key in packs_at.get(ci, ()):
            pending.append((None if key in excluded else cur.get(key), seq))
        grad_node = c.seq != prev_seq
        prev_seq = c.seq
        name = c.func._overloadpacket.__name__
        outs = {}
        for o in c.outs:
            if o[0] not in c.ins and o[0] not in excluded and o[0] not in outs:
                outs[o[0]] = o
        writes = [k for k in dict.fromkeys(c.writes) if k not in excluded]
        if not outs and not writes:   # view / metadata: fold into the writer of what it views
            ws = [writer[k] for k in c.ins if k in writer]
            owner.append(ws[-1] if ws else (len(ops) - 1 if ops else None))
            made.append(())
            folded.add(ci)
            continue
        if not outs and writes and len({writer.get(k) for k in writes}) == 1:
            w = writer.get(writes[0])
            # fused only when nobody read the storage since ``w`` wrote it and every other input
            # existed before ``w`` ran (``s = a(x); t = b(x); s += t`` reads ``t``, made after
            # ``s``: fused into ``a``, op ``a`` would read a tensor of a later op)
            if w is not None and all(readers.get(k, set()) <= {w} for k in writes) and all(
                    cur.get(k) is None or tensors[cur[k]][2] is None or tensors[cur[k]][2] < w
                    for k in c.ins if k not in writes and k not in excluded):
                op = ops[w]             # fuse the in-place call into the op that wrote the storage
                op.atens.append(name)
                op.flops += c.flops
                op.bytes += c.read + c.written
                op.fwd_s += c.seconds
                for k in c.ins:
                    t = cur.get(k)
                    if k not in writes and t is not None and t not in op.inputs:
                        op.inputs.append(t)
                        readers.setdefault(k, set()).add(w)
                owner.append(w)
                made.append(())
                continue
        oid = len(ops)
        op = _Op(c.module, name, str(c.func))
        op.flops, op.bytes, op.fwd_s = c.flops, float(c.read + c.written), c.seconds
        for k, nb in c.ins.items():
            if k in excluded:
                continue
            if k not in cur:           # a tensor made outside the step (a cached mask, a constant)
                cur[k] = len(tensors)
                tensors.append([f"external{n_ext}", nb, None, "input"])
                n_ext += 1
            op.inputs.append(cur[k])
            readers.setdefault(k, set()).add(oid)
        first = next(iter(outs.values()), None)
        for i, (k, o) in enumerate(outs.items()):
            cur[k], writer[k], readers[k] = len(tensors), oid, set()
            op.outputs.append(len(tensors))
            tensors.append([None, o[1], oid, _tensor_kind(o, i, first, grad_node)])
        for k in writes:               # a new version of a storage written in place
            cur[k], writer[k], readers[k] = len(tensors), oid, set()
            op.outputs.append(len(tensors))
            tensors.append([None, c.ins.get(k, 0), oid, "activation"])
        ops.append(op)
        owner.append(oid)
        made.append(tuple(op.outputs))
    for _, seq, key in packs_at.get(len(calls), ()):
        pending.append((None if key in excluded else cur.get(key), seq))
    first_call: dict[int, int] = {}
    for ci, c in enumerate(calls):
        first_call.setdefault(c.seq, ci)
    pack_order, pack_op = [], []
    for tid, seq in pending:
        produced = tid is not None and tensors[tid][2] is not None
        pack_order.append(tid if produced else -1)
        ci = first_call.get(seq)
        oid = owner[ci] if ci is not None else None
        if not produced:
            pack_op.append(-1 if oid is None else oid)
            continue
        if oid is None:
            oid = tensors[tid][2]
        if tid not in ops[oid].inputs and tid not in ops[oid].outputs:
            if tensors[tid][2] < oid:
                ops[oid].inputs.append(tid)
            else:                      # cannot be read before it exists: charge its producer
                oid = tensors[tid][2]
        pack_op.append(oid)
        if tid not in ops[oid].saves:
            ops[oid].saves.append(tid)
    unattributed = [0.0, 0.0, 0.0]
    for seq, flops, nb, dt in rec.bwd:
        ci = first_call.get(seq + 1) if seq is not None else None
        oid = owner[ci] if ci is not None else None
        if oid is None:
            unattributed[0] += flops
            unattributed[1] += nb
            unattributed[2] += dt
            continue
        ops[oid].bwd_flops += flops
        ops[oid].bwd_bytes += nb
        ops[oid].bwd_s += dt
    return ops, tensors, (pack_order, pack_op), tuple(unattributed), tuple(made), \
        tuple(-1 if o is None or ci in folded else o for ci, o in enumerate(owner))
