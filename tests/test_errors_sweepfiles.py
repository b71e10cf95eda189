"""Sweep files (docs/errors.md, "Plan files, sweep files and outputs"): a value repeated in any axis
is refused before any run, naming the axis, the position and the value; valid sweep files are still
accepted."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackswap import experiments
from slackswap.cli import main
from slackswap.core.errors import ConfigError
from slackswap.experiments.sweepfiles import load_sweep, sweep_from_dict, sweeps_dir

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None)
HEAD = 'models = ["tiny"]\nbudgets = [0.5]\n'

ROWS = [
    ('models = ["tiny", "gpt2", "tiny"]\nbudgets = [0.5]\nplanners = ["slack"]\n',
     "sweep.toml: models[2]: expected each value once (the same as models[0]); got 'tiny'"),
    ('models = ["tiny"]\nbudgets = [0.5, 0.4, 0.5]\nplanners = ["slack"]\n',
     "sweep.toml: budgets[2]: expected each value once (the same as budgets[0]); got 0.5"),
    ('models = ["tiny"]\nbudgets = ["24GiB", "24GiB"]\nplanners = ["slack"]\n',
     "sweep.toml: budgets[1]: expected each value once (the same as budgets[0]); got '24GiB'"),
    ('models = ["tiny"]\nhardware = ["a100-80gb", "a100-80gb"]\nbudgets = [0.5]\nplanners = ["slack"]\n',
     "sweep.toml: hardware[1]: expected each value once (the same as hardware[0]); got 'a100-80gb'"),
    (HEAD + 'planners = ["slack", "chen-sqrt", "slack"]\n',
     "sweep.toml: planners[2]: expected each value once (the same as planners[0]); got 'slack'"),
    (HEAD + '[[variants]]\nlabel = "a"\nplanner = "slack"\n[[variants]]\nlabel = "a"\nplanner = "chen-sqrt"\n',
     "sweep.toml: variants[1].label: expected each value once (the same as variants[0]); got 'a'"),
    (HEAD + 'planners = ["slack"]\noverrides = [{seq = 8}, {seq = 8}]\n',
     "sweep.toml: overrides[1]: expected each value once (the same as overrides[0]); got {'seq': 8}"),
    (HEAD + 'planners = ["slack"]\nlinks = ["pcie4-x16", "pcie4-x16"]\n',
     "sweep.toml: links[1]: expected each value once (the same as links[0]); got 'pcie4-x16'"),
]


@pytest.mark.parametrize("text, message", ROWS)
def test_sweep_file_error_is_one_exact_line(tmp_path, text, message):
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    assert str(e.value) == message


@pytest.mark.parametrize("text, message", ROWS)
def test_sweep_command_refuses_before_any_run(tmp_path, capsys, monkeypatch, text, message):
    def boom(*a, **k):
        raise AssertionError("a run started")

    monkeypatch.setattr(experiments, "sweep", boom)
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    assert main(["sweep", str(path)]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {message}\n"


def test_shipped_sweep_files_are_accepted():
    for path in sorted(sweeps_dir().glob("*.toml")):
        load_sweep(path)


names = st.lists(st.sampled_from(["tiny", "gpt2", "bert-large", "gpt2-xl"]), min_size=1, max_size=4, unique=True)


@SETTINGS
@given(models=names, budgets=st.lists(st.sampled_from([0.3, 0.4, 0.5, 0.75, 1, "24GiB", "inf"]), min_size=1,
                                      max_size=5, unique=True),
       heur=st.lists(st.sampled_from(["slack", "chen-sqrt", "swap-all", "checkpoint-layers"]), min_size=1,
                     max_size=4, unique=True))
def test_valid_sweep_files_are_accepted(models, budgets, heur):
    cfg = sweep_from_dict({"models": models, "budgets": budgets, "planners": heur}, "sweep.toml")
    assert (cfg["models"], cfg["budgets"], cfg["planners"]) == (models, budgets, heur)


# ---------------------------------------------------------------- the Python sweep API
API_ROWS = [
    (dict(models=["tiny", "tiny"]), "sweep: models[1]: expected each value once (the same as models[0]); got 'tiny'"),
    (dict(hardware=["a100-80gb", "h100-sxm", "a100-80gb"]),
     "sweep: hardware[2]: expected each value once (the same as hardware[0]); got 'a100-80gb'"),
    (dict(budgets=[0.5, 0.4, 0.5]), "sweep: budgets[2]: expected each value once (the same as budgets[0]); got 0.5"),
    (dict(budgets=(1, 1.0)), "sweep: budgets[1]: expected each value once (the same as budgets[0]); got 1.0"),
    (dict(planners=["slack", "slack"]),
     "sweep: planners[1]: expected each value once (the same as planners[0]); got 'slack'"),
    (dict(link=["pcie3-x16", "pcie3-x16"]), "sweep: link[1]: expected each value once (the same as link[0]); got 'pcie3-x16'"),
    (dict(overrides=[{"seq": 8}, {"seq": 8}]),
     "sweep: overrides[1]: expected each value once (the same as overrides[0]); got {'seq': 8}"),
]
API_BASE = dict(models="tiny", hardware="a100-80gb", budgets=0.5, planners=["slack"])


@pytest.mark.parametrize("kw, message", API_ROWS)
def test_sweep_api_refuses_a_repeated_value_up_front(monkeypatch, kw, message):
    from slackswap.experiments import runs

    def no_run(*a, **k):   # nothing may run, not even in-process
        raise AssertionError("a run started")

    monkeypatch.setattr(runs, "_run_one", no_run, raising=False)
    for call in (experiments.grid, lambda **a: experiments.sweep(**a, workers=1, progress=False)):
        with pytest.raises(ConfigError) as e:
            call(**{**API_BASE, **kw})
        assert str(e.value) == message


def test_sweep_api_without_repeats_is_unchanged():
    specs = experiments.grid(["tiny", "gpt2"], "a100-80gb", [0.5, 0.4], ["slack", "chen-sqrt"],
                             overrides=[{"seq": 8}, {"seq": 16}])
    assert len(specs) == 2 * 2 * 2 * 2


@pytest.mark.parametrize("argv, message", [
    (["compare", "--model", "tiny", "--planners", "slack,chen-sqrt,slack"],
     "--planners: expected each name once; got 'slack' twice"),
    (["reproduce", "--models", "tiny,tiny", "--planners", "slack"], "--models: expected each name once; got 'tiny' twice"),
])
def test_cli_name_lists_refuse_a_repeated_name(capsys, argv, message):
    assert main(argv) == 2
    assert capsys.readouterr().err == f"slackswap: error: {message}\n"
