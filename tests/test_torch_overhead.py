"""measure_step.op_overhead: the fixed cost per op, measured on a tiny model (CPU here; the CUDA
test runs where a GPU is present), and ``measure`` charging it (docs/profile.md, "Per-op overhead")."""

import json
import math

import pytest

torch = pytest.importorskip("torch")

from slackswap import CostModel, Decision, Plan, Problem  # noqa: E402
from slackswap.core.errors import ParameterError  # noqa: E402
from slackswap.torch import trace  # noqa: E402
from slackswap.torch.measure_step import measure, op_overhead  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class HostWork(torch.nn.Module):
    """Host-side work between ops that no aten call sees (as module, autograd and hook code is):
    a Python loop, then an elementwise op."""

    def forward(self, x):
        self.last = sum(i * i for i in range(3000))
        return torch.tanh(x)


def _tiny(device="cpu"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), HostWork(), torch.nn.Linear(16, 16),
                                HostWork(), torch.nn.Linear(16, 1)).to(device)
    return model, (torch.randn(4, 16, device=device),)


def _overhead(device):
    model, inputs = _tiny(device)
    model(*inputs).sum().backward()          # warm-up, as measure does before its traces
    graph = trace(model, inputs, device=device)
    keep = Plan({t: Decision.KEEP for t in Problem.from_graph(graph, CostModel.unit(graph)).planning_ids})
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ov = op_overhead(model, lambda: model(*inputs).sum(), graph, graph.spec.op_times_s, keep,
                     sync=sync, repeats=3)
    return graph, ov


def _check(graph, ov):
    n = len(graph.ops)
    assert ov.n_ops == n > 0
    assert 0 <= ov.fwd_s < math.inf and 0 <= ov.bwd_s < math.inf
    assert 0 <= ov.hooks_fwd_s <= ov.fwd_s and 0 <= ov.hooks_bwd_s <= ov.bwd_s
    # the definition: (measured phase - sum of the traced op times) / ops, 0 when negative
    assert ov.kernel_fwd_s == math.fsum(f for f, _ in graph.spec.op_times_s)
    assert ov.fwd_s == max(ov.step_fwd_s - ov.kernel_fwd_s, 0.0) / n
    assert ov.bwd_s == max(ov.step_bwd_s - ov.kernel_bwd_s, 0.0) / n
    entry = ov.profile_entry()
    assert entry["fwd"] == ov.fwd_s * 1e3 and entry["method"]


@pytest.fixture(scope="module")
def cpu_overhead():
    return _overhead("cpu")     # the module's first trace also pays torch's one-time start-up


def test_the_overhead_per_op_follows_its_definition_on_cpu(cpu_overhead):
    """The overhead is finite, at least 0, and exactly its definition from the measured phases and
    the traced op times. (That it is positive here, the forward's host-side work between ops,
    ``HostWork``'s loop, being in the measured step and not in the traced op times, is a timing
    and is not asserted: on a loaded machine the traced op times, measured once, can exceed the
    measured phase, which then gets 0.)"""
    _check(*cpu_overhead)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_overhead_per_op_follows_its_definition_on_cuda():
    _check(*_overhead("cuda"))


def test_measure_charges_the_overhead_and_writes_it_to_the_profile(tmp_path):
    model, inputs = _tiny()
    path = tmp_path / "p.json"
    m = measure(model, inputs, budget=0.9, repeats=1, trace_repeats=1, device="cpu", profile_path=path)
    c, ov = m.problem.costs, m.overhead
    assert (c.fwd_overhead_s, c.bwd_overhead_s) == (ov.fwd_s, ov.bwd_s) and ov.fwd_s >= 0
    doc = json.loads(path.read_text())
    assert doc["per_op_overhead_ms"]["fwd"] == ov.fwd_s * 1e3
    assert doc["per_op_overhead_ms"]["hooks_fwd"] == ov.hooks_fwd_s * 1e3
    keep = m.rows[0]
    assert keep.plan == "keep-all" and keep.sim_step_s == pytest.approx(c.ideal_step_s, rel=1e-12)


def test_measure_refuses_a_non_boolean_overhead():
    model, inputs = _tiny()
    with pytest.raises(ParameterError, match=r"^measure: overhead: must be True or False; got 'yes'$"):
        measure(model, inputs, overhead="yes")


def test_cli_measure_no_overhead(capsys, tmp_path):
    """``--no-overhead`` (``measure(overhead=False)``): nothing measured, printed or written."""
    from slackswap.cli import main

    prof = tmp_path / "p.json"
    assert main(["measure", f"{__name__}:_tiny", "--repeats", "1", "--budget", "0.9", "--no-overhead",
                 "--profile-out", str(prof)]) == 0
    assert "per-op overhead" not in capsys.readouterr().out
    assert "per_op_overhead_ms" not in json.loads(prof.read_text())
