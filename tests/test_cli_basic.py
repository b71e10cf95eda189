"""CLI: `models`, `hardware`, `graph`; user errors are one line on stderr and exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from slackswap import cli, models
from slackswap.core import hardware


def test_models_lists_presets(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in models.available():
        assert name in out
    assert "gpt2-xl" in out and "1.56B" in out


def test_hardware_lists_presets(capsys):
    assert cli.main(["hardware"]) == 0
    out = capsys.readouterr().out
    for name in hardware.available() + hardware.available_links():
        assert name in out
    assert "312 TFLOP/s" in out and "25.0 GB/s" in out
    assert "GPU-GPU" in out and "300.0 GB/s" in out and "450.0 GB/s" in out


def test_graph_tiny(capsys):
    assert cli.main(["graph", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "tiny" in out and "total" in out and "embedding" in out and "head" in out
    assert cli.main(["graph", "tiny", "--seq", "8", "--batch", "1", "--attention", "eager",
                     "--hardware", "a100-80gb"]) == 0
    out = capsys.readouterr().out
    assert "seq 8, batch 1, eager attention" in out and "ideal step on a100-80gb" in out


def test_graph_and_plan_implementation_override(capsys):
    """--implementation hf: the graph saves what HF transformers saves (more than fused for GPT-2)."""
    from slackswap import models

    assert cli.main(["graph", "gpt2", "--batch", "1", "--seq", "64", "--implementation", "hf"]) == 0
    out = capsys.readouterr().out
    assert "flash attention, hf implementation" in out
    assert cli.main(["plan", "--model", "gpt2", "--batch", "1", "--seq", "64", "--implementation",
                     "hf", "--budget", "0.8"]) == 0
    assert models.build("gpt2", implementation="hf").saved_bytes() > models.build("gpt2").saved_bytes()


@pytest.mark.parametrize("argv, needle", [
    ([], "required"),
    (["nosuch"], "nosuch"),
    (["graph"], "model"),
    (["graph", "gpt-17"], "known: "),
    (["graph", "tiny", "--seq", "0"], "--seq"),
    (["graph", "tiny", "--batch", "two"], "--batch"),
    (["graph", "tiny", "--attention", "sparse"], "--attention"),
    (["graph", "tiny", "--implementation", "torch"], "--implementation"),
    (["graph", "tiny", "--hardware", "tpu"], "a100-80gb"),
    (["models", "--bogus"], "--bogus"),
])
def test_user_errors_one_line_exit_2(capsys, argv, needle):
    assert cli.main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slackswap: error: ")
    assert needle in lines[0]
    assert "Traceback" not in cap.err and cap.out == ""


def test_help_exits_0(capsys):
    assert cli.main(["--help"]) == 0
    assert "graph" in capsys.readouterr().out


def test_duplicate_command_raises():
    with pytest.raises(ValueError, match="twice"):
        cli.command("models", "again")(lambda args, console: 0)


def test_python_dash_m():
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "slackswap", "hardware"], cwd=root, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "a100-80gb" in r.stdout
    r = subprocess.run([sys.executable, "-m", "slackswap", "graph", "nope"], cwd=root, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown model" in r.stderr


def test_graph_warns_when_static_memory_exceeds_the_gpu(capsys):
    assert cli.main(["graph", "llama-7b"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "WARNING: static memory (weights, gradients, optimizer state) 100.41 GiB alone exceeds the 80.00 GiB " \
           "of a100-80gb" in out
    assert cli.main(["graph", "gpt2-xl", "--hardware", "a100-40gb"]) == 0
    assert "WARNING: static memory 23.21 GiB + keep-all activations 20.79 GiB" in capsys.readouterr().out
    assert cli.main(["graph", "gpt2-xl"]) == 0
    assert "WARNING" not in capsys.readouterr().out
