"""Fixtures shared by several test modules."""

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a module of small models (``pytestmark =
    pytest.mark.usefixtures("one_torch_thread")``): no result there depends on the thread count
    (gradients, bytes, FLOPs, the profiler's allocations), and idle OpenMP threads otherwise spin
    on CPU that a parallel test run needs. The count is restored after the module."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
