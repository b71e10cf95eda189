"""One clear error for every bad input (docs/errors.md): a table of malformed inputs across every
file format and API entry point. Each row gives the error class and the text the one-line message
must hold: for a file, ``<file>: <field.path>: <what was expected>``."""

from __future__ import annotations

import json
import math

import pytest
from test_hardware import GOOD as HW

from slackswap import Problem, experiments, models, planners, report
from slackswap.core import hardware, profile
from slackswap.core.errors import (
    BudgetError,
    ConfigError,
    ParameterError,
    PlanError,
    UnknownNameError,
)
from slackswap.core.hardware import load_link
from slackswap.core.plan import Plan
from slackswap.experiments.sweepfiles import load_sweep
from slackswap.models import from_hf_config
from slackswap.models.presets import load_file, models_dir
from slackswap.report.explore import Explorer
from slackswap.timeline import simulate

SWEEP = 'models = ["tiny"]\nbudgets = [0.5]\nplanners = ["slack"]\n'
MODEL = (models_dir() / "tiny.toml").read_text()
LINK = ('d2h_bandwidth = "25GB/s"\nh2d_bandwidth = "25GB/s"\ntheoretical_bandwidth = "30GB/s"\n'
        'latency = "10us"\nduplex_factor = 0.9\n')
PLAN = {"schema_version": 1, "decisions": {"1": "keep"}}
PROFILE = {"name": "t", "link": {"d2h_bandwidth": "10GB/s", "h2d_bandwidth": "5GB/s"},
           "ops": [{"name": "mm", "fwd_ms": 1.0, "bwd_ms": 2.0}, {"name": "ew", "fwd_ms": 0.5, "bwd_ms": 0.5}],
           "tensors": [{"name": "a", "bytes": "2MB", "d2h_ms": 0.3}]}
HF_DIR = __import__("pathlib").Path(__file__).parent / "data" / "hf"
GPT2 = json.loads((HF_DIR / "gpt2-xl.json").read_text())
BERT = json.loads((HF_DIR / "bert-large.json").read_text())
FILES = {"sweep": "sweep.toml", "model": "model.toml", "hw": "hw.toml", "link": "link.toml",
         "plan": "plan.json", "profile": "profile.json", "csv": "profile.csv", "hf": "config.json"}


def sw(text):        # a sweep file: the valid base plus or with lines replaced
    return text if "models" in text or "budgets" in text else SWEEP + text


def sw_without(key, extra=""):
    return "".join(line + "\n" for line in SWEEP.splitlines() if not line.startswith(key)) + extra


def md(old, new):    # the tiny preset with one edit
    assert old in MODEL
    return MODEL.replace(old, new, 1)


def hw(old, new):
    assert old in HW
    return HW.replace(old, new, 1)


def lk(old, new):
    assert old in LINK
    return LINK.replace(old, new, 1)


def with_(base, **changes):
    return {**base, **changes}


def op0(**changes):
    ops = [dict(PROFILE["ops"][0], **changes)] + PROFILE["ops"][1:]
    return with_(PROFILE, ops=[{k: v for k, v in o.items() if v is not ...} for o in ops])


def without(base, key):
    return {k: v for k, v in base.items() if k != key}


