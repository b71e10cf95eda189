"""The model zoo: exact parameter counts, Korthikanti's saved bytes, FLOPs, validation, HF configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slackswap import models
from slackswap.core.errors import ConfigError, SlackSwapError, UnknownNameError
from slackswap.core.graph import Graph
from slackswap.models import TransformerSpec, available, build, from_hf_config, load
from slackswap.models.presets import load_file, models_dir

HF = Path(__file__).parent / "data" / "hf"
PRESETS = ["bert-large", "gpt2-xl", "llama-7b", "llama-2-7b", "gpt2", "tiny", "gpt3-175b", "llama-2-70b"]


def layer_saved_bytes(g: Graph, layer: int, kinds=None) -> int:
    """Bytes of planning tensors produced by the ops of one block (optionally of some kinds)."""
    saved = {t.id for t in g.planning_tensors()}
    return sum(g.tensors[t].bytes for op in g.ops if op.layer == layer for t in op.outputs
               if t in saved and (kinds is None or g.tensors[t].kind in kinds))


def korthikanti(s: TransformerSpec) -> int:
    """Korthikanti et al. 2022 eq. 2 (tensor parallel, no sequence parallel), in bytes:
    s*b*h*(10 + 24/t + 5*a*s/(h*t)), written in integers."""
    t = s.tensor_parallel
    return s.seq * s.batch * s.hidden * (10 + 24 // t) + 5 * s.heads * s.seq**2 * s.batch // t


# ---------------------------------------------------------------- presets and parameter counts
def test_available_lists_presets():
    assert set(PRESETS) <= set(available())
    assert available() == sorted(available())


@pytest.mark.parametrize("name, total, backbone", [
    ("bert-large", 336_224_058, 335_141_888),  # backbone = HF BertModel with pooler
    ("gpt2-xl", 1_557_611_200, 1_557_611_200),  # tied LM head adds nothing
    ("gpt2", 124_439_808, 124_439_808),
    ("llama-7b", 6_738_415_616, 6_607_343_616),
    ("llama-2-7b", 6_738_415_616, 6_607_343_616),
    ("llama-2-70b", 68_976_648_192, 68_714_504_192),  # HF LlamaForCausalLM / LlamaModel
    # GPT-3 175B with Megatron's padded vocabulary: 96 (12h^2 + 13h) + (V + s + 2) h, tied head
    ("gpt3-175b", 96 * (12 * 12288**2 + 13 * 12288) + (51200 + 2048 + 2) * 12288,
     96 * (12 * 12288**2 + 13 * 12288) + (51200 + 2048 + 2) * 12288),
])
def test_exact_param_counts(name, total, backbone):
    s = load(name)
    assert s.param_count() == total
    assert s.param_count(include_head=False) == backbone
    assert sum(s.param_breakdown().values()) == total


def test_bert_mlm_head_params():
    s = load("bert-large")
    # BertLMPredictionHead: dense h*h+h, LayerNorm 2h, decoder bias V (decoder weight tied).
    assert s.param_breakdown()["head"] == 1024 * 1024 + 1024 + 2048 + 30522
    assert s.replace(pooler=False).param_count(include_head=False) == 335_141_888 - 1024 * 1025


def test_static_bytes_is_16_bytes_per_param_sharded_over_t():
    s = load("llama-7b")
    g = build(s)
    assert g.static_bytes == 16 * s.param_count()
    s2 = s.replace(tensor_parallel=2)
    norms = 65 * 4096  # RMSNorm weights are replicated, everything else in Llama is sharded
    assert s2.params_per_gpu() == (s.param_count() - norms) // 2 + norms
    assert build(s2).static_bytes == 16 * s2.params_per_gpu()


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_builds_a_valid_graph(name):
    g = build(name)
    s = g.spec
    assert isinstance(g, Graph) and g.name == name and isinstance(s, TransformerSpec)
    assert g.layers == list(range(s.layers))
    # forward execution order: embeddings first, then blocks in order, then head and loss
    assert g.ops[0].kind == "embedding" and g.ops[-1].kind == "loss"
    layer_seq = [op.layer for op in g.ops if op.layer is not None]
    assert layer_seq == sorted(layer_seq)
    first_block = next(i for i, op in enumerate(g.ops) if op.layer is not None)
    assert all(op.layer is None for op in g.ops[:first_block])
    for t in g.tensors:
        assert t.recomputable and t.swappable
        assert (t.producer is None) == (t.kind == "input")
    for op in g.ops:
        assert op.bwd_flops >= op.fwd_flops and op.bwd_bytes >= op.fwd_bytes
    assert {t.kind for t in g.tensors} >= {"input", "activation", "stats", "logits"}


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("name", PRESETS)
def test_dropout_saves_a_one_byte_mask_per_dropout_and_nothing_without(name, dropout):
    """docs/models.md, "What each op saves (and why)": each dropout (after the embeddings, after attention, after the
    MLP) saves a 1-byte mask per element (FlashAttention regenerates its own); dropout 0 builds no
    dropout ops and no masks. Both settings for every preset, whatever its own dropout is."""
    s = load(name).replace(dropout=dropout)
    g = build(s)
    masks = [t for t in g.tensors if t.kind == "mask"]
    dropouts = [op for op in g.ops if op.kind == "dropout"]
    n = 2 * s.layers + 1 if dropout else 0
    # eager attention (gpt3-175b) adds the attention-probability dropout: one a*s*s*b mask per layer
    eager = s.layers if dropout and s.attention == "eager" else 0
    assert len(dropouts) == len(masks) == n + eager
    hidden_masks = [t for t in masks if t.bytes == s.tokens * s.hidden]
    assert len(hidden_masks) == n
    assert all(t.bytes == s.heads * s.seq * s.tokens for t in masks if t not in hidden_masks)
    assert all(any(g.tensors[t].kind == "mask" for t in op.outputs) for op in dropouts)


# ---------------------------------------------------------------- Korthikanti et al. 2022
@pytest.mark.parametrize("name", ["gpt2-xl", "bert-large"])
def test_korthikanti_eager_layer_bytes_exact(name):
    """Eager attention + dropout: per layer s*b*h*(34 + 5as/h) bytes (16-bit, 1-byte masks),
    plus our documented difference: fp32 LayerNorm mean+rstd, 2 LNs x 8 bytes per token."""
    s = load(name, attention="eager")
    assert s.dropout > 0 and s.act_bytes == 2
    g = build(s)
    sbh, a = s.seq * s.batch * s.hidden, s.heads
    paper = sbh * 34 + 5 * a * s.seq**2 * s.batch
    assert paper == korthikanti(s)
    stats = 2 * 8 * s.seq * s.batch
    for layer in (0, s.layers // 2, s.layers - 1):
        assert layer_saved_bytes(g, layer) == paper + stats
        assert layer_saved_bytes(g, layer, kinds={"stats"}) == stats
        assert layer_saved_bytes(g, layer, kinds={"mask"}) == 2 * sbh + a * s.seq**2 * s.batch


def test_flash_has_no_s2_term_linear_in_seq():
    s = load("gpt2-xl", seq=256)
    g1, g2 = build(s), build(s.replace(seq=512))
    b1, b2 = layer_saved_bytes(g1, 3), layer_saved_bytes(g2, 3)
    assert b2 == 2 * b1
    # 34sbh minus nothing: flash saves Q, K, V, O and an fp32 log-sum-exp of 4*a*s*b bytes
    sbh = s.seq * s.batch * s.hidden
    assert b1 == 34 * sbh + 4 * s.heads * s.seq * s.batch + 16 * s.seq * s.batch
    eager = build(s.replace(attention="eager"))
    assert layer_saved_bytes(eager, 3) - b1 == 5 * s.heads * s.seq**2 * s.batch - 4 * s.heads * s.seq * s.batch


def test_eager_without_dropout_saves_only_softmax():
    s = load("gpt2", attention="eager", dropout=0.0, seq=128, batch=2)
    g = build(s)
    sbh = s.seq * s.batch * s.hidden
    assert not any(t.kind == "mask" for t in g.tensors)
    assert layer_saved_bytes(g, 1) == 32 * sbh + 2 * s.heads * s.seq**2 * s.batch + 16 * s.seq * s.batch


def test_llama_layer_bytes():
    s = load("llama-7b", seq=512, batch=1)
    g = build(s)
    sb, h, f, a = s.seq * s.batch, s.hidden, s.ffn, s.heads
    # norm outs 2+2, q_rot k_rot v 6, O 2, residuals 2+2 (x sbh); gate, up, swiglu 3 x 2*f*sb;
    # fp32: lse 4*a*sb, RMSNorm rstd 2 x 4*sb. RoPE's pre-rotation q, k are not saved.
    assert layer_saved_bytes(g, 1) == 16 * sb * h + 6 * f * sb + 4 * a * sb + 8 * sb
    assert not any(op.saves for op in g.ops if op.name.endswith(".rope"))


@pytest.mark.parametrize("name", ["bert-large", "llama-7b"])
def test_tensor_parallel_halves_sharded_activations(name):
    s = load(name, attention="eager")
    g1, g2 = build(s), build(s.replace(tensor_parallel=2))
    sbh, sb = s.seq * s.batch * s.hidden, s.seq * s.batch
    if name == "bert-large":  # Korthikanti eq. 2 with t = 2, exactly (+ replicated LN stats)
        assert layer_saved_bytes(g2, 2) == korthikanti(s.replace(tensor_parallel=2)) + 16 * sb
        assert layer_saved_bytes(g1, 2) - layer_saved_bytes(g2, 2) == 12 * sbh + 5 * s.heads * s.seq**2 * s.batch // 2
    names = {t.name: t.bytes for t in g1.tensors}
    for t in g2.tensors:
        if t.name.startswith("L2.") and t.producer is not None:
            sharded = any(k in t.name for k in (".q", ".k", ".v", ".attn.", ".fc1", ".gelu",
                                                ".gate", ".up", ".swiglu")) \
                and not any(k in t.name for k in (".attn.proj", ".attn.residual", ".attn.norm"))
            assert t.bytes * (2 if sharded else 1) == names[t.name], t.name
    assert sum(o.fwd_flops for o in g2.ops if o.kind in ("matmul", "attention") and o.layer == 2) \
        == pytest.approx(sum(o.fwd_flops for o in g1.ops if o.kind in ("matmul", "attention") and o.layer == 2) / 2)


# ---------------------------------------------------------------- FLOPs
@pytest.mark.parametrize("name", ["bert-large", "gpt2-xl", "llama-7b"])
@pytest.mark.parametrize("attention, attn_coeff", [("eager", 12), ("flash", 14)])
def test_training_flops_per_token(name, attention, attn_coeff):
    """fwd+bwd FLOPs per token within 1% of 6N + 12*L*h*s (dense attention counting); flash
    recomputes QK^T in its backward (2.5x forward), hence 14*L*h*s."""
    s = load(name, attention=attention)
    g = build(s)
    bd = s.param_breakdown()
    # N = parameters that take part in matmuls: blocks + head (+ the tied word embedding used by
    # the LM/MLM decoder); lookup tables (input embeddings, positions, token types) do no matmul.
    n = bd["blocks"] + bd["final_norm"] + bd["head"] + (s.vocab * s.hidden if s.tied_embeddings else 0)
    per_token = sum(op.fwd_flops + op.bwd_flops for op in g.ops) / s.tokens
    assert per_token == pytest.approx(6 * n + attn_coeff * s.layers * s.hidden * s.seq, rel=0.01)


def test_matmul_backward_is_twice_forward():
    g = build("tiny", attention="eager")
    for op in g.ops:
        if op.kind == "matmul" or (op.kind == "attention" and g.spec.attention == "eager"):
            assert op.bwd_flops == 2 * op.fwd_flops
    f = build("tiny")
    (attn,) = [op for op in f.ops if op.kind == "attention" and op.layer == 0]
    assert attn.bwd_flops == 2.5 * attn.fwd_flops


def test_llama_is_32_identical_blocks():
    """Llama-7B builds one block per layer, all alike (ops, FLOPs, saved bytes); its build time is
    measured by ``benchmarks/bench_core.py``, not asserted here."""
    s = load("llama-7b")
    g = build(s)
    blocks = {}
    for op in g.ops:
        if op.layer is not None:
            blocks.setdefault(op.layer, []).append(
                (op.kind, op.fwd_flops, op.bwd_flops, tuple(g.tensors[t].bytes for t in op.outputs)))
    assert sorted(blocks) == list(range(s.layers)) == list(range(32))
    assert all(b == blocks[0] for b in blocks.values())
    assert [k for k, *_ in blocks[0]].count("matmul") == 5  # fused qkv, o, gate, up, down


# ---------------------------------------------------------------- bad input
def test_unknown_model_lists_known_names():
    with pytest.raises(UnknownNameError) as ei:
        load("gpt5")
    msg = str(ei.value)
    assert "gpt5" in msg and all(n in msg for n in PRESETS)
    with pytest.raises(UnknownNameError):
        build("gpt5")


@pytest.mark.parametrize("overrides, field", [
    (dict(layers=0), "layers"),
    (dict(hidden=-64), "hidden"),
    (dict(batch=0), "batch"),
    (dict(seq=2.5), "seq"),
    (dict(heads=True), "heads"),
    (dict(seq=32), "seq"),  # > max_positions = 16
    (dict(dtype="int8"), "dtype"),
    (dict(family="t5"), "family"),
    (dict(norm="batchnorm"), "norm"),
    (dict(activation="relu"), "activation"),
    (dict(attention="sparse"), "attention"),
    (dict(position="alibi"), "position"),
    (dict(head="cls"), "head"),
    (dict(dropout=1.0), "dropout"),
    (dict(dropout=-0.1), "dropout"),
    (dict(hidden=66), "hidden"),  # not divisible by heads
    (dict(kv_heads=3), "kv_heads"),
    (dict(tensor_parallel=3), "tensor_parallel"),
    (dict(tensor_parallel=0), "tensor_parallel"),
    (dict(causal="yes"), "causal"),
    (dict(pooler=True), "pooler"),  # only BERT
    (dict(type_vocab=2), "type_vocab"),
    (dict(flavour="x"), "flavour"),  # unknown override
])
def test_bad_overrides_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as ei:
        load("tiny", **overrides)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, SlackSwapError)
    assert str(ei.value).startswith(field + ":"), str(ei.value)


def test_unknown_override_lists_allowed_fields():
    with pytest.raises(ConfigError, match="allowed: .*kv_heads"):
        load("tiny").replace(hidden_size=64)


def _preset_text(name="tiny") -> str:
    return (models_dir() / f"{name}.toml").read_text()


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace("layers = 2\n", "layers = 2\nlayer_count = 3\n"), "layer_count"),
    (lambda t: t.replace("ffn = 256\n", ""), "ffn"),
    (lambda t: t.replace("hidden = 64\n", "hidden = 0\n"), "hidden"),
    (lambda t: t.replace('norm = "layernorm"\n', 'norm = "groupnorm"\n'), "norm"),
    (lambda t: t.replace('\nvocab = "test model"\n', "\n"), "sources.vocab"),
    (lambda t: t + 'width = "x"\n', "sources.width"),
    (lambda t: t.split("[sources]")[0], "sources"),
    (lambda t: t.replace("seq = 16\n", "seq = 17\n"), "seq"),
])
def test_bad_toml_names_the_key(tmp_path, edit, field):
    p = tmp_path / "bad.toml"
    p.write_text(edit(_preset_text()))
    with pytest.raises(ConfigError) as ei:
        load_file(p)
    assert str(ei.value).startswith(f"bad.toml: {field}:"), str(ei.value)


def test_invalid_toml_syntax(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("layers = = 2")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_file(p)


def test_build_rejects_other_types():
    with pytest.raises(ConfigError, match="model:"):
        build(42)


# ---------------------------------------------------------------- HuggingFace configs
@pytest.mark.parametrize("fixture, preset", [
    ("bert-large.json", "bert-large"), ("gpt2-xl.json", "gpt2-xl"), ("llama-7b.json", "llama-7b"),
])
def test_hf_config_round_trip(fixture, preset):
    s = from_hf_config(HF / fixture)
    p = load(preset)
    assert s.param_count() == p.param_count()
    assert s.param_breakdown() == p.param_breakdown()
    same = ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "max_positions",
            "norm", "activation", "dropout", "causal", "tied_embeddings", "position", "type_vocab",
            "pooler", "head")
    assert {f: getattr(s, f) for f in same} == {f: getattr(p, f) for f in same}
    assert s.seq == p.max_positions and s.batch == 1 and s.name == Path(fixture).stem
    g = build(HF / fixture, batch=2, seq=128)  # build() accepts a config.json path
    assert g.spec.batch == 2 and g.spec.seq == 128


def test_hf_gqa_and_model_variants(tmp_path):
    s = from_hf_config(HF / "mistral-7b.json", seq=4096)
    assert s.kv_heads == 8 and s.param_count() == 7_241_732_096
    g = build(s.replace(batch=1, seq=1024))
    (k,) = [t for t in g.tensors if t.name == "L0.k"]
    assert k.bytes == 1024 * 8 * 128 * 2
    cfg = json.loads((HF / "bert-large.json").read_text())
    cfg["architectures"] = ["BertForMaskedLM"]  # no pooler (add_pooling_layer=False)
    assert from_hf_config(cfg).param_count(include_head=False) == 335_141_888 - 1024 * 1025
    d = tmp_path / "gpt2-xl"
    d.mkdir()
    (d / "config.json").write_text((HF / "gpt2-xl.json").read_text())
    assert from_hf_config(d).name == "gpt2-xl"  # a folder holding config.json


@pytest.mark.parametrize("edit, field", [
    (lambda c: c.update(model_type="t5"), "model_type"),
    (lambda c: c.pop("n_embd"), "n_embd"),
    (lambda c: c.pop("n_layer"), "n_layer"),
    (lambda c: c.update(n_head=7), "n_head"),   # the config's own key: "n_head: must divide n_embd (1600)"
])
def test_hf_bad_configs(edit, field):
    cfg = json.loads((HF / "gpt2-xl.json").read_text())
    edit(cfg)
    with pytest.raises(ConfigError) as ei:
        from_hf_config(cfg)
    assert str(ei.value).startswith(field + ":"), str(ei.value)
    with pytest.raises(ConfigError, match="bogus"):
        from_hf_config(HF / "gpt2-xl.json", bogus=1)
    with pytest.raises(ConfigError, match="config.json"):
        from_hf_config(HF / "missing.json")


def test_models_namespace():
    assert set(models.__all__) == {"TransformerSpec", "build", "load", "available", "from_hf_config", "spec",
                                   "Parallel", "as_parallel"}
