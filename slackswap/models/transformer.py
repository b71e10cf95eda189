"""``build(spec) -> Graph``: one training step of a transformer, op by op (docs/models.md).

What each op saves follows the PyTorch/Megatron kernels, so that a GPT-style block with eager
attention and dropout saves exactly Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", eq. 1/2) per layer and per GPU::

    s*b*h*(10 + 24/t + 5*a*s/(h*t))    bytes (16-bit activations, 1-byte dropout masks)

plus what the paper leaves out: fp32 norm statistics (LayerNorm mean + rstd: 8 bytes per token;
RMSNorm rstd: 4 bytes per token), i.e. ``2 * 8 * s * b`` per LayerNorm block. With
``attention="flash"`` the ``5as^2b`` term is replaced by an fp32 log-sum-exp, ``4*a*s*b/t`` bytes.

That is ``implementation="fused"``. ``implementation="hf"`` saves what HuggingFace ``transformers``
saves (docs/models.md, measured with benchmarks/hf_fidelity.py): GPT-2's Python ``gelu_new``
intermediates, Llama's fp32 RMSNorm input copies and ``silu(gate)``, RoPE's cos/sin, fp32 softmax
(Llama eager) and fp32 log-softmax (causal-LM loss), and the storage that views keep alive.

Cost conventions (docs/models.md, "FLOPs and bytes"): a matmul ``(m x k) @ (k x n)`` does ``2mkn`` forward FLOPs
and twice that backward; FlashAttention backward does 2.5x its forward (it recomputes ``QK^T``);
attention FLOPs are counted dense (non-causal, the "model FLOPs" convention of Korthikanti/PaLM);
memory-bound ops move ``inputs + outputs`` bytes forward and about twice that backward (read the
saved tensors and the output gradient, write the input gradient). Elementwise FLOPs use small
per-element constants (``_EW``); they are < 0.1% of a step.
"""

from __future__ import annotations

from ..core.errors import ConfigError
from ..core.graph import MAX_OPS as _MAX_OPS
from ..core.graph import Graph, Op, Tensor, check_limit
from .parallel import COLLECTIVES, Parallel
from .spec import TransformerSpec

#: Forward FLOPs per element of memory-bound ops (backward: 2x). Small, documented guesses.
_EW = {"norm": 5, "gelu": 8, "swiglu": 6, "softmax": 5, "dropout": 2, "add": 1, "rope": 3,
       "embedding": 2, "loss": 5, "tanh": 4, "gather": 1}
MAX_OPS = _MAX_OPS   # core.graph.MAX_OPS: one limit for every graph the package builds
"""``build`` refuses a graph estimated above this many ops unless ``max_ops`` says otherwise (None:
no limit): the estimate (ops before the first block + layers x the first block's ops) is made
after one block, before the rest is built; 100,000 ops take about 7 s to build and far longer to
plan (docs/models.md)."""
#: Upper estimate of the graph ops of one traced HF block (measured: gpt2-xl 21, llama-7b 41 per
#: block at the aten-op grain of docs/trace.md), to refuse oversized ``hf:`` models before tracing.
TRACED_OPS_PER_LAYER = 60
_INT_BYTES = 8  # token ids are int64
_STAT_BYTES = 4  # fp32 norm statistics and log-sum-exp


class _Builder:
    """Accumulates tensors and ops; ids are list positions. Kept minimal for speed."""

    def __init__(self, spec: TransformerSpec):
        self.s = spec
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.layer: int | None = None

    def input(self, name: str, nbytes: int) -> int:
        tid = len(self.tensors)
        self.tensors.append(Tensor(tid, name, nbytes, None, kind="input"))
        return tid

    def op(self, name, kind, inputs, outs, saves=(), flops=0.0, bwd_flops=None, bwd_factor=2.0,
           extra_bytes=0, workspace=0):
        """Add an op producing ``outs`` = [(name, bytes, kind)]; ``saves`` may name ``"out:i"``."""
        oid = len(self.ops)
        tensors = self.tensors
        out_ids = []
        for oname, nbytes, tkind in outs:
            tid = len(tensors)
            tensors.append(Tensor(tid, oname, nbytes, oid, kind=tkind))
            out_ids.append(tid)
        sv = tuple(out_ids[int(x[4:])] if isinstance(x, str) else x for x in saves)
        io = sum(tensors[t].bytes for t in inputs) + sum(n for _, n, _ in outs) + extra_bytes
        self.ops.append(Op(oid, name, self.layer, kind, fwd_flops=float(flops), fwd_bytes=float(io),
                           bwd_flops=float(2.0 * flops if bwd_flops is None else bwd_flops),
                           bwd_bytes=float(bwd_factor * io), inputs=tuple(inputs),
                           outputs=tuple(out_ids), saves=sv, workspace_bytes=int(workspace)))
        return out_ids[0] if len(out_ids) == 1 else out_ids