ROWS = [
    # ---- sweep TOML
    ("sweep", "models = [\"tiny\"]\nplanners = [\"slack\"]\nbudgets = {start = 0.3, stop = 0.5, step = 0}\n",
     ConfigError, "sweep.toml: budgets.step: must be > 0; got 0"),
    ("sweep", sw("overrides = [5]\n"), ConfigError, "sweep.toml: overrides[0]: expected a table"),
    ("sweep", 'models = ["tiny"]\nbudgets = [0.5]\nplanners = 5\n', ConfigError,
     "sweep.toml: planners: expected a string or a list; got 5"),
    ("sweep", 'models = ["tiny"]\nbudgets = [0.5]\nvariants = [1, 2]\n', ConfigError,
     "sweep.toml: variants[0]: expected a table"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = ["nan"]\n', ConfigError,
     "sweep.toml: budgets[0]: expected a finite number"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = ["1e400"]\n', ConfigError,
     "sweep.toml: budgets[0]: expected a finite number"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = [true]\n', ConfigError,
     "sweep.toml: budgets[0]: expected a fraction in (0, 1]"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = []\n', ConfigError,
     "sweep.toml: budgets: must have at least 1 item"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = [1.5]\n', ConfigError,
     "sweep.toml: budgets[0]: a number > 1 is bytes and must be whole"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = {start = 0.5, stop = 0.3, step = 0.1}\n',
     ConfigError, "sweep.toml: budgets: stop (0.3) must be >= start (0.5)"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = {start = 0.3, stop = 0.5}\n', ConfigError,
     "sweep.toml: budgets.step: missing required key"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = {start = 0.3, stop = 0.5, step = 0.1, by = 1}\n',
     ConfigError, "sweep.toml: budgets.by: unknown key; allowed: start, step, stop"),
    ("sweep", 'models = ["tiny"]\nplanners = ["slack"]\nbudgets = {start = 0, stop = 0.5, step = 0.1}\n',
     ConfigError, "sweep.toml: budgets.start: must be > 0"),
    ("sweep", sw('workers = "2"\n'), ConfigError, "sweep.toml: workers: expected an integer; got '2'"),
    ("sweep", sw("workers = 0\n"), ConfigError, "sweep.toml: workers: must be >= 1; got 0"),
    ("sweep", sw("workers = true\n"), ConfigError, "sweep.toml: workers: expected an integer; got True"),
    ("sweep", sw_without("models", "models = []\n"), ConfigError, "sweep.toml: models: "),
    ("sweep", sw_without("models", "models = [5]\n"), ConfigError, "sweep.toml: models[0]: expected a string"),
    ("sweep", sw_without("models"), ConfigError, "sweep.toml: models: missing required key"),
    ("sweep", sw('bound = "yes"\n'), ConfigError, "sweep.toml: bound: expected true or false"),
    ("sweep", sw("hardware = 5\n"), ConfigError, "sweep.toml: hardware: expected a string or a list"),
    ("sweep", sw("planner_params = { slack = 5 }\n"), ConfigError,
     "sweep.toml: planner_params.slack: expected a table"),
    ("sweep", sw_without("planners", 'planners = ["nope"]\n'), ConfigError,
     "sweep.toml: planner 'nope': unknown planner 'nope'; known: "),
    ("sweep", sw('planner_params = { slack = { order = "x" } }\n'), ConfigError,
     "sweep.toml: planner 'slack': slack: order: must be one of"),
    ("sweep", sw_without("planners", '[[variants]]\nlabel = "a"\nplanner = "milp"\nparams = { allow_swap = "no" }\n'),
     ConfigError, "sweep.toml: planner 'a': milp: allow_swap: expected true or false; got 'no'"),
    ("sweep", sw_without("planners", '[[variants]]\nplanner = "slack"\n'), ConfigError,
     "sweep.toml: variants[0].label: missing required key"),
    ("sweep", sw_without("planners", '[[variants]]\nlabel = "a"\nplanner = "slack"\nparam = {}\n'), ConfigError,
     "sweep.toml: variants[0].param: unknown key; allowed: label, params, planner"),
    ("sweep", sw("budjet = 3\n"), ConfigError, "sweep.toml: budjet: unknown key; allowed: bound, budgets"),
    ("sweep", sw("name = 5\n"), ConfigError, "sweep.toml: name: expected a string"),
    ("sweep", sw('by = ""\n'), ConfigError, "sweep.toml: by: must not be empty"),
    ("sweep", sw("links = 5\n"), ConfigError, "sweep.toml: links: expected a string or a list"),
    ("sweep", sw('overrides = "eager"\n'), ConfigError, "sweep.toml: overrides: expected a table"),
    ("sweep", sw("description = 1\n"), ConfigError, "sweep.toml: description: expected a string"),
    ("sweep", sw_without("planners", "planners = []\n"), ConfigError, "sweep.toml: no planner to run: give planners"),
    ("sweep", sw('planner_params = { slack = {} }\n[[variants]]\nlabel = "a"\nplanner = "slack"\n'), ConfigError,
     "sweep.toml: give planner_params or variants, not both"),
    ("sweep", "models = = 1\n", ConfigError, "sweep.toml: not valid TOML"),
    # ---- model TOML
    ("model", md("layers = 2\n", 'layers = "2"\n'), ConfigError, "model.toml: layers: expected an integer; got '2'"),
    ("model", md("layers = 2\n", "layers = 0\n"), ConfigError, "model.toml: layers: must be >= 1; got 0"),
    ("model", md("layers = 2\n", "layers = 2.0\n"), ConfigError, "model.toml: layers: expected an integer; got 2.0"),
    ("model", md("causal = true\n", 'causal = "false"\n'), ConfigError,
     "model.toml: causal: expected true or false; got 'false'"),
    ("model", md("causal = true\n", "causal = 1\n"), ConfigError, "model.toml: causal: expected true or false; got 1"),
    ("model", md("dropout = 0.0\n", "dropout = true\n"), ConfigError, "model.toml: dropout: expected a number; got True"),
    ("model", md("dropout = 0.0\n", "dropout = 1.0\n"), ConfigError, "model.toml: dropout: must be < 1; got 1.0"),
    ("model", md('family = "gpt2"\n', 'family = "t5"\n'), ConfigError, "model.toml: family: must be one of 'bert'"),
    ("model", md('dtype = "bf16"\n', 'dtype = "bf8"\n'), ConfigError, "model.toml: dtype: must be one of 'bf16'"),
    ("model", md("layers = 2\n", "layers = 2\nlayer_count = 3\n"), ConfigError,
     "model.toml: layer_count: unknown key; allowed: activation"),
    ("model", md("ffn = 256\n", ""), ConfigError, "model.toml: ffn: missing required key"),
    ("model", MODEL.split("[sources]")[0], ConfigError, "model.toml: sources: missing required key"),
    ("model", md('\nvocab = "test model"\n', "\n"), ConfigError, "model.toml: sources.vocab: missing required key"),
    ("model", md('\nvocab = "test model"\n', '\nvocab = ""\n'), ConfigError, "model.toml: sources.vocab: must not be empty"),
    ("model", md("heads = 4\nkv_heads = 4\n", "heads = 3\nkv_heads = 3\n"), ConfigError,
     "model.toml: hidden: must be divisible by heads (3); got 64"),
    ("model", md("seq = 16\n", "seq = 17\n"), ConfigError, "model.toml: seq: must be <= max_positions (16); got 17"),
    ("model", md("tensor_parallel = 1\n", "tensor_parallel = 3\n"), ConfigError, "model.toml: tensor_parallel: must divide"),
    ("model", md('name = "tiny"\n', 'name = ""\n'), ConfigError, "model.toml: name: must not be empty"),
    ("model", "layers = = 2\n", ConfigError, "model.toml: invalid TOML"),
    # ---- hardware TOML
    ("hw", hw("matmul = 0.5", 'matmul = "a"'), ConfigError,
     "hw.toml: gpu.efficiency.matmul: expected a number or a table (key = value); got 'a'"),
    ("hw", hw("matmul = 0.5", "matmul = 1.5"), ConfigError, "hw.toml: gpu.efficiency.matmul: must be <= 1; got 1.5"),
    ("hw", hw("matmul = 0.5", "matmul = true"), ConfigError, "hw.toml: gpu.efficiency.matmul: expected a number"),
    ("hw", hw("matmul = 0.5", "matmul = { flops = [1], value = [0.5, 0.6] }"), ConfigError,
     "hw.toml: gpu.efficiency.matmul: flops and value: must be lists of equal length"),
    ("hw", hw("matmul = 0.5", "matmul = { flops = [1e9], value = ['x'] }"), ConfigError,
     "hw.toml: gpu.efficiency.matmul.value[0]: expected a number; got 'x'"),
    ("hw", hw("matmul = 0.5", "matmul = { flops = [1e9, 1e8], value = [0.5, 0.6] }"), ConfigError,
     "hw.toml: gpu.efficiency.matmul: flops: sizes must be > 0 and strictly increasing"),
    ("hw", hw("matmul = 0.5", "matmul = { bytes = [1], value = [0.5] }"), ConfigError,
     "hw.toml: gpu.efficiency.matmul.bytes: unknown key; allowed: flops, value"),
    ("hw", hw('memory = "16GiB"', "memory = 0"), ConfigError, "hw.toml: gpu.memory: must be > 0; got 0"),
    ("hw", hw('memory = "16GiB"', 'memory = "16 potatoes"'), ConfigError,
     "hw.toml: gpu.memory: cannot read '16 potatoes' as a byte count"),
    ("hw", hw('memory = "16GiB"', "memory = true"), ConfigError, "hw.toml: gpu.memory: expected a byte count"),
    ("hw", hw('hbm_bandwidth = "1TB/s"', 'hbm_bandwidth = "1TB"'), ConfigError,
     "hw.toml: gpu.hbm_bandwidth: cannot read '1TB' as a bandwidth"),
    ("hw", hw('bf16 = "100TFLOP/s"', "bf16 = 0"), ConfigError, "hw.toml: gpu.peak.bf16: must be > 0"),
    ("hw", hw('bf16 = "100TFLOP/s"', 'bf16 = "fast"'), ConfigError, "hw.toml: gpu.peak.bf16: cannot read 'fast'"),
    ("hw", hw("[gpu.peak]", "[gpu.peak]\nint4 = 1"), ConfigError, "hw.toml: gpu.peak.int4: unknown key; allowed: bf16"),
    ("hw", hw('fp32 = "10TFLOP/s"\n', ""), ConfigError, "hw.toml: gpu.peak.fp32: missing required key"),
    ("hw", hw('link = "pcie4-x16"', "link = [1, 2]"), ConfigError, "hw.toml: link: expected a string or a table"),
    ("hw", hw('link = "pcie4-x16"\n', "") + '[link]\npreset = "pcie4-x16"\nlatency = "2s"\n', ConfigError,
     "hw.toml: link.latency: must be < 1; got '2s'"),
    ("hw", hw('link = "pcie4-x16"\n', "") + '[link]\npreset = "pcie4-x16"\nduplex_factor = "0.5"\n', ConfigError,
     "hw.toml: link.duplex_factor: expected a number; got '0.5'"),
    ("hw", hw('memory = "16GiB"', 'memory = "16GiB"\ncolour = "green"'), ConfigError,
     "hw.toml: gpu.colour: unknown key; allowed: efficiency, hbm_bandwidth, memory, name, p2p_bandwidth, peak"),
    ("hw", hw('memory = "16GiB"', 'memory = "16GiB"\np2p_bandwidth = "fast"'), ConfigError,
     "hw.toml: gpu.p2p_bandwidth: "),
    ("hw", hw('memory = "16GiB"', 'memory = "16GiB"\np2p_bandwidth = nan'), ConfigError,
     "hw.toml: gpu.p2p_bandwidth: "),
    ("hw", hw('memory = "16GiB"', 'memory = "16GiB"\np2p_bandwidth = 0'), ConfigError,
     "hw.toml: gpu.p2p_bandwidth: must be > 0"),
    ("hw", hw("[gpu.efficiency]", "[gpu.efficiency]\nconv = 0.5"), ConfigError, "hw.toml: gpu.efficiency.conv: unknown key"),
    ("hw", hw('memory = { bytes = ["1MB", "1GB"]', 'memory = { flops = ["1MB", "1GB"]'), ConfigError,
     "hw.toml: gpu.efficiency.memory.flops: unknown key; allowed: bytes, value"),
    ("hw", 'name = "x"\ngpu = 5\nlink = "pcie4-x16"\n', ConfigError, "hw.toml: gpu: expected a table"),
    ("hw", 'name = "x"\nlink = "pcie4-x16"\n', ConfigError, "hw.toml: gpu: missing required key"),
    ("hw", hw('link = "pcie4-x16"', 'link = "pcie99"'), UnknownNameError,
     "hw.toml: link: unknown link 'pcie99'; known: nvlink-c2c"),
    # ---- link TOML
    ("link", lk("duplex_factor = 0.9", "duplex_factor = 0"), ConfigError, "link.toml: duplex_factor: must be > 0; got 0"),
    ("link", lk("duplex_factor = 0.9", "duplex_factor = true"), ConfigError, "link.toml: duplex_factor: expected a number"),
    ("link", lk('latency = "10us"', 'latency = "10 parsecs"'), ConfigError, "link.toml: latency: cannot read '10 parsecs'"),
    ("link", lk('latency = "10us"', "latency = -1"), ConfigError, "link.toml: latency: a time must be finite and >= 0"),
    ("link", lk('d2h_bandwidth = "25GB/s"', "d2h_bandwidth = 0"), ConfigError, "link.toml: d2h_bandwidth: must be > 0"),
    ("link", lk('h2d_bandwidth = "25GB/s"\n', ""), ConfigError, "link.toml: h2d_bandwidth: missing required key"),
    ("link", LINK + "speed = 3\n", ConfigError, "link.toml: speed: unknown key; allowed: d2h_bandwidth"),
    ("link", LINK + "sources = 5\n", ConfigError, "link.toml: sources: expected a table"),
    # ---- plan JSON
    ("plan", [1], PlanError, "plan.json: expected a table"),
    ("plan", without(PLAN, "schema_version"), PlanError, "plan.json: schema_version: missing required key"),
    ("plan", with_(PLAN, schema_version="1"), PlanError, "plan.json: schema_version: must be one of 1; got '1'"),
    ("plan", with_(PLAN, schema_version=99), PlanError, "plan.json: schema_version: must be one of 1; got 99"),
    ("plan", with_(PLAN, decisions=[]), PlanError, "plan.json: decisions: expected a table"),
    ("plan", with_(PLAN, decisions={"1": "drop"}), PlanError, "plan.json: decisions[1]: must be one of 'keep', 'swap'"),
    ("plan", with_(PLAN, decisions={"x": "keep"}), PlanError, "plan.json: decisions.x: expected an integer; got 'x'"),
    ("plan", with_(PLAN, decisions={"1": True}), PlanError, "plan.json: decisions[1]: must be one of 'keep'"),
    ("plan", with_(PLAN, issue_points={"1": -1}), PlanError, "plan.json: issue_points[1]: must be >= 0; got -1"),
    ("plan", with_(PLAN, issue_points={"1": "2"}), PlanError, "plan.json: issue_points[1]: expected an integer; got '2'"),
    ("plan", with_(PLAN, d2h_order="1,2"), PlanError, "plan.json: d2h_order: expected a list"),
    ("plan", with_(PLAN, info={"status": "GOOD"}), PlanError, "plan.json: info.status: must be one of 'OPTIMAL'"),
    ("plan", with_(PLAN, info={"wall_s": -1}), PlanError, "plan.json: info.wall_s: must be >= 0; got -1"),
    ("plan", with_(PLAN, colour=3), PlanError, "plan.json: colour: unknown key; allowed: d2h_order"),
    ("plan", with_(PLAN, planner=5), PlanError, "plan.json: planner: expected a string; got 5"),
    # ---- profile JSON and CSV
    ("profile", with_(PROFILE, ops=[]), ConfigError, "profile.json: ops: must have at least 1 item"),
    ("profile", op0(fwd_ms=-1), ConfigError, "profile.json: ops[0].fwd_ms: must be >= 0; got -1"),
    ("profile", op0(bwd_ms="2"), ConfigError, "profile.json: ops[0].bwd_ms: expected a number; got '2'"),
    ("profile", op0(fwd_ms=True), ConfigError, "profile.json: ops[0].fwd_ms: expected a number; got True"),
    ("profile", op0(bwd_ms=...), ConfigError, "profile.json: ops[0].bwd_ms: missing required key"),
    ("profile", op0(speed=3), ConfigError, "profile.json: ops[0].speed: unknown key; allowed: bwd_bytes"),
    ("profile", op0(layer=1.5), ConfigError, "profile.json: ops[0].layer: expected an integer; got 1.5"),
    ("profile", with_(PROFILE, ops=PROFILE["ops"] * 2), ConfigError, "profile.json: ops[2].name: duplicate name 'mm'"),
    ("profile", with_(PROFILE, tensors=[{"name": "a", "bytes": "2 potatoes"}]), ConfigError,
     "profile.json: tensors[0].bytes: cannot read '2 potatoes' as a byte count"),
    ("profile", with_(PROFILE, tensors=[{"name": "a", "swappable": "yes"}]), ConfigError,
     "profile.json: tensors[0].swappable: expected true or false; got 'yes'"),
    ("profile", with_(PROFILE, tensors=[{"name": "a", "h2d_ms": -0.1}]), ConfigError,
     "profile.json: tensors[0].h2d_ms: must be >= 0"),
    ("profile", with_(PROFILE, duplex_factor=2), ConfigError, "profile.json: duplex_factor: must be <= 1; got 2"),
    ("profile", with_(PROFILE, format="other/9"), ConfigError, "profile.json: format: must be one of 'slackswap-profile/1'"),
    ("profile", with_(PROFILE, link={"d2h_bandwidth": "10GB/s"}), ConfigError,
     "profile.json: link: h2d_bandwidth: missing required key"),
    ("profile", with_(PROFILE, optimizer_ms="1"), ConfigError, "profile.json: optimizer_ms: expected a number; got '1'"),
    ("profile", with_(PROFILE, static_bytes=-1), ConfigError, "profile.json: static_bytes: a byte count must be finite"),
    ("profile", with_(PROFILE, name=""), ConfigError, "profile.json: name: must not be empty"),
    ("profile", with_(PROFILE, link=5), ConfigError, "profile.json: link: expected a string or a table"),
    ("csv", "name,fwd_ms,bwd_ms\nmm,fast,2\n", ConfigError, "profile.csv: row 2: fwd_ms: "),
    ("csv", "name,fwd_ms,bwd_ms,colour\nmm,1,2,red\n", ConfigError, "profile.csv: row 2: colour: unknown key"),
    ("csv", "name,fwd_ms,bwd_ms\nmm,1,-2\n", ConfigError, "profile.csv: row 2: bwd_ms: must be >= 0"),
    ("csv", "name,fwd_ms,bwd_ms\nmm,1,nan\n", ConfigError, "profile.csv: row 2: bwd_ms: expected a finite number"),
    # ---- HuggingFace config.json
    ("hf", with_(GPT2, tie_word_embeddings="false"), ConfigError,
     "config.json: tie_word_embeddings: expected true or false; got 'false'"),
    ("hf", with_(BERT, architectures="BertForPreTraining"), ConfigError,
     "config.json: architectures: expected a list; got 'BertForPreTraining'"),
    ("hf", with_(GPT2, n_layer="48"), ConfigError, "config.json: n_layer: expected an integer; got '48'"),
    ("hf", with_(GPT2, n_layer=0), ConfigError, "config.json: n_layer: must be >= 1; got 0"),
    ("hf", with_(GPT2, n_layer=48.0), ConfigError, "config.json: n_layer: expected an integer; got 48.0"),
    ("hf", without(GPT2, "n_layer"), ConfigError, "config.json: n_layer: missing required key"),
    ("hf", with_(GPT2, model_type="t5"), ConfigError, "config.json: model_type: must be one of 'bert'"),
    ("hf", with_(GPT2, attn_implementation="flex"), ConfigError, "config.json: attn_implementation: must be one of"),
    ("hf", with_(GPT2, resid_pdrop=1.5), ConfigError, "config.json: resid_pdrop: must be < 1; got 1.5"),
    ("hf", with_(GPT2, n_inner=True), ConfigError, "config.json: n_inner: expected an integer; got True"),
    ("hf", with_(BERT, num_attention_heads="16"), ConfigError, "config.json: num_attention_heads: expected an integer"),
    ("hf", with_(BERT, type_vocab_size=-1), ConfigError, "config.json: type_vocab_size: must be >= 0"),
    ("hf", [1], ConfigError, "config.json: expected a table"),
    # ---- planner parameters
    ("planner", ("milp", {"allow_swap": "no"}), ParameterError, "milp: allow_swap: expected true or false; got 'no'"),
    ("planner", ("brute", {"allow_swap": "x"}), ParameterError, "brute: allow_swap: expected true or false; got 'x'"),
    ("planner", ("milp", {"max_tree_nodes": -5}), ParameterError, "milp: max_tree_nodes: must be >= 1; got -5"),
    ("planner", ("milp", {"time_limit_s": "ten"}), ParameterError,
     "milp: time_limit_s: expected a finite number of seconds >= 2; got 'ten'"),
    ("planner", ("milp", {"time_limit_s": math.inf}), ParameterError, "milp: time_limit_s: expected a finite number"),
    ("planner", ("milp", {"time_limit_s": True}), ParameterError,
     "milp: time_limit_s: expected a finite number of seconds >= 2; got True"),
    ("planner", ("milp", {"mip_rel_gap": 1}), ParameterError, "milp: mip_rel_gap: must be < 1; got 1"),
    ("planner", ("milp", {"solver": "gurobi"}), ParameterError, "milp: solver: must be one of 'highs', 'cbc', 'cvxpy', 'scip' or 'cpsat'"),
    ("planner", ("milp", {"presolve": 1}), ParameterError, "milp: presolve: must be True, False or 'auto'; got 1"),
    ("planner", ("milp", {"threads": 0}), ParameterError, "milp: threads: must be >= 1; got 0"),
    ("planner", ("milp", {"bogus": 1}), ParameterError, "milp: bogus: unknown parameter; allowed: solver"),
    ("planner", ("slack", {"order": "random"}), ParameterError, "slack: order: must be one of 'rebuild_per_byte'"),
    ("planner", ("slack", {"keep_tail": 1}), ParameterError, "slack: keep_tail: expected true or false; got 1"),
    ("planner", ("slack", {"max_sims": 0}), ParameterError, "slack: max_sims: must be >= 1; got 0"),
    ("planner", ("slack", {"min_swap_bytes": 1.5}), ParameterError, "slack: min_swap_bytes: expected an integer"),
    ("planner", ("swap-all", {"min_swap_bytes": -1}), ParameterError, "swap-all: min_swap_bytes: must be >= 0; got -1"),
    ("planner", ("capuchin", {"min_swap_bytes": "1MiB"}), ParameterError, "capuchin: min_swap_bytes: expected an integer"),
    ("planner", ("dp-checkpoint", {"max_rounds": True}), ParameterError, "dp-checkpoint: max_rounds: expected an integer"),
    ("planner", ("brute", {"max_tensors": -1}), ParameterError, "brute: max_tensors: must be >= 0; got -1"),
    ("planner", ("keep-all", {"foo": 1}), ParameterError, "keep-all: foo: unknown parameter; allowed: none"),
    ("planner", ("nope", {}), UnknownNameError, "unknown planner 'nope'; known: brute"),
    ("planner", (5, {}), ParameterError, "planner: expected a planner name (a string); got 5"),
]


