"""benchmarks/versus.py's core on a tiny HF GPT-2 (CPU, fp32): every eager method runs and gives
the plain step's gradients bitwise; the slack plan's saved peak is the simulator's. The
torch.compile rows and the profiled peaks are left out here (compiling the tiny model took about
a minute, the profiler about a second a row on this machine); the benchmark runs them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))
ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("versus", ROOT / "benchmarks" / "versus.py")
versus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(versus)


def test_every_method_runs_and_gives_the_plain_gradients():
    import torch
    from exec_models import build

    torch.set_num_threads(1)
    model, inputs = build("gpt2")
    inputs = dict(inputs, use_cache=False)     # as checkpointing runs it
    rows = versus.versus(model, inputs, [0.6], repeats=1, device="cpu", compile_backend=None,
                         name="tiny", peaks=False)
    assert [r["method"] for r in rows] == ["no plan", "checkpoint per layer", "save_on_cpu",
                                           "slack apply", "slack policy"]
    for r in rows:
        assert r["step ms"] > 0, r["method"]
    assert all(r["grad max abs diff"] == 0 for r in rows), [(r["method"], r["grad max abs diff"]) for r in rows]
    slack = rows[3]
    assert "keep/swap/recompute" in slack["note"] and slack["sim step ms"] > 0
    assert slack["saved peak MiB"] == slack["sim saved peak MiB"]


def test_bad_options_name_the_field():
    with pytest.raises(SystemExit) as e:
        versus.main(["--budgets", "nan"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        versus.main(["--layers", "0"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        versus.main(["--models", "gpt2-xl"])
    assert e.value.code == 2
