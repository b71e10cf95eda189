"""The analytical transformer graphs held against HuggingFace ``transformers`` (docs/models.md).

Run:  python benchmarks/hf_fidelity.py            (small models on CPU, then the presets on meta)
      python benchmarks/hf_fidelity.py --small    (only the small CPU models)

An independent counter: a random-weight HF model built from a config dict runs one forward, loss
and backward; ``torch.autograd.graph.saved_tensors_hooks`` sees every tensor autograd saves
(deduplicated by storage; parameters, buffers and the token ids excluded) and
``torch.utils.flop_counter.FlopCounterMode`` counts the FLOPs of the forward and of the backward.
Each count is compared with ``models.build(from_hf_config(the same dict, ...))`` (implementation
"hf") and with the fused setting.

Two CPU details stand in for the CUDA kernels: dropout on CPU multiplies by a mask in the activation
dtype, where CUDA's fused kernel keeps a 1-byte mask, so the counter runs ``torch.native_dropout``
(the CUDA behaviour) instead; and SDPA with a dropout probability falls back to its math kernel on
CPU (saving s^2 tensors), so SDPA runs use attention dropout 0 (hidden dropout stays on) and get
PyTorch's CPU flash kernel, which saves Q, K, V, O and the log-sum-exp like FlashAttention on CUDA.
On the meta device SDPA takes its math kernel (s^2 tensors saved), so the full-size check on meta
uses eager attention; the keep-all peak needs real memory and is measured on CPU only.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import weakref

import torch
import torch.nn.functional as F
from torch.autograd.graph import saved_tensors_hooks
from torch.utils import flop_counter as fc

ARCH = {"bert": "BertForMaskedLM", "gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def config_dict(family, attention, *, layers=2, hidden=128, heads=4, ffn=None, vocab=256, seq=64,
                dropout=0.1, kv_heads=None):
    """An HF config dict (``attention``: "eager" | "sdpa"); ``from_hf_config`` reads it too."""
    ffn = ffn or 4 * hidden
    attn_drop = dropout if attention == "eager" else 0.0
    if family == "bert":
        d = dict(model_type="bert", hidden_size=hidden, num_hidden_layers=layers,
                 num_attention_heads=heads, intermediate_size=ffn, max_position_embeddings=seq,
                 hidden_dropout_prob=dropout, attention_probs_dropout_prob=attn_drop)
    elif family == "gpt2":
        d = dict(model_type="gpt2", n_embd=hidden, n_layer=layers, n_head=heads, n_inner=ffn,
                 n_positions=seq, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=attn_drop,
                 bos_token_id=0, eos_token_id=0)
    else:
        d = dict(model_type="llama", hidden_size=hidden, num_hidden_layers=layers,
                 num_attention_heads=heads, num_key_value_heads=kv_heads or heads,
                 intermediate_size=ffn, max_position_embeddings=seq, attention_dropout=0.0)
    return dict(d, vocab_size=vocab, architectures=[ARCH[family]], attn_implementation=attention)


def hf_model(cfg: dict, dtype: str, device="cpu"):
    import transformers

    kw = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kw)
    cls = getattr(transformers, cfg["architectures"][0])
    torch.manual_seed(0)
    with torch.device(device):
        model = cls(config).to(DTYPES[dtype])
    return model.train()


def _cuda_dropout(input, p=0.5, training=True, inplace=False):
    """CUDA's fused dropout on any device: ``native_dropout`` keeps a 1-byte mask."""
    if not training or p == 0:
        return input
    return torch.native_dropout(input, p, True)[0]


@contextlib.contextmanager
def cuda_like_dropout():
    orig = F.dropout
    F.dropout = _cuda_dropout
    try:
        yield
    finally:
        F.dropout = orig


def _cpu_sdpa(q, k, v, *args, **kwargs):
    return fc.sdpa_flop_count(q, k, v)


def _cpu_sdpa_bwd(grad_out, q, k, v, *args, **kwargs):
    return fc.sdpa_backward_flop_count(grad_out, q, k, v)


#: FlopCounterMode has no formula for PyTorch's CPU flash kernel; use the CUDA kernels' formulas.
CPU_SDPA = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_bwd}


