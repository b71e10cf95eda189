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

from ..errors import ConfigError
from .spec import TransformerSpec

SUPPORTED = ("bert", "gpt2", "llama", "mistral")
#: HF attention implementations -> ``TransformerSpec.attention`` (PyTorch SDPA picks a fused kernel
#: that saves Q, K, V, O and the log-sum-exp, as FlashAttention does).
_ATTENTION = {"eager": "eager", "sdpa": "flash", "flash_attention_2": "flash"}


def _get(cfg, key, where, default=...):
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if default is ...:
        raise ConfigError(f"{key}: missing required key in {where}")
    return default


def from_hf_config(path, **overrides) -> TransformerSpec:
    """Read ``path`` (a config.json, a folder holding one, or an already-parsed dict)."""
    if isinstance(path, Mapping):
        cfg, where, default_name = dict(path), "HF config", None
    else:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            cfg = json.loads(p.read_text())
        except OSError as exc:
            raise ConfigError(f"config.json: cannot read {p}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config.json: {p} is not valid JSON: {exc}") from exc
        if not isinstance(cfg, dict):
            raise ConfigError(f"config.json: {p} must hold a JSON object")
        where, default_name = str(p), p.stem if p.stem != "config" else p.parent.name
    mt = cfg.get("model_type")
    if mt not in SUPPORTED:
        raise ConfigError(f"model_type: must be one of {', '.join(SUPPORTED)}; got {mt!r} in {where}")
    arch = (cfg.get("architectures") or [""])[0]
    g = lambda k, d=...: _get(cfg, k, where, d)  # noqa: E731
    if mt == "bert":
        hidden, maxpos = g("hidden_size"), g("max_position_embeddings")
        kw = dict(family="bert", layers=g("num_hidden_layers"), hidden=hidden,
                  heads=g("num_attention_heads"), ffn=g("intermediate_size"), vocab=g("vocab_size"),
                  max_positions=maxpos, norm="layernorm", activation="gelu",
                  dropout=float(g("hidden_dropout_prob", 0.1)), causal=False,
                  tied_embeddings=bool(g("tie_word_embeddings", True)), position="learned",
                  type_vocab=g("type_vocab_size", 2), pooler=arch in ("BertModel", "BertForPreTraining"),
                  head="mlm")
    elif mt == "gpt2":
        hidden, maxpos = g("n_embd"), g("n_positions")
        kw = dict(family="gpt2", layers=g("n_layer"), hidden=hidden, heads=g("n_head"),
                  ffn=g("n_inner", 4 * hidden), vocab=g("vocab_size"), max_positions=maxpos,
                  norm="layernorm", activation="gelu", dropout=float(g("resid_pdrop", 0.1)),
                  causal=True, tied_embeddings=bool(g("tie_word_embeddings", True)),
                  position="learned", head="lm")
    else:
        heads = g("num_attention_heads")
        maxpos = g("max_position_embeddings")
        kw = dict(family="llama", layers=g("num_hidden_layers"), hidden=g("hidden_size"),
                  heads=heads, kv_heads=g("num_key_value_heads", heads), ffn=g("intermediate_size"),
                  vocab=g("vocab_size"), max_positions=maxpos, norm="rmsnorm", activation="swiglu",
                  dropout=float(g("attention_dropout", 0.0)), causal=True,
                  tied_embeddings=bool(g("tie_word_embeddings", False)), position="rope", head="lm")
        if "head_dim" in cfg and cfg["head_dim"] not in (None, kw["hidden"] // heads):
            raise ConfigError(f"head_dim: only head_dim = hidden_size / num_attention_heads is "
                              f"supported; got {cfg['head_dim']} in {where}")
    attn = cfg.get("_attn_implementation") or cfg.get("attn_implementation") or "sdpa"
    if attn not in _ATTENTION:
        raise ConfigError(f"_attn_implementation: must be one of {', '.join(_ATTENTION)}; got "
                          f"{attn!r} in {where}")
    kw.update(attention=_ATTENTION[attn], implementation="hf")
    name = overrides.pop("name", None) or default_name or cfg.get("_name_or_path") or mt
    fields = TransformerSpec.fields()
    for k in overrides:
        if k not in fields:
            raise ConfigError(f"{k}: unknown TransformerSpec field; allowed: {', '.join(fields)}")
    kw.update(name=str(name), seq=maxpos, batch=1, source=f"HF config {where} ({arch or mt})")
    kw.update(overrides)
    return TransformerSpec(**kw)
