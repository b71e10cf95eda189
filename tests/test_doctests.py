"""Every runnable example in the package's docstrings runs and passes. ``EXAMPLES`` names each
module that has examples and how many it had when this test was written: fewer attempted (the
examples deleted or no longer found) fails, as does a module with examples missing from it."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import warnings

import pytest

import slackswap

EXAMPLES = {
    "slackswap.experiments.runs": 5, "slackswap.experiments.gaps": 3, "slackswap.core.graph": 3, "slackswap.core.hardware": 12,
    "slackswap.mip.model": 4, "slackswap.models": 4, "slackswap.models.spec": 3,
    "slackswap.models.transformer": 3, "slackswap.models.parallel": 3, "slackswap.models.presets": 2, "slackswap.planners.base": 3,
    "slackswap.planners.dp": 1, "slackswap.planners.milp.milp_planner": 2,
    "slackswap.planners.slack.slack_planner": 4, "slackswap.core.profile": 3, "slackswap.experiments.runcache": 3,
    "slackswap.core.schema": 2, "slackswap.experiments.synthetic": 7, "slackswap.torch.executor": 9,
    "slackswap.torch.hf_trace": 2, "slackswap.torch.measured_costs": 2, "slackswap.torch.trace": 5,
    "slackswap.core.units": 4, "slackswap.core.limits": 5, "slackswap.core.costmodel": 3,
    "slackswap.torch.accounting": 3, "slackswap.torch.checkpoint_policy": 6, "slackswap.timeline.host": 3,
    "slackswap.timeline.pipeline": 1,
}


def _has_examples(name: str) -> bool:
    mod = importlib.import_module(name)
    return any(t.examples and t.name.startswith(name) for t in doctest.DocTestFinder().find(mod))


def test_every_module_with_examples_is_listed():
    found = set()
    for m in pkgutil.walk_packages(slackswap.__path__, "slackswap."):
        if m.name.endswith("__main__") or (m.name.startswith("slackswap.torch") and
                                           importlib.util.find_spec("torch") is None):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if _has_examples(m.name):
                found.add(m.name)
    assert found == set(EXAMPLES), (sorted(found - set(EXAMPLES)), sorted(set(EXAMPLES) - found))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_examples_run_and_pass(name):
    if name.startswith("slackswap.torch"):
        pytest.importorskip("torch")
    mod = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = doctest.testmod(mod, verbose=False, report=False)
    assert r.failed == 0 and r.attempted >= EXAMPLES[name], (name, r)
