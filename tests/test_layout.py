"""The package layout (issue 14 item 5): the models and solvers in ``slackswap/mip/`` and the
bounds sit below the planners and never import from ``slackswap/planners/``."""

import ast
from pathlib import Path

import slackswap

ROOT = Path(slackswap.__file__).parent


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (top level or inside functions)."""
    pkg = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_bounds_and_mip_do_not_import_planners():
    files = [*sorted((ROOT / "bounds").glob("*.py")), *sorted((ROOT / "mip").glob("*.py"))]
    bad = {f.name: sorted(m for m in _imports(f) if m.startswith("slackswap.planners")) for f in files}
    assert not {k: v for k, v in bad.items() if v}


def test_moved_modules_keep_their_public_names():
    from slackswap import planners
    from slackswap.planners.milp import MilpPlanner
    from slackswap.planners.slack import SlackPlanner

    assert isinstance(planners.get("milp"), MilpPlanner) and isinstance(planners.get("slack"), SlackPlanner)
