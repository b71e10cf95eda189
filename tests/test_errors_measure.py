"""measure and device arguments: one line naming the argument, before any work."""

import pytest

torch = pytest.importorskip("torch")

from slackswap.core.errors import ParameterError  # noqa: E402
from slackswap.torch._check import check_device  # noqa: E402
from slackswap.torch.measure_step import measure  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NET = torch.nn.Linear(4, 4)
X = (torch.randn(2, 4),)

MEASURE_ROWS = [
    (dict(repeats=0), "measure: repeats: must be an integer >= 1; got 0"),
    (dict(repeats=1.5), "measure: repeats: must be an integer >= 1; got 1.5"),
    (dict(repeats=True), "measure: repeats: must be an integer >= 1; got True"),
    (dict(trace_repeats=-1), "measure: trace_repeats: must be an integer >= 1; got -1"),
    (dict(device=3), "measure: device: expected a device name ('cpu', 'cuda', 'cuda:0', 'mps', "
                     "'meta'); got 3"),
    (dict(device="gpu"), "measure: device: expected a device name ('cpu', 'cuda', 'cuda:0', 'mps', "
                         "'meta'); got 'gpu'"),
]


@pytest.mark.parametrize("kwargs,line", MEASURE_ROWS)
def test_measure_bad_argument_is_one_line(kwargs, line):
    with pytest.raises(ParameterError) as exc:
        measure(NET, X, **kwargs)
    assert str(exc.value) == line


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_cuda_without_cuda_is_one_line(device):
    with pytest.raises(ParameterError) as exc:
        measure(NET, X, device=device)
    assert str(exc.value) == f"measure: device: CUDA is not available on this machine; got {device!r}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_index_beyond_count():
    n = torch.cuda.device_count()
    with pytest.raises(ParameterError) as exc:
        check_device(f"cuda:{n}", "measure")
    assert str(exc.value) == f"measure: device: must be one of cuda:0..cuda:{n - 1}; got 'cuda:{n}'"


def test_cpu_device_accepted():
    assert check_device("cpu", "measure") == torch.device("cpu")


# ---------------------------------------------------------------- model shapes: before any allocation
from slackswap.torch import hf_models  # noqa: E402
from slackswap.torch.measure_step import load_model  # noqa: E402

#: gpt2-tiny (hidden 32, 2 heads, 2 layers, vocab 64, batch 2) at seq 100000, by hf_models._sizes:
#: parameters 4 * (64*32 + 100000*32 + 2*12*32*32) = 12,906,496 bytes; the step twice that plus
#: 4 * (2 layers * 2 batch * 2 heads * 100000**2 + 2 * 100000 * 64) = 320,051,200,000 bytes
SEQ_BYTES = 2 * 12_906_496 + 320_051_200_000
SMALL = 10**9   # the machine's memory, as the tests below pretend it is

SHAPE_ROWS = [
    (dict(batch=0), "measure: batch: must be an integer >= 1; got 0"),
    (dict(seq=-3), "measure: seq: must be an integer >= 1; got -3"),
    (dict(vocab=True), "measure: vocab: must be an integer >= 1; got True"),
    (dict(layers=1.5), "measure: layers: must be an integer >= 1; got 1.5"),
    (dict(seq=100000), f"measure: seq: a training step of gpt2-tiny needs at least {SEQ_BYTES:,} bytes "
                       f"(298.1 GiB), more than the {SMALL:,} bytes of this machine; got 100000"),
]


@pytest.fixture
def small_machine(monkeypatch):
    monkeypatch.setattr(hf_models, "machine_memory", lambda device=None: SMALL)


@pytest.fixture
def no_model(monkeypatch):
    """A model built after all fails the test: the checks come before any allocation."""
    import transformers

    def boom(*a, **k):
        raise AssertionError("the model was built")
    monkeypatch.setattr(transformers, "GPT2LMHeadModel", boom)


@pytest.mark.parametrize("kwargs,line", SHAPE_ROWS)
def test_shape_checked_before_allocation(small_machine, no_model, kwargs, line):
    with pytest.raises(ParameterError) as exc:
        load_model("gpt2-tiny", **kwargs)
    assert str(exc.value) == line


def test_vocab_beyond_the_machine_names_vocab(no_model):
    with pytest.raises(ParameterError) as exc:
        load_model("gpt2-tiny", vocab=10**12)
    text = str(exc.value)
    assert text.startswith("measure: vocab: a training step of gpt2-tiny needs at least ") and \
        text.endswith("; got 1000000000000"), text
    named = int(text.split("at least ")[1].split(" bytes")[0].replace(",", ""))
    assert named > hf_models.machine_memory()


def test_preset_shape_still_builds():
    model, inputs = load_model("gpt2-tiny", batch=1, seq=4, vocab=16)
    assert inputs["input_ids"].shape == (1, 4) and model.config.vocab_size == 16


def test_tiny_preset_step_is_quiet():
    """No transformers warnings about token ids outside the shrunk vocabulary or the loss type."""
    import logging

    from transformers.utils import logging as hf_logging
    logging.Logger.warning_once.cache_clear()     # warnings given once per process: give them again
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    keep = Keep()
    hf_logging.get_logger("transformers").addHandler(keep)
    try:
        model, inputs = hf_models.build("gpt2-tiny")
        model(**inputs).loss.backward()
    finally:
        hf_logging.get_logger("transformers").removeHandler(keep)
    assert records == []


# ---------------------------------------------------------------- the command line: same lines
MEASURE_CLI_ROWS = [
    (["--batch", "0"], "measure: batch: must be an integer >= 1; got 0"),
    (["--repeats", "0"], "measure: repeats: must be an integer >= 1; got 0"),
    (["--vocab", "1.5"], "argument --vocab: expected an integer, got '1.5'"),
    (["--seq", "1e5"], SHAPE_ROWS[-1][1]),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu' (choose from 'cpu', 'cuda')"),
]


@pytest.mark.parametrize("argv,line", MEASURE_CLI_ROWS)
def test_cli_measure_is_one_line_exit_2(small_machine, no_model, capsys, argv, line):
    from slackswap.cli import main
    assert main(["measure", "gpt2-tiny", *argv]) == 2
    assert capsys.readouterr().err == f"slackswap: error: {line}\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_measure_cuda_without_cuda_is_one_line(no_model, capsys):
    from slackswap.cli import main
    assert main(["measure", "gpt2-tiny", "--device", "cuda"]) == 2
    assert capsys.readouterr().err == ("slackswap: error: measure: device: CUDA is not available on this "
                                       "machine; got 'cuda'\n")
