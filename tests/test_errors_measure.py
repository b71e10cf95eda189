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
