"""Real PyTorch models to measure: HF transformers from config dicts, random weights, dropout 0,
eager attention (docs/executor.md). ``build(name, batch=, seq=, layers=)`` returns
``(model, inputs)`` with ``inputs`` a dict of keyword arguments that includes ``labels``, so the
default loss is the model's own language-modelling loss."""

from __future__ import annotations

from ..core.errors import UnknownNameError

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


def build(name: str, batch: int | None = None, seq: int | None = None, layers: int | None = None,
          vocab: int | None = None, seed: int = 0):
    """``(model, inputs)`` for preset ``name`` (see ``PRESETS``) in training mode; ``layers`` and
    ``vocab`` shrink a preset (hidden sizes and heads stay)."""
    import torch  # optional dependency (torch)
    import transformers as tf  # optional dependency (transformers)

    if name not in PRESETS:
        raise UnknownNameError("torch model", name, names())
    kind, cfg, b0, s0 = PRESETS[name]
    batch, seq, cfg = batch or b0, seq or s0, dict(cfg)
    if layers is not None:
        cfg[_LAYERS[kind]] = layers
    if vocab is not None:
        cfg["vocab_size"] = vocab
    cfg["attn_implementation"], cfg["use_cache"] = "eager", False   # a training step: no KV cache
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
    model.train()
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg["vocab_size"], (batch, seq), generator=g)
    return model, {"input_ids": ids, "labels": ids.clone()}
