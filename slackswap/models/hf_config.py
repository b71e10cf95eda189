"""``from_hf_config``: a ``TransformerSpec`` from a local HuggingFace ``config.json``.

Supported ``model_type``: ``bert`` (BertModel, BertForMaskedLM, BertForPreTraining), ``gpt2``
(GPT2LMHeadModel), ``llama`` and ``mistral`` (LlamaForCausalLM, MistralForCausalLM; GQA from
``num_key_value_heads``; Mistral's sliding window is ignored, exact for seq <= window).
A config has no training shape: ``seq`` defaults to the maximum position count and ``batch`` to 1;
``dtype`` defaults to bf16 (``torch_dtype`` describes checkpoint storage, not training).
A model built from an HF config runs in ``transformers``, so ``implementation`` is ``"hf"``
(what its Python code paths save; docs/models.md), and ``attention`` follows the config's
``_attn_implementation``/``attn_implementation`` (``"eager"`` -> eager; ``"sdpa"``,
``"flash_attention_2"`` or unset -> flash). Pass overrides to change any field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from ..core.errors import ConfigError
from ..core.paths import user_path
from ..core.schema import Schema, check_type, parse
from .spec import TransformerSpec

SUPPORTED = ("bert", "gpt2", "llama", "mistral")
#: HF attention implementations -> ``TransformerSpec.attention`` (PyTorch SDPA picks a fused kernel
#: that saves Q, K, V, O and the log-sum-exp, as FlashAttention does).
_ATTENTION = {"eager": "eager", "sdpa": "flash", "flash_attention_2": "flash"}


Positive = Annotated[int, Field(ge=1)]
Probability = Annotated[float, Field(ge=0, lt=1)]


def _heads(width: str, heads: str, kv: str | None = None):
    """A validator: ``heads`` divides ``width`` and ``kv`` (when given) divides ``heads``; the
    error names the config's own keys."""
    def check(self):
        w, h = getattr(self, width), getattr(self, heads)
        if w % h:
            raise ValueError(f"{heads}: must divide {width} ({w}); got {h}")
        k = getattr(self, kv) if kv else None
        if k is not None and h % k:
            raise ValueError(f"{kv}: must divide {heads} ({h}); got {k}")
        return self
    return model_validator(mode="after")(check)


class _Config(Schema):
    """Keys every supported config may have; other keys of a config.json are ignored."""

    open_keys: ClassVar[bool] = True
    model_type: Literal[SUPPORTED]
    architectures: Annotated[list[str], Field(min_length=1)] | None = None
    tie_word_embeddings: bool | None = None
    attn_private: Literal[tuple(_ATTENTION)] | None = Field(None, alias="_attn_implementation")
    attn_implementation: Literal[tuple(_ATTENTION)] | None = None
    name_or_path: str | None = Field(None, alias="_name_or_path")
    use_cache: bool | None = None


class BertConfig(_Config):
    hidden_size: Positive
    num_hidden_layers: Positive
    num_attention_heads: Positive
    intermediate_size: Positive
    vocab_size: Positive
    max_position_embeddings: Positive
    hidden_dropout_prob: Probability | None = None
    type_vocab_size: Annotated[int, Field(ge=0)] | None = None

    check_heads = _heads("hidden_size", "num_attention_heads")


class Gpt2Config(_Config):
    n_embd: Positive
    n_layer: Positive
    n_head: Positive
    n_positions: Positive
    vocab_size: Positive
    n_inner: Positive | None = None
    resid_pdrop: Probability | None = None

    check_heads = _heads("n_embd", "n_head")


class LlamaConfig(_Config):
    hidden_size: Positive
    num_hidden_layers: Positive
    num_attention_heads: Positive
    num_key_value_heads: Positive | None = None
    intermediate_size: Positive
    vocab_size: Positive
    max_position_embeddings: Positive
    attention_dropout: Probability | None = None
    head_dim: Positive | None = None

    check_heads = _heads("hidden_size", "num_attention_heads", "num_key_value_heads")

    @model_validator(mode="after")
    def _head_dim(self):
        if self.head_dim is not None and self.head_dim != self.hidden_size // self.num_attention_heads:
            raise ValueError("head_dim: only head_dim = hidden_size / num_attention_heads is supported; "
                             f"got {self.head_dim}")
        return self


