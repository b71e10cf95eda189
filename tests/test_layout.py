"""The package layout (README, "Layout"): every stage has its place in the declared order, and
moved modules keep their public names."""

from pathlib import Path

import pytest

import slackswap

ROOT = Path(slackswap.__file__).parent


def test_every_stage_is_in_the_declared_order():
    """The stages' order is declared once, as import-linter's layers contract in pyproject.toml
    (``lint-imports``, run by the test command, checks every import against it, imports inside
    functions included); here: no package of ``slackswap`` is left out of that order."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    (stages,) = [c for c in config["contracts"] if c["id"] == "stages"]
    layers = set(stages["layers"])
    packages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists())
    assert packages, ROOT
    missing = [p for p in packages if f"slackswap.{p}" not in layers
               and not any(x.startswith(f"slackswap.{p}.") for x in layers)]
    assert missing == []


def test_moved_modules_keep_their_public_names():
    from slackswap import planners
    from slackswap.planners.milp import MilpPlanner
    from slackswap.planners.slack import SlackPlanner

    assert isinstance(planners.get("milp"), MilpPlanner) and isinstance(planners.get("slack"), SlackPlanner)
