"""Real PyTorch models to measure: HF transformers from config dicts, random weights, dropout 0,
eager attention (docs/executor.md). ``build(name, batch=, seq=, layers=)`` returns
``(model, inputs)`` with ``inputs`` a dict of keyword arguments that includes ``labels``, so the
default loss is the model's own language-modelling loss."""

from __future__ import annotations

import os

from ..core.errors import ParameterError, UnknownNameError

#: name -> (HF model type, config overrides, default batch, default seq)
PRESETS: dict[str, tuple[str, dict, int, int]] = {
    "gpt2-124m": ("gpt2", {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257}, 8, 1024),
    "gpt2-355m": ("gpt2", {"n_embd": 1024, "n_layer": 24, "n_head": 16, "vocab_size": 50257}, 8, 1024),
    "bert-base": ("bert", {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                           "intermediate_size": 3072, "vocab_size": 30522}, 16, 512),
    "llama-small": ("llama", {"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
                              "num_attention_heads": 8, "num_key_value_heads": 8,
                              "vocab_size": 32000}, 8, 1024),
    "gpt2-tiny": ("gpt2", {"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 64}, 2, 8),
}
_LAYERS = {"gpt2": "n_layer", "bert": "num_hidden_layers", "llama": "num_hidden_layers"}


def names() -> list[str]:
    return sorted(PRESETS)


_SHAPE = ("batch", "seq", "layers", "vocab")


def _sizes(kind: str, cfg: dict, batch: int, seq: int, layers, vocab) -> tuple[int, int]:
    """Lower bounds of ``(parameter bytes, bytes of one training step)`` in fp32: the embedding
    and layer weights (at least 12 hidden**2 per layer; the step holds them and their gradients)
    plus, saved for the backward, one eager attention probability matrix per layer and the
    logits."""
    hidden = cfg.get("n_embd") or cfg["hidden_size"]
    heads = cfg.get("n_head") or cfg["num_attention_heads"]
    n_layers = layers if layers is not None else cfg[_LAYERS[kind]]
    v = vocab if vocab is not None else cfg["vocab_size"]
    positions = 0 if kind == "llama" else seq    # a learned position table of max(seq, 8) rows
    params = 4 * (v * hidden + positions * hidden + n_layers * 12 * hidden * hidden)
    acts = 4 * (n_layers * batch * heads * seq * seq + batch * seq * v)
    return params, 2 * params + acts


def machine_memory(device=None) -> int:
    """Bytes of memory of ``device``: the GPU's for ``cuda``, else this machine's RAM."""
    import torch  # optional dependency (torch)

    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda":
        return torch.cuda.get_device_properties(dev.index or 0).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_shape(name: str, batch=None, seq=None, layers=None, vocab=None, device=None,
                where: str = "measure") -> None:
    """Refuse, before anything is allocated, a shape that is not integers >= 1 or whose step
    would need more memory than ``device`` has (a lower bound, ``_sizes``), naming the option
    that makes it too big and the estimated bytes."""
    if name not in PRESETS:
        raise UnknownNameError("torch model", name, names())
    given = dict(batch=batch, seq=seq, layers=layers, vocab=vocab)
    for k, v in given.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ParameterError(f"{where}: {k}: must be an integer >= 1; got {v!r}")
    kind, cfg, b0, s0 = PRESETS[name]
    default = dict(batch=b0, seq=s0, layers=None, vocab=None)
    shape = {k: given[k] if given[k] is not None else default[k] for k in _SHAPE}
    params, need = _sizes(kind, cfg, **shape)
    have = machine_memory(device)
    if max(need, params) <= have:
        return
    # the option whose preset value would shrink the step the most is the one named
    culprit = min((k for k in _SHAPE if given[k] is not None),
                  key=lambda k: _sizes(kind, cfg, **{**shape, k: default[k]})[1], default=None)
    where_dev = "the GPU" if device is not None and str(device).startswith("cuda") else "this machine"
    text = (f"a training step of {name} needs at least {need:,} bytes ({need / 2**30:,.1f} GiB), more "
            f"than the {have:,} bytes of {where_dev}")
    if culprit is None:
        raise ParameterError(f"{where}: model: {text}; got {name!r}")
    raise ParameterError(f"{where}: {culprit}: {text}; got {given[culprit]}")


def _token_ids(tf, kind: str, vocab: int) -> dict:
    """Special token ids of the config class that fall outside ``vocab`` set to None: a training
    step never reads them, and transformers warns about them on a shrunk vocabulary."""
    cls = {"gpt2": tf.GPT2Config, "bert": tf.BertConfig, "llama": tf.LlamaConfig}[kind]
    defaults = cls()
    out = {}
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        v = getattr(defaults, k, None)
        if isinstance(v, int) and v >= vocab:
            out[k] = None
    return out


def build(name: str, batch: int | None = None, seq: int | None = None, layers: int | None = None,
          vocab: int | None = None, seed: int = 0, device=None):
    """``(model, inputs)`` for preset ``name`` (see ``PRESETS``) in training mode; ``layers`` and
    ``vocab`` shrink a preset (hidden sizes and heads stay). The shape is checked first
    (``check_shape``: integers >= 1, a step that fits in ``device``'s memory)."""
    check_shape(name, batch, seq, layers, vocab, device)
    import torch  # optional dependency (torch)
    import transformers as tf  # optional dependency (transformers)

    kind, cfg, b0, s0 = PRESETS[name]
    batch, seq, cfg = batch or b0, seq or s0, dict(cfg)
    if layers is not None:
        cfg[_LAYERS[kind]] = layers
    if vocab is not None:
        cfg["vocab_size"] = vocab
    cfg["attn_implementation"], cfg["use_cache"] = "eager", False   # a training step: no KV cache
    cfg.update(_token_ids(tf, kind, cfg["vocab_size"]))
    torch.manual_seed(seed)
    if kind == "gpt2":
        conf = tf.GPT2Config(n_positions=max(seq, 8), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **cfg)
        model = tf.GPT2LMHeadModel(conf)
    elif kind == "bert":
        conf = tf.BertConfig(max_position_embeddings=max(seq, 8), hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, **cfg)
        model = tf.BertForMaskedLM(conf)
    else:
        conf = tf.LlamaConfig(max_position_embeddings=max(seq, 8), **cfg)
        model = tf.LlamaForCausalLM(conf)
    if kind != "bert" and getattr(model, "loss_type", None) is None:
        model.loss_type = "ForCausalLM"   # what transformers picks anyway, after a warning
    model.train()
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq), generator=g)
    return model, {"input_ids": ids, "labels": ids.clone()}