_SCHEMAS = {"bert": BertConfig, "gpt2": Gpt2Config, "llama": LlamaConfig, "mistral": LlamaConfig}


def _or(value, default):
    return default if value is None else value


def from_hf_config(path, /, **overrides) -> TransformerSpec:
    """Read ``path`` (a config.json, a folder holding one, or an already-parsed dict); the config
    is parsed by ``BertConfig``, ``Gpt2Config`` or ``LlamaConfig`` (strict types: ``"false"`` is
    not a boolean), and a bad key raises ``ConfigError`` naming the file and the key."""
    if isinstance(path, Mapping):
        cfg, where, default_name = dict(path), "", None
    else:
        check_type(path, (str, Path), "from_hf_config(path)", "a config.json path, a folder or a dict",
                   ConfigError)
        p = user_path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            cfg = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config.json: cannot read {p}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p.name}: not valid JSON: {exc}") from None
        where, default_name = str(p), p.stem if p.stem != "config" else p.parent.name
    head = parse(_Config, cfg, where)
    c = parse(_SCHEMAS[head.model_type], cfg, where)
    arch = (c.architectures or [""])[0]
    tied = c.tie_word_embeddings
    if isinstance(c, BertConfig):
        maxpos = c.max_position_embeddings
        kw = dict(family="bert", layers=c.num_hidden_layers, hidden=c.hidden_size,
                  heads=c.num_attention_heads, ffn=c.intermediate_size, vocab=c.vocab_size,
                  max_positions=maxpos, norm="layernorm", activation="gelu",
                  dropout=_or(c.hidden_dropout_prob, 0.1), causal=False,
                  tied_embeddings=_or(tied, True), position="learned",
                  type_vocab=_or(c.type_vocab_size, 2), pooler=arch in ("BertModel", "BertForPreTraining"),
                  head="mlm")
    elif isinstance(c, Gpt2Config):
        maxpos = c.n_positions
        kw = dict(family="gpt2", layers=c.n_layer, hidden=c.n_embd, heads=c.n_head,
                  ffn=_or(c.n_inner, 4 * c.n_embd), vocab=c.vocab_size, max_positions=maxpos,
                  norm="layernorm", activation="gelu", dropout=_or(c.resid_pdrop, 0.1),
                  causal=True, tied_embeddings=_or(tied, True), position="learned", head="lm")
    else:
        maxpos = c.max_position_embeddings
        kw = dict(family="llama", layers=c.num_hidden_layers, hidden=c.hidden_size,
                  heads=c.num_attention_heads, kv_heads=_or(c.num_key_value_heads, c.num_attention_heads),
                  ffn=c.intermediate_size, vocab=c.vocab_size, max_positions=maxpos, norm="rmsnorm",
                  activation="swiglu", dropout=_or(c.attention_dropout, 0.0), causal=True,
                  tied_embeddings=_or(tied, False), position="rope", head="lm")
    attn = c.attn_private or c.attn_implementation or "sdpa"
    kw.update(attention=_ATTENTION[attn], implementation="hf", use_cache=_or(c.use_cache, True))
    name = overrides.pop("name", None) or default_name or c.name_or_path or head.model_type
    fields = TransformerSpec.fields()
    for k in overrides:
        if k not in fields:
            raise ConfigError(f"{k}: unknown TransformerSpec field; allowed: {', '.join(fields)}")
    seq = overrides.get("seq")
    if ("max_positions" not in overrides and isinstance(seq, int) and not isinstance(seq, bool)
            and seq > maxpos):
        key = "n_positions" if isinstance(c, Gpt2Config) else "max_position_embeddings"
        raise ConfigError(f"{where or 'config'}: seq: must be <= {key} ({maxpos}), the config's position "
                          f"count (max_positions= raises it); got {seq}")
    kw.update(name=str(name), seq=maxpos, batch=1, source=f"HF config {where or 'dict'} ({arch or head.model_type})")
    kw.update(overrides)
    return TransformerSpec(**kw)