def _layers(model):
    for path in ("bert.encoder.layer", "transformer.h", "model.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            continue
    raise ValueError(f"no transformer layers found in {type(model).__name__}")


def count(model, batch: int, seq: int, vocab: int, device="cpu") -> dict:
    """One training step: saved bytes per layer (key None = outside the blocks), their total, the
    peak of resident saved tensors, forward and backward FLOPs."""
    skip = {p.untyped_storage()._cdata for p in model.parameters()}
    skip |= {b.untyped_storage()._cdata for b in model.buffers()}
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    skip.add(ids.untyped_storage()._cdata)
    cur = [None]
    hooks = []
    for i, layer in enumerate(_layers(model)):
        hooks.append(layer.register_forward_pre_hook(lambda m, a, i=i: cur.__setitem__(0, i)))
        hooks.append(layer.register_forward_hook(lambda m, a, o: cur.__setitem__(0, None)))
    seen, per, live = set(), collections.Counter(), collections.Counter()
    mem = {"now": 0, "peak": 0}
    keep = []  # the saved tensors stay referenced, so storage ids are never reused

    class Box:
        __slots__ = ("t", "__weakref__")

    def release(key, nbytes):
        live[key] -= 1
        if not live[key]:
            mem["now"] -= nbytes

    def pack(t):
        box = Box()
        box.t = t
        st = t.untyped_storage()
        key = st._cdata
        if key in skip:
            return box
        nbytes = st.nbytes()
        keep.append(t)
        if key not in seen:
            seen.add(key)
            per[cur[0]] += nbytes
        if not live[key]:
            mem["now"] += nbytes
            mem["peak"] = max(mem["peak"], mem["now"])
        live[key] += 1
        weakref.finalize(box, release, key, nbytes)
        return box

    fwd, bwd = fc.FlopCounterMode(display=False, custom_mapping=CPU_SDPA), \
        fc.FlopCounterMode(display=False, custom_mapping=CPU_SDPA)
    try:
        with cuda_like_dropout(), saved_tensors_hooks(pack, lambda box: box.t), fwd:
            loss = model(input_ids=ids, labels=ids).loss
        with bwd:
            loss.backward()
    finally:
        for h in hooks:
            h.remove()
    return dict(per_layer=dict(per), total=sum(per.values()), peak=mem["peak"],
                fwd_flops=fwd.get_total_flops(), bwd_flops=bwd.get_total_flops())


def activation_peak(model, batch: int, seq: int, vocab: int) -> int:
    """The true peak of activation memory in one step on CPU, from PyTorch's memory profiler's
    timeline: saved and transient activations, gradients of activations, step inputs."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action, Category

    model.zero_grad(set_to_none=True)  # a first backward's .grad would change what is allocated
    ids = torch.randint(0, vocab, (batch, seq))
    with cuda_like_dropout(), profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                      record_shapes=True, with_stack=True) as prof:
        model(input_ids=ids, labels=ids).loss.backward()
    mp = prof._memory_profile()
    # not counted: parameters, their gradients, optimizer state (static memory in slackswap) and
    # allocations freed right after they are made (CPU kernels' scratch, e.g. bf16 GEMM buffers)
    static = (Category.PARAMETER, Category.GRADIENT, Category.OPTIMIZER_STATE)
    now = peak = 0
    tl = mp.timeline
    for i, (_, action, (key, version), size) in enumerate(tl):
        scratch = action == Action.CREATE and i + 1 < len(tl) and tl[i + 1][1] == Action.DESTROY \
            and tl[i + 1][2][0] == key
        if scratch or (action == Action.DESTROY and i and tl[i - 1][1] == Action.CREATE
                       and tl[i - 1][2][0] == key):
            continue  # a kernel's scratch buffer: freed before anything else happens
        if action == Action.INCREMENT_VERSION:
            was, cat = mp._categories.get(key, version - 1), mp._categories.get(key, version)
            now += size * ((cat not in static) - (was not in static))
        elif mp._categories.get(key, version) not in static:
            now += size if action in (Action.CREATE, Action.PREEXISTING) else -size
        peak = max(peak, now)
    model.zero_grad(set_to_none=True)
    return peak


def analytical(cfg: dict, dtype: str, batch: int, seq: int, implementation="hf") -> dict:
    """The same numbers from ``models.build`` (matmul and attention FLOPs: what FlopCounterMode
    counts)."""
    from slackswap import Problem, models

    spec = models.from_hf_config(cfg, seq=seq, batch=batch, dtype=dtype,
                                 implementation=implementation)
    g = models.build(spec)
    saved = {t.id for t in g.planning_tensors()}
    per = collections.Counter()
    for op in g.ops:
        per[op.layer] += sum(g.tensors[t].bytes for t in op.outputs if t in saved)
    mm = [op for op in g.ops if op.kind in ("matmul", "attention")]
    return dict(per_layer=dict(per), total=g.saved_bytes(),
                peak=Problem.build(g, "a100-80gb", budget=None).keep_all_peak,
                fwd_flops=sum(op.fwd_flops for op in mm), bwd_flops=sum(op.bwd_flops for op in mm))


def compare(family, attention, dtype, *, batch=2, seq=64, device="cpu", **shape) -> dict:
    """Relative differences (ours / truth - 1) of the "hf" and "fused" settings."""
    cfg = config_dict(family, attention, seq=seq, **shape)
    model = hf_model(cfg, dtype, device)
    truth = count(model, batch, seq, cfg["vocab_size"], device)
    if device == "cpu":
        truth["act_peak"] = activation_peak(model, batch, seq, cfg["vocab_size"])
    layer = max(k for k in truth["per_layer"] if k is not None)  # the last: cos/sin are in layer 0
    out = {"truth": truth, "layer": layer}
    for impl in ("hf", "fused"):
        ours = analytical(cfg, dtype, batch, seq, impl)
        out[impl] = ours
        out[impl + "_rel"] = {
            "layer": ours["per_layer"][layer] / truth["per_layer"][layer] - 1,
            "total": ours["total"] / truth["total"] - 1,
            "peak": ours["peak"] / truth["act_peak"] - 1 if "act_peak" in truth else None,
            "fwd_flops": ours["fwd_flops"] / truth["fwd_flops"] - 1,
            "bwd_flops": ours["bwd_flops"] / truth["bwd_flops"] - 1}
    return out


#: The presets' shapes (bert-large, gpt2-xl, llama-7b at the preset batch x seq), for the meta device.
PRESET_SHAPES = {
    "bert": dict(preset="bert-large", layers=24, hidden=1024, heads=16, ffn=4096, vocab=30522,
                 seq=512, batch=32),
    "gpt2": dict(preset="gpt2-xl", layers=48, hidden=1600, heads=25, ffn=6400, vocab=50257,
                 seq=1024, batch=8),
    "llama": dict(preset="llama-7b", layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000,
                  seq=2048, batch=4),
}


def compare_preset(family: str) -> dict:
    """``compare`` at a preset's full size on the meta device (eager: on meta SDPA takes its math
    kernel, which no GPU run uses), plus the preset itself built with ``attention="eager",
    implementation="hf"`` (``preset_rel``: its saved bytes against the count)."""
    from slackswap import models

    shape = dict(PRESET_SHAPES[family])
    preset, b, s = shape.pop("preset"), shape.pop("batch"), shape.pop("seq")
    r = compare(family, "eager", "bf16", batch=b, seq=s, device="meta", **shape)
    g = models.build(preset, attention="eager", implementation="hf", pooler=False)
    r["preset"] = preset
    r["preset_rel"] = g.saved_bytes() / r["truth"]["total"] - 1
    return r


def _row(name, r):
    cells = ["n/a" if r["hf_rel"][k] is None else f"{100 * r['hf_rel'][k]:+6.2f}%"
             for k in ("layer", "total", "peak", "fwd_flops", "bwd_flops")]
    fused = f"{100 * r['fused_rel']['layer']:+6.1f}% / {100 * r['fused_rel']['total']:+6.1f}%"
    print(f"| {name} | {' | '.join(cells)} | {fused} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="only the small CPU models")
    args = ap.parse_args(argv)
    print("| family attention dtype | hf: layer bytes | total saved | keep-all peak | fwd FLOPs "
          "| bwd FLOPs | fused: layer / total |")
    print("|---|---|---|---|---|---|---|")
    for family in ("bert", "gpt2", "llama"):
        for attention in ("eager", "sdpa"):
            for dtype in ("fp32", "bf16"):
                _row(f"{family} {attention} {dtype}", compare(family, attention, dtype))
    if args.small:
        return
    print("\nFull size on the meta device (eager bf16), saved bytes of one step in MiB:")
    print("| preset | transformers | hf (rel) | fused (rel) | preset, eager hf (rel) |")
    print("|---|---|---|---|---|")
    for family in PRESET_SHAPES:
        r = compare_preset(family)
        truth = r["truth"]["total"]
        cells = [f"{r[i]['total'] / 2**20:,.0f} ({100 * r[i + '_rel']['total']:+.2f}%)" for i in ("hf", "fused")]
        print(f"| {r['preset']} | {truth / 2**20:,.0f} | {' | '.join(cells)} | {100 * r['preset_rel']:+.2f}% |")
        _row(f"{r['preset']} (meta, eager bf16)", r)

if __name__ == "__main__":
    main()