def _api(problem):
    """Python API calls with wrong argument types or values: ``(call, error, text)``."""
    plan = planners.get("keep-all").plan(problem)
    result = simulate(problem, plan)
    keep = {t: "keep" for t in problem.planning_ids}
    a100 = hardware.load("a100-80gb")
    changed = planners.get("milp")
    changed.allow_swap = "no"    # a parameter changed on the object is checked when it plans
    ex = Explorer("tiny", "a100-80gb", budget=0.5, planner="slack")
    return [
        (lambda: ex.update(budget=math.nan), BudgetError, "Explorer.update(budget): must be a fraction of the "
         "keep-all activation peak in [0.1, 1]; got nan"),
        (lambda: ex.update(budget=-0.2), BudgetError, "in [0.1, 1]; got -0.2"),
        (lambda: ex.update(budget="half"), BudgetError, "Explorer.update(budget): must be a fraction"),
        (lambda: ex.update(planner="milp"), ParameterError, "Explorer.update(planner): must be one of 'capuchin'"),
        (lambda: ex.update(model="gpt5"), ParameterError, "Explorer.update(model): must be one of 'bert-large'"),
        (lambda: ex.update(hardware=5), ParameterError, "Explorer.update(hardware): must be one of 'a100-40gb'"),
        (lambda: changed.plan(problem), ParameterError, "milp: allow_swap: expected true or false; got 'no'"),
        (lambda: Problem.build("tiny", 5), ParameterError, "Problem.build(hardware): expected a hardware preset name"),
        (lambda: Problem.build(5), ParameterError, "Problem.build(model): expected a model preset name"),
        (lambda: Problem.build("tiny", cost_mode=1), ParameterError, "Problem.build(cost_mode): expected"),
        (lambda: planners.get("slack").plan("gpt2-xl"), ParameterError, "slack.plan(problem): expected a Problem"),
        (lambda: planners.get("milp").plan(problem.graph), ParameterError, "milp.plan(problem): expected a Problem"),
        (lambda: planners.get("keep-all").plan(None), ParameterError, "keep-all.plan(problem): expected a Problem"),
        (lambda: Problem.build("tiny", budget="nan"), BudgetError, "budget: expected a finite number"),
        (lambda: Problem.build("tiny", budget="1e400"), BudgetError, "budget: expected a finite number"),
        (lambda: Problem.build("tiny", budget=True), BudgetError, "budget: expected a fraction in (0, 1]"),
        (lambda: Problem.build("tiny", budget=1.5), BudgetError, "budget: a number > 1 is bytes and must be whole"),
        (lambda: Problem.build("tiny", budget=math.nan), BudgetError, "budget: expected a finite number"),
        (lambda: Problem.build("tiny", budget=-1), BudgetError, "budget: bytes must be > 0"),
        (lambda: Problem.build("tiny", budget=[0.5]), BudgetError, "budget: expected a fraction in (0, 1]"),
        (lambda: Problem.build("tiny", budget="24 potatoes"), BudgetError, "budget: cannot read '24 potatoes'"),
        (lambda: problem.with_budget("nan"), BudgetError, "budget: expected a finite number"),
        (lambda: simulate(problem, "not a plan"), PlanError, "plan: expected a Plan"),
        (lambda: simulate(problem, keep), PlanError, "plan: expected a Plan"),
        (lambda: simulate("tiny", plan), PlanError, "problem: expected a Problem"),
        (lambda: simulate(problem, Plan({})), PlanError, "plan.decisions: 30 planning tensors have no decision"),
        (lambda: simulate(problem, Plan({**keep, 10**6: "keep"})), PlanError,
         "plan.decisions: tensors [1000000] are not planning tensors"),
        (lambda: simulate(problem, Plan(keep, problem_key="0123")), PlanError, "plan: made for another problem"),
        (lambda: Plan("keep"), PlanError, "Plan(decisions): expected a dict"),
        (lambda: Plan({"a": "keep"}), PlanError, "Plan.decisions['a']: expected an integer tensor id"),
        (lambda: Plan({1: "drop"}), PlanError, "Plan.decisions[1]: unknown decision 'drop'"),
        (lambda: Plan({1.5: "keep"}), PlanError, "Plan.decisions[1.5]: expected an integer tensor id"),
        (lambda: Plan({1: "keep"}, issue_points={1: "x"}), PlanError, "Plan.issue_points[1]: expected an integer"),
        (lambda: Plan({1: "keep"}, d2h_order=5), PlanError, "Plan(d2h_order): expected a list of tensor ids"),
        (lambda: report.timeline_figure(problem, result), ParameterError,
         "timeline_figure(result): expected a SimResult"),
        (lambda: report.memory_figure(result, "tiny"), ParameterError, "memory_figure(problem): expected a Problem"),
        (lambda: models.build(42), ConfigError, "model: expected a preset name"),
        (lambda: models.load("tiny", layers="2"), ConfigError, "layers: expected an integer; got '2'"),
        (lambda: models.load("tiny", causal="false"), ConfigError, "causal: expected true or false; got 'false'"),
        (lambda: models.load("tiny", hidden_size=64), ConfigError, "hidden_size: unknown TransformerSpec field"),
        (lambda: models.build("tiny", name=""), ConfigError, "name: must not be empty"),
        (lambda: a100.with_link(duplex_factor=1.5), ConfigError, "with_link: duplex_factor: must be <= 1; got 1.5"),
        (lambda: a100.with_link(bandwidth="fast"), ConfigError, "with_link: d2h_bandwidth: cannot read 'fast'"),
        (lambda: a100.with_link(warp_speed=2), ConfigError, "with_link: unknown field 'warp_speed'"),
        (lambda: from_hf_config(5), ConfigError, "from_hf_config(path): expected a config.json path"),
        (lambda: from_hf_config(dict(GPT2, tie_word_embeddings="false")), ConfigError,
         "tie_word_embeddings: expected true or false"),
        (lambda: hardware.load(5), ConfigError, "hardware: expected a name or a .toml path"),
        (lambda: hardware.load("a100-80gb", link="pcie99"), UnknownNameError, "unknown link 'pcie99'"),
        (lambda: experiments.grid("tiny", "a100-80gb", 0.5, 5), ConfigError, "planners: expected a planner name"),
        (lambda: experiments.grid("tiny", "a100-80gb", 0.5, [5]), ConfigError, "planners[0]: expected a planner name"),
        (lambda: experiments.grid("tiny", "a100-80gb", 0.5, "slack", overrides=[5]), ConfigError,
         "overrides[0]: expected a dict of TransformerSpec fields; got 5"),
        (lambda: experiments.grid("tiny", "a100-80gb", 0.5, "slack", planner_params={"slack": 5}), ConfigError,
         "planner_params['slack']: expected a dict of parameters"),
    ]


