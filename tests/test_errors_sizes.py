"""Sizes (docs/errors.md, "Plan files, sweep files and outputs"): a graph whose byte counts would
leave exact integer arithmetic, a graph or profile of more ops than ``max_ops`` and a sweep of
more runs than ``max_runs`` are refused before any work, with one line naming the field and the
limit (and, for a count, the argument and option that raise it)."""

from __future__ import annotations

import pytest

from slackswap import Problem, experiments, models
from slackswap.cli import main
from slackswap.core import profile
from slackswap.core.errors import ConfigError, GraphError
from slackswap.core.graph import MAX_BYTES, Graph, Op, Tensor

LIMIT = "must be at most MAX_BYTES = 2**53 (9,007,199,254,740,992, where byte counts stop being exact)"


def chain(sizes, static=0, workspace=0):
    """A chain graph "g": input ``x`` then one op per further size, each saving its output."""
    ts = [Tensor(0, "x", sizes[0], None, kind="input")]
    ts += [Tensor(i, f"t{i}", b, i - 1) for i, b in enumerate(sizes[1:], 1)]
    ops = [Op(i - 1, f"f{i}", None, "elementwise", inputs=(i - 1,), outputs=(i,), saves=(i,),
              workspace_bytes=workspace) for i in range(1, len(sizes))]
    return Graph("g", tuple(ops), tuple(ts), static)


PROFILE = {"ops": [{"name": f"o{i}", "fwd_ms": 1, "bwd_ms": 1, "kind": "elementwise", "inputs": [f"t{i}"],
                    "outputs": [f"t{i + 1}"], "saves": [f"t{i + 1}"]} for i in range(3)],
           "tensors": [{"name": f"t{i}", "bytes": 8} for i in range(4)]}

ROWS = [
    # byte counts beyond exact arithmetic: refused when the graph is made, before any simulation
    (lambda: Problem.build("gpt2", batch=10**14), GraphError,
     f"gpt2: tensors[0] (input_ids).bytes: {LIMIT}; got 819,200,000,000,000,000"),
    (lambda: chain([8, MAX_BYTES + 1]), GraphError, f"g: tensors[1] (t1).bytes: {LIMIT}; got 9,007,199,254,740,993"),
    (lambda: chain([8, 2**52, 2**52]), GraphError,
     f"g: tensors: the bytes of all tensors and static_bytes together {LIMIT}; got 9,007,199,254,741,000"),
    (lambda: chain([8, 2**52, 2**52 - 8], static=1), GraphError,
     f"g: tensors: the bytes of all tensors and static_bytes together {LIMIT}; got 9,007,199,254,740,993"),
    (lambda: chain([8, 8], static=MAX_BYTES + 1), GraphError, f"g: static_bytes: {LIMIT}; got 9,007,199,254,740,993"),
    (lambda: chain([8, 8], workspace=MAX_BYTES + 1), GraphError,
     f"g: ops[0] (f1).workspace_bytes: {LIMIT}; got 9,007,199,254,740,993"),
    # op counts: models.build and a profile's graph, one limit (core.graph.MAX_OPS)
    (lambda: models.build("tiny", max_ops=5), ConfigError,
     "model 'tiny': 2 layers make about 21 ops, more than max_ops=5; give a larger max_ops (CLI --max-ops) "
     "to build it anyway"),
    (lambda: models.build("tiny", max_ops=True), ConfigError,
     "max_ops: expected a positive integer or None (no limit); got True"),
    (lambda: profile.from_dict(PROFILE, "p.json").graph(max_ops=2), ConfigError,
     "p.json: ops: 3 ops, more than max_ops=2; give a larger max_ops (Profile.graph, profile.load) to build it anyway"),
    (lambda: profile.from_dict(PROFILE, "p.json").graph(max_ops=0), ConfigError,
     "max_ops: expected a positive integer or None (no limit); got 0"),
    # run counts
    (lambda: experiments.grid("tiny", "a100-80gb", [0.3, 0.4, 0.5], ["slack"], max_runs=2), ConfigError,
     "sweep: 3 runs, more than max_runs=2; give a larger max_runs (CLI --max-runs) to run them anyway"),
    (lambda: experiments.grid("tiny", "a100-80gb", [0.3], ["slack"], max_runs="many"), ConfigError,
     "max_runs: expected a positive integer or None (no limit); got 'many'"),
    (lambda: experiments.sweep("tiny", "a100-80gb", [0.3], ["slack"], max_runs=0, workers=1, progress=False),
     ConfigError, "max_runs: expected a positive integer or None (no limit); got 0"),
]


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_size_error_is_one_exact_line(row):
    call, exc, message = ROWS[row]
    with pytest.raises(exc) as e:
        call()
    assert str(e.value) == message


def test_sizes_at_the_limits_are_accepted():
    g = chain([8, 2**52, 2**52 - 8])          # exactly MAX_BYTES in all
    assert sum(t.bytes for t in g.tensors) == MAX_BYTES
    assert len(profile.from_dict(PROFILE, "p.json").graph(max_ops=3).ops) == 3
    assert len(profile.from_dict(PROFILE, "p.json").graph(max_ops=None).ops) == 3
    assert len(experiments.grid("tiny", "a100-80gb", [0.3, 0.4, 0.5], ["slack"], max_runs=3)) == 3


CLI_ROWS = [
    (["plan", "--model", "gpt2", "--planner", "slack", "--batch", str(10**14)],
     f"gpt2: tensors[0] (input_ids).bytes: {LIMIT}; got 819,200,000,000,000,000"),
    (["plan", "--model", "tiny", "--planner", "slack", "--max-ops", "5"],
     "model 'tiny': 2 layers make about 21 ops, more than max_ops=5; give a larger max_ops (CLI --max-ops) "
     "to build it anyway"),
    (["sweep", "{sweep}", "--max-runs", "2"],
     "sweep.toml: 3 runs, more than max_runs=2; give a larger max_runs (CLI --max-runs) to run them anyway"),
]


@pytest.mark.parametrize("argv, message", CLI_ROWS)
def test_cli_size_error_is_one_line_exit_2(tmp_path, capsys, argv, message):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('models = ["tiny"]\nbudgets = [0.3, 0.4, 0.5]\nplanners = ["slack"]\n')
    assert main([a.replace("{sweep}", str(sweep)) for a in argv]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {message}\n"
