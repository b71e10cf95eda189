"""Regenerate the "Parameters" section of docs/planners.md from the planners' declarations.

    python scripts/update_params_table.py           # rewrite the tables in docs/planners.md
    python scripts/update_params_table.py --check   # exit 1 if docs/planners.md is stale

Every registered planner's parameters are declared once, in its ``Params`` schema (a
``Field(description=...)`` each; ``slackswap.planners.base.Parameterised``). This script writes one
table per planner, in name order, between ``<!-- params:start -->`` and ``<!-- params:end -->``;
what is between the markers is generated and is overwritten.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from slackswap import planners
from slackswap.core.errors import ConfigError
from slackswap.planners.base import param_rows, planner_class

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "planners.md"
START, END = "<!-- params:start -->", "<!-- params:end -->"
BLOCK = re.compile(re.escape(START) + r"\n(.*?)" + re.escape(END), re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """The markdown between the markers: one table per registered planner."""
    out = []
    for name in planners.available():
        cls = planner_class(name)
        schema = getattr(cls, "Params", None)
        if schema is None:
            raise ConfigError(f"planner {name!r}: parameters: expected a Params schema (planners.base.Parameterised); "
                              f"got {cls!r} without one")
        rows = param_rows(schema)
        out.append(f"**`{name}`**" + ("" if rows else ": no parameters."))
        out.append("")
        if rows:
            out += ["| parameter | type | default | meaning |", "|---|---|---|---|"]
            out += [f"| `{k}` | {_cell(typ)} | `{_cell(default)}` | {_cell(desc)} |" for k, typ, default, desc in rows]
            out.append("")
    return "\n".join(out)


def update(text: str) -> str:
    """``text`` (docs/planners.md) with its generated block replaced."""
    if len(BLOCK.findall(text)) != 1:
        raise ConfigError(f"{DOC.name}: markers: expected one {START} ... {END} block; got {len(BLOCK.findall(text))}")
    return BLOCK.sub(lambda m: f"{START}\n{render()}{END}", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/planners.md is stale; write nothing")
    args = ap.parse_args(argv)
    try:
        old = DOC.read_text(encoding="utf-8")
        new = update(old)
    except ConfigError as e:
        print(f"update_params_table: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            print(f"{DOC.relative_to(ROOT)}: the Parameters tables are stale; run python scripts/update_params_table.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != old:
        DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
