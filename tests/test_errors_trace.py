"""trace arguments: one line naming the argument."""

import pytest

torch = pytest.importorskip("torch")

from slackswap.core.errors import ConfigError, ParameterError  # noqa: E402
from slackswap.torch.trace import trace  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NET = torch.nn.Linear(4, 4)
X = torch.randn(2, 4)


def test_dict_with_non_string_key_is_one_line():
    with pytest.raises(ConfigError) as exc:
        trace(NET, {1: X})
    assert str(exc.value) == ("trace: example_inputs: expected a dict of keyword arguments "
                              "(string keys); got key 1")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_trace_cuda_without_cuda_is_one_line():
    with pytest.raises(ParameterError) as exc:
        trace(NET, (X,), device="cuda")
    assert str(exc.value) == "trace: device: CUDA is not available on this machine; got 'cuda'"


def test_apply_with_planner_name_is_one_line():
    from slackswap.torch.executor import apply
    g = trace(NET, (X,), device="cpu")
    with pytest.raises(ParameterError) as exc:
        apply(NET, "swap-all", g)
    assert str(exc.value) == ("apply: plan: expected a Plan (a planner name: plan it first, "
                              "planners.get(name).plan(problem)); got 'swap-all'")


def test_apply_with_something_else_than_a_graph_is_one_line():
    from slackswap import Decision, Plan
    from slackswap.torch.executor import apply
    g = trace(NET, (X,), device="cpu")
    plan = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
    with pytest.raises(ParameterError) as exc:
        apply(NET, plan, g.spec)
    assert str(exc.value) == "graph: expected the Graph of slackswap.torch.trace; got TraceInfo"


# ---------------------------------------------------------------- the command line: traced models
TRACE_CLI_ROWS = [
    (["plan", "--model", "hf:nope"], "unknown HF config 'nope'; known: <path>/config.json, bert-large, "
                                     "gpt2-xl, llama-7b, tiny, tiny-bert, tiny-gpt2, tiny-llama"),
    (["plan", "--model", "hf:tiny-gpt2", "--seq", "100000"],
     "{data}/tiny-gpt2.json: seq: must be <= n_positions (64), the config's position count "
     "(max_positions= raises it); got 100000"),
]


@pytest.mark.parametrize("argv,line", TRACE_CLI_ROWS)
def test_cli_traced_model_is_one_line_exit_2(capsys, argv, line):
    from slackswap.cli import main
    from slackswap.torch.hf_trace import hf_dir
    assert main(argv) == 2
    assert capsys.readouterr().err == f"slackswap: error: {line.format(data=hf_dir())}\n"