def _shard(n: int, t: int) -> int:
    return -(-n // t)


class _Transformer:
    """The three block layouts sharing helpers; see module docstring for the conventions."""

    def __init__(self, spec: TransformerSpec, parallel: Parallel | None = None):
        self.s = spec
        self.g = _Builder(spec)
        s = spec
        self.T = s.tokens  # tokens per GPU
        self.e = s.act_bytes
        self.t = s.tensor_parallel
        self.act = self.T * s.hidden * self.e  # one replicated [b, s, h] activation, bytes
        self.hf = s.implementation == "hf"
        self.rope = None  # (cos, sin) tensor ids under implementation="hf"
        self.p = parallel
        # tensor-parallel communication ops: only under a parallel setting with tp > 1 (a spec's
        # own tensor_parallel shards without them, as before)
        self.tp_comm = parallel is not None and parallel.tp > 1
        self.sp = self.tp_comm and parallel.sp
        # tokens in the norm / dropout / residual regions: split over t under sequence parallelism
        self.Tr = self.T // self.t if self.sp else self.T

    # ---- building blocks ----
    def linear(self, name, x, n_in, n_out, out_name, mode="col", keep=None):
        """``y = x W (+ b)``. Megatron ``mode``: "col" (output split over t), "row" (input split
        over t, output full size after the all-reduce) or "rep" (replicated, no split).
        ``keep``: under sequence parallelism, the sequence shard ``x`` was all-gathered from; the
        op saves it instead of ``x`` (Korthikanti et al. 2022, Sec. 4.2.2: the backward gathers
        it again) and lists it as an input."""
        g, T, e = self.g, self.T, self.e
        t = 1 if mode == "rep" else self.t
        out_cols = n_out // t if mode == "col" else n_out
        flops = 2.0 * T * n_in * n_out / t
        weights = n_in * n_out // t * e
        if keep is not None:
            return g.op(name, "matmul", (x, keep), [(out_name, T * out_cols * e, "activation")],
                        saves=(keep,), flops=flops, extra_bytes=weights - g.tensors[keep].bytes)
        return g.op(name, "matmul", (x,), [(out_name, T * out_cols * e, "activation")],
                    saves=(x,), flops=flops, extra_bytes=weights)

    # ---- tensor-parallel communication (docs/parallel.md) ----
    def comm(self, name, x, fwd, bwd, nbytes, out_bytes=0):
        """A collective on the compute stream: ``fwd``/``bwd`` name the forward and backward
        collectives (``COLLECTIVES``) of a full ``nbytes`` tensor; ``fwd_bytes``/``bwd_bytes``
        are the bytes one GPU sends (ring algorithms). ``out_bytes`` = 0 makes the output an
        empty marker: the collective works in place (all-reduce) or is the identity."""
        t = self.t

        def vol(names) -> float:
            return float(sum(COLLECTIVES[c] * (t - 1) * nbytes // t for c in names))

        g = self.g
        oid = len(g.ops)
        tid = len(g.tensors)
        g.tensors.append(Tensor(tid, name + ".out", int(out_bytes), oid,
                                kind="activation" if out_bytes else "stats"))
        g.ops.append(Op(oid, name, g.layer, "comm", fwd_bytes=vol(fwd), bwd_bytes=vol(bwd),
                        inputs=(x,), outputs=(tid,)))
        return tid

    def gather(self, name, x):
        """Before column-parallel linears: ``(input, kept shard)``. With sequence parallelism an
        all-gather of the sequence shard (backward: reduce-scatter of the gradient, and the
        all-gather again for the weight gradient); without, Megatron's ``f`` (forward: identity,
        backward: all-reduce). Without tensor-parallel communication: ``(x, None)``."""
        if not self.tp_comm:
            return x, None
        full = self.T * self.s.hidden * self.e
        if self.sp:
            return self.comm(name, x, ("all_gather",), ("reduce_scatter", "all_gather"), full, full), x
        self.comm(name, x, (), ("all_reduce",), full)
        return x, None

    def reduce(self, name, x):
        """After row-parallel linears: Megatron's ``g`` (forward: all-reduce in place, backward:
        identity) or, with sequence parallelism, a reduce-scatter to the sequence shard
        (backward: all-gather)."""
        if not self.tp_comm:
            return x
        full = self.T * self.s.hidden * self.e
        if self.sp:
            return self.comm(name, x, ("reduce_scatter",), ("all_gather",), full, full // self.t)
        self.comm(name, x, ("all_reduce",), (), full)
        return x

    def norm(self, name, x, width=None, tokens=None):
        """LayerNorm (saves input + fp32 mean/rstd) or RMSNorm (saves input + fp32 rstd), over
        ``tokens`` (default: the norm region's, split over t under sequence parallelism)."""
        width = width or self.s.hidden
        n_stats = 2 if self.s.norm == "layernorm" else 1
        if self.hf and self.s.norm == "rmsnorm":
            return self.hf_rmsnorm(name, x, width)
        T = tokens or self.Tr
        y, _ = self.g.op(name, "norm", (x,),
                         [(name + ".out", T * width * self.e, "activation"),
                          (name + ".stats", T * n_stats * _STAT_BYTES, "stats")],
                         saves=(x, "out:1"), flops=_EW["norm"] * T * width)
        return y

    def hf_rmsnorm(self, name, x, width):
        """HF's Python RMSNorm: ``x.float()`` (a copy unless already fp32), ``pow`` and
        ``x * rsqrt`` save that fp32 input and the fp32 rstd, ``weight * x_hat.to(dtype)`` saves
        the normalized ``x_hat``."""
        T, e = self.Tr, self.e
        outs = [(name + ".out", T * width * e, "activation"), (name + ".stats", T * _STAT_BYTES, "stats"),
                (name + ".xhat", T * width * e, "activation")]
        if e != _STAT_BYTES:
            outs.append((name + ".x_fp32", T * width * _STAT_BYTES, "activation"))
        # its backward runs the Python chain in fp32: up to four [T, width] fp32 buffers at once
        ids = self.g.op(name, "norm", (x,), outs, flops=_EW["norm"] * T * width,
                        saves=("out:3" if e != _STAT_BYTES else x, "out:1", "out:2"),
                        workspace=T * width * (4 * _STAT_BYTES - e))
        return ids[0]

    def dropout(self, name, x, elems):
        """Dropout saves only its 1-byte mask; no op at all when ``dropout == 0``."""
        if not self.s.dropout:
            return x
        out, _ = self.g.op(name, "dropout", (x,), [(name + ".out", elems * self.e, "activation"),
                                                   (name + ".mask", elems, "mask")],
                           saves=("out:1",), flops=_EW["dropout"] * elems)
        return out

    def add(self, name, a, b):
        """Residual add: saves nothing (its backward passes the gradient through)."""
        n = self.Tr * self.s.hidden
        return self.g.op(name, "elementwise", (a, b), [(name, n * self.e, "activation")],
                         flops=_EW["add"] * n)

    def embeddings(self):
        s, g, T = self.s, self.g, self.T
        ids = g.input("input_ids", T * _INT_BYTES)
        ins = [ids]
        if s.type_vocab:
            ins.append(g.input("token_type_ids", T * _INT_BYTES))
        n = T * s.hidden
        lookups = 1 + (s.position == "learned") + bool(s.type_vocab)
        x = g.op("embed", "embedding", tuple(ins), [("embed.out", n * self.e, "activation")],
                 saves=tuple(ins), flops=_EW["embedding"] * n * lookups,
                 extra_bytes=(lookups - 1) * n * self.e)
        x = self.reduce("embed.tp", x)  # vocabulary-parallel lookup: partial sums
        n = self.Tr * s.hidden
        if s.family == "bert":
            x = self.norm("embed.norm", x)
        if self.hf and s.position == "rope":  # HF computes cos/sin once; every layer saves them
            sd = s.seq * s.head_dim * self.e  # position ids [1, s]: one row shared by the batch
            self.rope = g.op("rotary", "elementwise", (), [("rotary.cos", sd, "stats"),
                                                           ("rotary.sin", sd, "stats")],
                             flops=2 * s.seq * s.head_dim)
        return self.dropout("embed.dropout", x, n)

    def attention(self, pre, x):
        """QKV projection, (RoPE), attention core, output projection; returns the projection."""
        x, keep = self.gather(pre + "attn.tp_in", x)
        s, g, T, e, t = self.s, self.g, self.T, self.e, self.t
        h, a, d = s.hidden, s.heads, s.head_dim
        kvw = s.kv_heads * d
        ql, kvl = T * h // t * e, T * kvw // t * e
        qkv_flops = 2.0 * T * h * (h + 2 * kvw) / t
        # HF GPT-2 under SDPA (and eager at batch 1, where the reshape for the matmul is a view):
        # q stays a view of the fused c_attn output, so saving it keeps the whole [b, s, h + 2kv]
        # storage; k and v are copies made by the (default) KV cache update.
        # Without the cache (use_cache false) k and v stay views of that output too: one tensor.
        fused_q = self.hf and s.family == "gpt2" and (s.attention == "flash" or s.batch == 1)
        q_name, q_bytes = (pre + "qkv.out", T * (h + 2 * kvw) // t * e) if fused_q else (pre + "q", ql)
        weights = h * (h + 2 * kvw) // t * e
        outs = [(q_name, q_bytes, "activation")]
        if not (fused_q and not s.use_cache):
            outs += [(pre + "k", kvl, "activation"), (pre + "v", kvl, "activation")]
        made = g.op(pre + "qkv", "matmul", (x,) if keep is None else (x, keep), outs,
                    saves=(x if keep is None else keep,), flops=qkv_flops,
                    extra_bytes=weights if keep is None else weights - g.tensors[keep].bytes)
        q, k, v = (made,) * 3 if isinstance(made, int) else made
        if s.position == "rope":
            cs = tuple(self.rope) if self.rope else ()
            q, k = g.op(pre + "rope", "elementwise", (q, k) + cs,
                        [(pre + "q_rot", ql, "activation"), (pre + "k_rot", kvl, "activation")],
                        saves=cs, flops=_EW["rope"] * (ql + kvl) / e)
        b_, sq, a_t = s.batch, s.seq, a // t
        core_flops = 4.0 * b_ * sq * sq * h / t  # QK^T and PV, dense (non-causal) counting
        probs = b_ * a_t * sq * sq  # elements of one [b, a/t, s, s] tensor
        if s.attention == "flash":
            ctx, _ = g.op(pre + "attn", "attention", (q, k, v),
                          [(pre + "attn.out", ql, "activation"),
                           (pre + "attn.lse", b_ * a_t * sq * _STAT_BYTES, "stats")],
                          saves=(q, k, v, "out:0", "out:1"), flops=core_flops,
                          bwd_flops=2.5 * core_flops)
        else:
            if self.hf and kvl != ql:  # eager GQA: repeat_kv materializes K and V for all heads
                k, v = g.op(pre + "repeat_kv", "elementwise", (k, v),
                            [(pre + "k_rep", ql, "activation"), (pre + "v_rep", ql, "activation")])
            scores = g.op(pre + "attn.scores", "attention", (q, k),
                          [(pre + "attn.scores", probs * e, "activation")], saves=(q, k),
                          flops=core_flops / 2)
            if self.hf and s.family == "llama" and e != _STAT_BYTES:
                # softmax(dtype=float32) saves its fp32 output; the cast to the dtype feeds P.V
                p, _ = g.op(pre + "attn.softmax", "elementwise", (scores,),
                            [(pre + "attn.probs", probs * e, "activation"),
                             (pre + "attn.probs_fp32", probs * _STAT_BYTES, "activation")],
                            saves=("out:1",), flops=_EW["softmax"] * probs)
            else:
                p = g.op(pre + "attn.softmax", "elementwise", (scores,),
                         [(pre + "attn.probs", probs * e, "activation")], saves=("out:0",),
                         flops=_EW["softmax"] * probs)
            if s.dropout:
                p, _ = g.op(pre + "attn.dropout", "dropout", (p,),
                            [(pre + "attn.probs_dropped", probs * e, "activation"),
                             (pre + "attn.mask", probs, "mask")],
                            saves=("out:1",), flops=_EW["dropout"] * probs)
            ctx = g.op(pre + "attn.context", "attention", (p, v),
                       [(pre + "attn.out", ql, "activation")], saves=(p, v), flops=core_flops / 2)
        return self.reduce(pre + "attn.tp_out",
                           self.linear(pre + "attn.proj", ctx, h, h, pre + "attn.proj", mode="row"))

    def mlp(self, pre, x):
        x, keep = self.gather(pre + "tp_in", x)
        s, g, T, e, t = self.s, self.g, self.T, self.e, self.t
        h, f = s.hidden, s.ffn
        nf = T * f // t
        if s.activation == "gelu":
            u = self.linear(pre + "fc1", x, h, f, pre + "fc1", keep=keep)
            if self.hf and s.family == "gpt2":
                # gelu_new in Python: 0.5*u*(1 + tanh(c*(u + 0.044715*u^3))) saves u (pow), the
                # tanh output, 0.5*u and 1 + tanh (the final product)
                parts = [(pre + "gelu." + n, nf * e, "activation") for n in ("tanh", "half", "one_plus")]
                y = g.op(pre + "gelu", "elementwise", (u,), [(pre + "gelu", nf * e, "activation")] + parts,
                         saves=(u, "out:1", "out:2", "out:3"), flops=_EW["gelu"] * nf,
                         workspace=3 * nf * e // 2)[0]
            else:
                y = g.op(pre + "gelu", "elementwise", (u,), [(pre + "gelu", nf * e, "activation")],
                         saves=(u,), flops=_EW["gelu"] * nf)
        else:
            gate = self.linear(pre + "gate", x, h, f, pre + "gate", keep=keep)
            up = self.linear(pre + "up", x, h, f, pre + "up", keep=keep)
            if self.hf:  # act_fn(gate) * up in Python: the product also saves silu(gate)
                y = g.op(pre + "swiglu", "elementwise", (gate, up),
                         [(pre + "swiglu", nf * e, "activation"), (pre + "silu", nf * e, "activation")],
                         saves=(gate, up, "out:1"), flops=_EW["swiglu"] * nf)[0]
            else:
                y = g.op(pre + "swiglu", "elementwise", (gate, up),
                         [(pre + "swiglu", nf * e, "activation")], saves=(gate, up),
                         flops=_EW["swiglu"] * nf)
        return self.reduce(pre + "tp_out", self.linear(pre + "fc2", y, f, h, pre + "fc2", mode="row"))

    def block(self, i, x):
        g, n = self.g, self.Tr * self.s.hidden
        g.layer = i
        pre = f"L{i}."
        if self.s.family == "bert":  # post-LN
            y = self.dropout(pre + "attn.proj_dropout", self.attention(pre, x), n)
            r = self.norm(pre + "attn.norm", self.add(pre + "attn.residual", x, y))
            y = self.dropout(pre + "mlp.dropout", self.mlp(pre + "mlp.", r), n)
            return self.norm(pre + "mlp.norm", self.add(pre + "mlp.residual", r, y))
        y = self.attention(pre, self.norm(pre + "attn.norm", x))
        r = self.add(pre + "attn.residual", x, self.dropout(pre + "attn.proj_dropout", y, n))
        y = self.mlp(pre + "mlp.", self.norm(pre + "mlp.norm", r))
        return self.add(pre + "mlp.residual", r, self.dropout(pre + "mlp.dropout", y, n))

    def head(self, x):
        s, g, T, e, t = self.s, self.g, self.T, self.e, self.t
        h, v = s.hidden, s.vocab
        g.layer = None
        if s.family != "bert":
            x = self.norm("final_norm", x)
        if self.sp:  # the head runs on the whole sequence: gather it (the head keeps it)
            x = self.comm("head.tp_in", x, ("all_gather",), ("reduce_scatter",), T * h * e, T * h * e)
        if s.pooler:  # dense + tanh on the first token of each sequence
            nb = s.batch * h
            g.op("pooler", "matmul", (x,), [("pooler.out", nb * e, "activation")],
                 saves=(x, "out:0"), flops=2.0 * s.batch * h * h + _EW["tanh"] * nb,
                 extra_bytes=h * h * e)
        if s.head == "mlm":  # BertLMPredictionHead: transform then decoder
            if s.head_positions < s.seq:   # NVIDIA's BERT: gather the masked positions first
                T = s.batch * s.head_positions
                pos = g.input("masked_positions", T * _INT_BYTES)
                x = g.op("mlm.gather", "elementwise", (x, pos), [("mlm.gather", T * h * e, "activation")],
                         saves=(pos,), flops=_EW["gather"] * T * h)
                self.T = T   # the transform, decoder and loss run on the gathered rows only
            u = self.linear("mlm.dense", x, h, h, "mlm.dense", mode="rep")
            u = g.op("mlm.gelu", "elementwise", (u,), [("mlm.gelu", T * h * e, "activation")],
                     saves=(u,), flops=_EW["gelu"] * T * h)
            x = self.norm("mlm.norm", u, tokens=T)
        vt = _shard(v, t)  # vocab-parallel logits (Megatron pads V to a multiple of t)
        if self.tp_comm and not self.sp:
            self.gather("head.tp_in", x)
        logits = g.op("lm_head", "matmul", (x,), [("logits", T * vt * s.logits_bytes, "logits")],
                      saves=(x,), flops=2.0 * T * h * vt, extra_bytes=h * vt * e)
        if self.hf:
            return self.hf_loss(logits, vt)
        # Cross entropy: the softmax overwrites the logits in place (Megatron's vocab-parallel
        # cross entropy), so the backward holds one [b, s, V/t] tensor (in ``logits_dtype``); the
        # fp32 buffer of the logits' size (the upcast) is transient workspace, unless
        # ``loss_workspace`` is false (a loss that runs in place).
        g.op("loss", "loss", (logits,), [("loss", 4, "activation")], saves=(logits,),
             flops=_EW["loss"] * T * vt, workspace=T * vt * _STAT_BYTES if s.loss_workspace else 0)

    def hf_loss(self, logits, vt):
        """HF losses: ``cross_entropy`` saves its log-softmax, not the logits. The causal-LM loss
        upcasts the logits to fp32 first (a transient copy) and saves the shifted int64 labels;
        BERT's MLM loss runs in the activation dtype on the given labels."""
        T, e = self.T, self.e
        if self.s.family == "bert":
            self.g.op("loss", "loss", (logits,), [("loss", 4, "activation"),
                                                 ("loss.logprobs", T * vt * e, "logits")],
                      saves=("out:1",), flops=_EW["loss"] * T * vt, workspace=T * vt * e)
            return
        self.g.op("loss", "loss", (logits,), [("loss", 4, "activation"),
                                             ("loss.logprobs", T * vt * _STAT_BYTES, "logits"),
                                             ("loss.labels", T * _INT_BYTES, "stats")],
                  saves=("out:1", "out:2"), flops=_EW["loss"] * T * vt,
                  workspace=T * vt * (2 * _STAT_BYTES - e))

    def build(self, max_ops: int | None = MAX_OPS) -> Graph:
        p, s = self.p, self.s
        layers = range(s.layers) if p is None else p.stage_layers(s)
        if p is None or p.first_stage:
            x = self.embeddings()
        else:  # a later pipeline stage: its input is the activation the stage before sends
            x = self.g.input("stage_input", self.Tr * s.hidden * self.e)
        before = len(self.g.ops)
        for i in layers:
            x = self.block(i, x)
            if i == layers[0] and max_ops is not None:
                est = before + (len(self.g.ops) - before) * len(layers)
                if est > max_ops:
                    raise ConfigError(f"model {s.name!r}: {len(layers):,} layers make about {est:,} ops, "
                                      f"more than max_ops={max_ops:,}; give a larger max_ops (CLI --max-ops) "
                                      "to build it anyway")
        if p is None or p.last_stage:
            self.head(x)
        static = s.static_bytes() if p is None else p.static_bytes(s)
        return Graph(s.name, ops=tuple(self.g.ops), tensors=tuple(self.g.tensors),
                     static_bytes=static, spec=s)


def build(spec: TransformerSpec, max_ops: int | None = MAX_OPS, parallel: Parallel | None = None) -> Graph:
    """The forward graph of one training step of ``spec`` on one GPU (per tensor-parallel rank).
    A graph estimated above ``max_ops`` ops is refused (``ConfigError``) before it is built.

    ``parallel`` (docs/parallel.md): one micro-batch on one GPU of its planned pipeline stage,
    with tensor- and sequence-parallel shards and communication ops (kind ``"comm"``) when
    tp > 1, and static memory sharded as its ZeRO stage does. None: one GPU, as before.

    >>> from slackswap.models import load
    >>> g = build(load("tiny"))
    >>> g.name, g.ops[0].kind, g.ops[-1].kind
    ('tiny', 'embedding', 'loss')
    """
    if not isinstance(spec, TransformerSpec):
        raise ConfigError(f"spec: expected a TransformerSpec, got {type(spec).__name__}")
    check_limit(max_ops, "max_ops", ConfigError)
    if parallel is not None:
        if not isinstance(parallel, Parallel):
            raise ConfigError(f"parallel: expected a Parallel, got {type(parallel).__name__}")
        spec = parallel.apply(spec)
    return _Transformer(spec, parallel).build(max_ops)
