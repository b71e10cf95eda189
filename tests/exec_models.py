"""Tiny PyTorch models for the executor tests: HF GPT-2, BERT and Llama from small config dicts
(random weights, dropout 0, eager attention) and a small CNN with batch norm."""

from __future__ import annotations

import torch

VOCAB, BATCH, SEQ = 64, 2, 8


def _inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=3, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    return GPT2LMHeadModel(cfg), _inputs()


def bert():
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertForMaskedLM(cfg), _inputs()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=SEQ,
                      attn_implementation="eager")
    return LlamaForCausalLM(cfg), _inputs()


def cnn():
    def block():
        return [torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                torch.nn.ReLU(inplace=True)]

    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Tanh(), *[m for _ in range(6) for m in block()],
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    return net, (x,)


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama, "cnn": cnn}


def build(name):
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    model.train()
    return model, inputs


def traced_with_reference(model, inputs):
    """``(graph, reference gradients)``: ``model`` traced on CPU with ``inputs`` (a tuple or a dict
    of keyword arguments), and the parameter gradients of one plain step of a deep copy of it
    (the default loss), to compare a planned step's gradients with."""
    import copy

    from slackswap.torch import trace
    from slackswap.torch.trace import _default_loss

    graph = trace(model, inputs, device="cpu")
    ref = copy.deepcopy(model)
    args = tuple(inputs.values()) if isinstance(inputs, dict) else inputs
    out = ref(**inputs) if isinstance(inputs, dict) else ref(*inputs)
    _default_loss(out, *args).backward()
    return graph, [p.grad for p in ref.parameters()]


def run_and_compare(model, plan, graph, inputs, problem, ref_grads, label: str, **kw):
    """One planned step of a deep copy of ``model`` (``run_step``, ``kw`` passed to ``apply``);
    asserts every parameter gradient bitwise equal to ``ref_grads`` (fp32 on CPU: the same kernels
    on the same values) and returns the step's stats."""
    import copy

    from slackswap.torch import run_step

    m = copy.deepcopy(model)
    stats = run_step(m, plan, graph, inputs, problem=problem, **kw)
    for (pname, p), g in zip(m.named_parameters(), ref_grads, strict=True):
        assert torch.equal(p.grad, g), f"{label}: gradient of {pname} differs"
    return stats



def checkpointed(model, name, context_fn, regions="layers"):
    """Wrap the HF ``model`` (``name``: "gpt2", "bert" or "llama") in non-reentrant checkpointing
    with ``context_fn``: every layer (``regions="layers"``) or the first layer alone
    (``"first"``). Returns the model."""
    from torch.utils.checkpoint import checkpoint

    if regions == "layers":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={
            "use_reentrant": False, "context_fn": context_fn})
        return model
    base = model.base_model
    blk = (base.encoder.layer if name == "bert" else base.h if name == "gpt2" else base.layers)[0]
    fwd = blk.forward
    blk.forward = lambda *a, **k: checkpoint(fwd, *a, use_reentrant=False, context_fn=context_fn, **k)
    return model
