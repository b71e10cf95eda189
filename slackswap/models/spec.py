"""``TransformerSpec``: the shape and training settings of one transformer (docs/models.md).

Three families share one spec; the family fixes the block layout (docs/models.md):

* ``"bert"``: post-LN blocks, learned absolute + token-type embeddings, embedding LayerNorm,
  biases everywhere, optional pooler, MLM head (dense + GeLU + LN + decoder).
* ``"gpt2"``: pre-LN blocks, learned absolute positions, biases everywhere, final LayerNorm,
  LM head (tied to the word embeddings in GPT-2).
* ``"llama"``: pre-norm blocks without biases, RoPE (no position parameters), final norm, LM head.

``implementation`` says which code runs the step, and so what its backward keeps: ``"fused"``
(fused kernels, Korthikanti et al.'s accounting; the presets' default) or ``"hf"`` (HuggingFace
``transformers``' Python code paths; what ``from_hf_config`` sets).

>>> s = TransformerSpec("toy", "gpt2", layers=2, hidden=64, heads=4, ffn=256, vocab=128,
...                     seq=16, batch=2)
>>> s.kv_heads, s.max_positions, s.act_bytes
(4, 16, 2)
>>> s.replace(seq=8).seq
8
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..core.errors import ConfigError
from ..core.graph import BYTES_PER_PARAM
from ..core.schema import Schema, parse

FAMILIES = ("bert", "gpt2", "llama")
DTYPES = {"bf16": 2, "fp16": 2, "fp32": 4}
NORMS = ("layernorm", "rmsnorm")
ACTIVATIONS = ("gelu", "swiglu")
ATTENTIONS = ("flash", "eager")
POSITIONS = ("learned", "rope")
HEADS = ("lm", "mlm")
IMPLEMENTATIONS = ("fused", "hf")
LOGITS_DTYPES = ("activation", "fp32")
BUDGET_SCOPES = ("step", "forward")
#: The workload fields: what the step computes around the blocks and what its budget's 100% counts.
#: Their defaults are the package's meaning before they existed (docs/models.md, "Workload").
WORKLOAD_FIELDS = ("mlm_fraction", "logits_dtype", "loss_workspace", "budget_scope", "budget_logits",
                   "budget_param_grads")


_HELP = {
    "name": "preset or model name (also the graph name)",
    "family": "block layout: " + " | ".join(FAMILIES),
    "layers": "number of transformer blocks",
    "hidden": "model width h",
    "heads": "attention heads a",
    "ffn": "MLP inner width (4h for BERT/GPT-2; 11008 for Llama-7B)",
    "vocab": "vocabulary size V",
    "seq": "sequence length s",
    "batch": "micro-batch size b (sequences per GPU per step)",
    "max_positions": "longest supported sequence (learned position table size); seq <= it",
    "kv_heads": "key/value heads (grouped-query attention); default = heads",
    "dtype": "activation dtype: " + " | ".join(DTYPES),
    "norm": " | ".join(NORMS),
    "activation": " | ".join(ACTIVATIONS),
    "attention": "flash (no s^2 tensors saved) | eager (saves softmax, mask, dropout output)",
    "dropout": "dropout probability in [0, 1); 0 = no dropout ops and no masks",
    "causal": "causal attention mask",
    "tied_embeddings": "LM/MLM decoder weight shared with the word embeddings",
    "position": " | ".join(POSITIONS),
    "type_vocab": "BERT token-type vocabulary (0 for none)",
    "pooler": "BERT pooler (dense + tanh on the first token)",
    "head": " | ".join(HEADS),
    "tensor_parallel": "Megatron tensor-parallel degree t (per-GPU shards)",
    "implementation": "what the backward keeps: fused (fused kernels, Korthikanti's accounting) | "
                      "hf (what HuggingFace transformers saves; docs/models.md)",
    "mlm_fraction": "share of each sequence's positions the MLM head (transform, decoder, loss) runs on, "
                    "in (0, 1]: ceil(seq * mlm_fraction) gathered positions per sequence (1 = every "
                    "position; NVIDIA's BERT: 80 of 512 = 0.15625); head 'mlm', implementation 'fused'",
    "logits_dtype": "dtype of the logits the loss saves: activation (the activation dtype) | fp32; "
                    "implementation 'fused'",
    "loss_workspace": "the loss's transient fp32 buffer of the logits' size counts (true) or the "
                      "loss runs in place (false); implementation 'fused'",
    "budget_scope": "what a fractional budget's 100% is: step (the keep-all activation peak of the "
                    "whole step) | forward (the keep-all peak over the forward pass only)",
    "budget_logits": "the budget's 100% counts the loss's logits, their gradient and the loss's "
                     "workspace (true) or leaves them out (false)",
    "budget_param_grads": "the budget's 100% adds the parameter gradients (2 bytes per parameter "
                          "on this GPU; true) or not (false)",
    "use_cache": "the model builds a KV cache in the training step (HF's default, true), whose "
                 "copies of k and v attention saves; false: GPT-2's k and v stay views of the fused "
                 "c_attn output, as q does (no extra bytes); implementation 'hf'",
    "source": "where the numbers come from",
}


@dataclass(frozen=True)
class TransformerSpec:
    """One transformer and its step shape. Validated on construction (``ConfigError``)."""

    name: str
    family: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int
    batch: int
    max_positions: int | None = None  # None -> seq
    kv_heads: int | None = None  # None -> heads
    dtype: str = "bf16"
    norm: str = "layernorm"
    activation: str = "gelu"
    attention: str = "flash"
    dropout: float = 0.0
    causal: bool = True
    tied_embeddings: bool = True
    position: str = "learned"
    type_vocab: int = 0
    pooler: bool = False
    head: str = "lm"
    tensor_parallel: int = 1
    implementation: str = "fused"
    mlm_fraction: float = 1.0
    logits_dtype: str = "activation"
    loss_workspace: bool = True
    budget_scope: str = "step"
    budget_logits: bool = True
    budget_param_grads: bool = False
    use_cache: bool = True
    source: str = ""

    def __post_init__(self):
        if self.max_positions is None and isinstance(self.seq, int):
            object.__setattr__(self, "max_positions", self.seq)
        if self.kv_heads is None and isinstance(self.heads, int):
            object.__setattr__(self, "kv_heads", self.heads)
        _validate(self)

    # ---- derived sizes ----
    @property
    def act_bytes(self) -> int:
        """Bytes per activation element (2 for bf16/fp16, 4 for fp32)."""
        return DTYPES[self.dtype]

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def tokens(self) -> int:
        """Tokens per step on one GPU: ``batch * seq``."""
        return self.batch * self.seq

    @property
    def head_positions(self) -> int:
        """Positions per sequence the MLM head runs on: ``ceil(seq * mlm_fraction)`` (``seq`` for
        an LM head or ``mlm_fraction = 1``)."""
        if self.mlm_fraction >= 1:
            return self.seq
        return max(1, math.ceil(self.seq * self.mlm_fraction - 1e-9))

    @property
    def logits_bytes(self) -> int:
        """Bytes per logit element: the activation dtype's, or 4 for ``logits_dtype = "fp32"``."""
        return 4 if self.logits_dtype == "fp32" else self.act_bytes

    @property
    def has_bias(self) -> bool:
        """BERT and GPT-2 linears and norms carry biases; Llama has none."""
        return self.family != "llama"

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def help(cls) -> dict[str, str]:
        """Help text for every field (for CLI options and docs)."""
        return dict(_HELP)

    def replace(self, /, **overrides) -> TransformerSpec:
        """A copy with some fields changed; unknown fields raise ``ConfigError``.

        ``kv_heads``/``max_positions`` that equalled ``heads``/``seq`` follow them when only the
        latter are overridden (so ``replace(heads=8)`` keeps multi-head attention).
        """
        allowed = self.fields()
        for k in overrides:
            if k not in allowed:
                raise ConfigError(f"{k}: unknown TransformerSpec field; allowed: {', '.join(allowed)}")
        if "heads" in overrides and "kv_heads" not in overrides and self.kv_heads == self.heads:
            overrides["kv_heads"] = None
        return dataclasses.replace(self, **overrides)

    # ---- parameters ----
    def param_groups(self) -> dict[str, tuple[int, int]]:
        """``{group: (tensor-parallel-sharded params, replicated params)}``, exact, as in HF.

        Groups: ``embeddings`` (word, position, token type, BERT embedding LN), ``blocks`` (all
        layers), ``final_norm``, ``pooler``, ``head`` (MLM transform + decoder bias; the decoder or
        LM weight only when untied). Sharding follows Megatron: QKV/fc1/gate/up (column) and
        out/fc2/down (row) weights, column biases and the vocabulary dimension are split over t;
        norms, row-parallel biases, positions, pooler and MLM transform are replicated.
        """
        h, f, v, b = self.hidden, self.ffn, self.vocab, int(self.has_bias)
        kv = self.kv_heads * self.head_dim
        norm = h * (2 if self.norm == "layernorm" else 1)
        emb_rep = (self.max_positions * h if self.position == "learned" else 0) + self.type_vocab * h
        if self.family == "bert":
            emb_rep += norm
        qkv = h * (h + 2 * kv) + b * (h + 2 * kv)
        mlp_in = (2 if self.activation == "swiglu" else 1) * (h * f + b * f)
        layer_sh = qkv + h * h + mlp_in + f * h
        layer_rep = 2 * norm + 2 * b * h
        head_sh = (0 if self.tied_embeddings else v * h) + (v if self.head == "mlm" else 0)
        head_rep = h * h + h + norm if self.head == "mlm" else 0
        return {
            "embeddings": (v * h, emb_rep),
            "blocks": (self.layers * layer_sh, self.layers * layer_rep),
            "final_norm": (0, norm if self.family != "bert" else 0),
            "pooler": (0, h * h + h if self.pooler else 0),
            "head": (head_sh, head_rep),
        }

    def param_breakdown(self) -> dict[str, int]:
        """Parameters per group (see ``param_groups``)."""
        return {k: sh + rep for k, (sh, rep) in self.param_groups().items()}

    def param_count(self, include_head: bool = True) -> int:
        """Total trainable parameters (tied weights counted once).

        ``include_head=False`` gives the backbone (HF ``BertModel``/``GPT2Model``/``LlamaModel``),
        e.g. 335,141,888 for BERT-Large with pooler.
        """
        bd = self.param_breakdown()
        return sum(n for k, n in bd.items() if include_head or k != "head")

    def params_per_gpu(self) -> int:
        """Parameters held by one GPU under tensor parallelism (shards rounded up)."""
        t = self.tensor_parallel
        return sum(-(-sh // t) + rep for sh, rep in self.param_groups().values())

    def static_bytes(self) -> int:
        """Weights + gradients + Adam state per GPU: ``BYTES_PER_PARAM`` x ``params_per_gpu()``."""
        return BYTES_PER_PARAM * self.params_per_gpu()

    def describe(self) -> str:
        return (f"{self.name}: {self.family} L={self.layers} h={self.hidden} a={self.heads}"
                f" kv={self.kv_heads} ffn={self.ffn} V={self.vocab} s={self.seq} b={self.batch}"
                f" {self.dtype} {self.attention} {self.implementation} t={self.tensor_parallel}"
                f" params={self.param_count() / 1e6:.1f}M")


Positive = Annotated[int, Field(ge=1)]


class SpecSchema(Schema):
    """The declared types and ranges of every ``TransformerSpec`` field, and the checks between
    fields (a preset file is this plus a ``[sources]`` table: ``zoo.ModelFile``)."""

    name: Annotated[str, Field(min_length=1)]
    family: Literal[FAMILIES]
    layers: Positive
    hidden: Positive
    heads: Positive
    ffn: Positive
    vocab: Positive
    seq: Positive
    batch: Positive
    max_positions: Positive
    kv_heads: Positive
    dtype: Literal[tuple(DTYPES)]
    norm: Literal[NORMS]
    activation: Literal[ACTIVATIONS]
    attention: Literal[ATTENTIONS]
    dropout: Annotated[float, Field(ge=0, lt=1)]
    causal: bool
    tied_embeddings: bool
    position: Literal[POSITIONS]
    type_vocab: Annotated[int, Field(ge=0)]
    pooler: bool
    head: Literal[HEADS]
    tensor_parallel: Positive
    implementation: Literal[IMPLEMENTATIONS]
    mlm_fraction: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    logits_dtype: Literal[LOGITS_DTYPES]
    loss_workspace: bool
    budget_scope: Literal[BUDGET_SCOPES]
    budget_logits: bool
    budget_param_grads: bool
    use_cache: bool
    source: str

    @model_validator(mode="after")
    def _consistent(self):
        s = self
        if s.hidden % s.heads:
            raise ValueError(f"hidden: must be divisible by heads ({s.heads}); got {s.hidden}")
        if s.kv_heads > s.heads or s.heads % s.kv_heads:
            raise ValueError(f"kv_heads: must divide heads ({s.heads}); got {s.kv_heads}")
        t = s.tensor_parallel
        if s.heads % t or s.kv_heads % t:
            raise ValueError(f"tensor_parallel: must divide heads ({s.heads}) and kv_heads "
                             f"({s.kv_heads}); got {t}")
        if s.ffn % t:
            raise ValueError(f"tensor_parallel: must divide ffn ({s.ffn}); got {t}")
        if s.seq > s.max_positions:
            raise ValueError(f"seq: must be <= max_positions ({s.max_positions}); got {s.seq} "
                             "(raise max_positions explicitly to extrapolate)")
        if s.family != "bert":
            if s.type_vocab:
                raise ValueError(f"type_vocab: must be 0 for family {s.family!r}; got {s.type_vocab}")
            if s.pooler:
                raise ValueError(f"pooler: only family 'bert' has a pooler; got family {s.family!r}")
            if s.head != "lm":
                raise ValueError(f"head: must be 'lm' for family {s.family!r}; got {s.head!r}")
        if s.mlm_fraction != 1 and s.head != "mlm":
            raise ValueError(f"mlm_fraction: must be 1 for head {s.head!r} (only an MLM head gathers "
                             f"positions); got {s.mlm_fraction!r}")
        if s.implementation != "hf" and not s.use_cache:
            raise ValueError(f"use_cache: must be true for implementation {s.implementation!r} (a KV "
                             "cache is what HF's own code builds; implementation 'hf' takes false); "
                             "got False")
        if s.implementation != "fused":
            for name, default in (("mlm_fraction", 1.0), ("logits_dtype", "activation"),
                                  ("loss_workspace", True)):
                if getattr(s, name) != default:
                    raise ValueError(f"{name}: must be {default!r} for implementation "
                                     f"{s.implementation!r} (it models HF's own head and loss; "
                                     f"implementation 'fused' takes other values); got "
                                     f"{getattr(s, name)!r}")
        return self


def _validate(s: TransformerSpec) -> None:
    parse(SpecSchema, {f: getattr(s, f) for f in s.fields()})