def _read(kind, payload, tmp_path):
    path = tmp_path / FILES[kind]
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return {"sweep": load_sweep, "model": load_file, "hw": hardware.load, "link": load_link,
            "plan": Plan.load, "profile": profile.read, "csv": profile.read, "hf": from_hf_config}[kind](path)


@pytest.mark.parametrize("kind, payload, exc, text", ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_malformed_input_gets_one_clear_error(tmp_path, kind, payload, exc, text):
    with pytest.raises(exc) as ei:
        if kind == "planner":
            planners.get(payload[0], **payload[1])
        else:
            _read(kind, payload, tmp_path)
    msg = str(ei.value)
    assert "\n" not in msg and text in msg, msg
    if kind in FILES:
        assert f"{FILES[kind]}: " in msg   # the file is named, then the field


@pytest.fixture(scope="module")
def tiny():
    return Problem.build("tiny")


def test_api_calls_with_wrong_arguments_get_one_clear_error(tiny):
    calls = _api(tiny)
    assert len(calls) >= 45
    for call, exc, text in calls:
        with pytest.raises(exc) as ei:
            call()
        msg = str(ei.value)
        assert "\n" not in msg and text in msg, msg


def test_the_table_covers_every_format_and_at_least_100_inputs(tiny):
    assert {r[0] for r in ROWS} == set(FILES) | {"planner"}
    assert len(ROWS) + len(_api(tiny)) >= 100


def test_what_used_to_be_read_wrong_is_now_refused_and_right_values_still_load(tmp_path):
    """The wrong answers of issue 13: a correct file still gives the published numbers."""
    tied = from_hf_config(GPT2).param_count()
    untied = from_hf_config(dict(GPT2, tie_word_embeddings=False)).param_count()
    assert untied == tied + GPT2["vocab_size"] * GPT2["n_embd"]      # the LM head is its own matrix
    assert from_hf_config(BERT).pooler is True
    p = tmp_path / "sweep.toml"
    p.write_text('models = ["tiny"]\nplanners = ["slack"]\nbudgets = {start = 0.3, stop = 0.5, step = 0.1}\n')
    assert load_sweep(p)["budgets"] == [0.3, 0.4, 0.5]
    assert planners.get("milp", allow_swap=False).allow_swap is False
