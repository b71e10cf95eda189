"""Fixtures shared by several test modules, and the compiled simulator's cache warmed once per run.

The simulator's core is compiled by numba on first use and cached next to its source
(``slackswap/timeline/_core.py``). On a fresh clone every pytest-xdist worker would compile it at
the same time, each spending the same CPU seconds. Instead the controller starts one process that
compiles it while the workers collect, holding a file lock until the cache is written; a worker
waits for that lock before its first test and then loads the cache. Without xdist, or without
``fcntl``, nothing changes: the first simulation compiles (or loads) as usual. A failed warm-up
only means the workers compile themselves.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

try:
    import fcntl
except ImportError:   # not on POSIX: no warm-up
    fcntl = None

_LOCK_ENV = "SLACKSWAP_TEST_WARM_LOCK"
# compiles both cores (the signatures every simulation uses) by simulating one small plan
_WARM = ("import warnings; warnings.simplefilter('ignore')\n"
         "from slackswap import planners, simulate\n"
         "from slackswap.timeline.problem import Problem\n"
         "p = Problem.build('tiny', budget=0.5)\n"
         "simulate(p, planners.get('slack').plan(p), detail=True)\n")
_warm = {}


def pytest_configure(config):
    if fcntl is None or hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    fd, path = tempfile.mkstemp(prefix="slackswap-warm-", suffix=".lock")
    fcntl.flock(fd, fcntl.LOCK_EX)
    root = Path(__file__).resolve().parents[1]
    _warm["proc"] = subprocess.Popen([sys.executable, "-c", _WARM], cwd=root, pass_fds=(fd,),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
    os.close(fd)   # the warm-up process holds the lock (the same open file) until it exits
    _warm["path"] = os.environ[_LOCK_ENV] = path


def pytest_unconfigure(config):
    if "proc" in _warm:
        _warm.pop("proc").wait()
        os.environ.pop(_LOCK_ENV, None)
        os.unlink(_warm.pop("path"))


@pytest.fixture(scope="session", autouse=True)
def _compiled_simulator_cache():
    """In an xdist worker: wait until the controller's warm-up has written the compiled cache."""
    path = os.environ.get(_LOCK_ENV)
    if fcntl is not None and path and os.path.exists(path):
        with open(path) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
    yield


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
