"""Regenerate the result tables of benchmarks/README.md from benchmarks/results/*.csv.

    python scripts/update_benchmarks_readme.py           # rewrite the tables in the README
    python scripts/update_benchmarks_readme.py --check   # exit 1 if the README is stale

Each CSV holds one benchmark table: comment lines first (``# date: ...``, ``# machine: ...``,
``# command: ...``; all three required; ``# note: ...`` optional), then a header row and the rows, as measured. The README
shows table NAME (the CSV's file name without ``.csv``) between ``<!-- table:NAME:start -->``
and ``<!-- table:NAME:end -->``; what is between the markers is generated and is overwritten.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

from slackswap.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "benchmarks" / "README.md"
RESULTS = ROOT / "benchmarks" / "results"
META = ("date", "machine", "command")
BLOCK = re.compile(r"(<!-- table:([\w-]+):start -->\n)(.*?)(<!-- table:\2:end -->)", re.S)


class TableError(ConfigError):
    """A results CSV or the README's markers are malformed."""


def read_table(path: Path) -> tuple[dict[str, str], list[list[str]]]:
    """Metadata and rows (header first) of one results CSV."""
    meta: dict[str, str] = {}
    body = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if not sep:
                raise TableError(f"{path.name}: comment line: expected '# key: value'; got {line!r}")
            meta[key.strip()] = value.strip()
        elif line.strip():
            body.append(line)
    for key in META:
        if not meta.get(key):
            raise TableError(f"{path.name}: {key}: expected a '# {key}: ...' line; got none")
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    if len(rows) < 2:
        raise TableError(f"{path.name}: rows: expected a header and at least one row; got {len(rows)} line(s)")
    width = len(rows[0])
    for i, row in enumerate(rows[1:], 2):
        if len(row) != width:
            raise TableError(f"{path.name}: row {i}: expected {width} fields; got {len(row)}")
    return meta, rows


def render(meta: dict[str, str], rows: list[list[str]]) -> str:
    """The markdown a table's block holds."""
    note = f" ({meta['note']})" if meta.get("note") else ""
    lines = [f"Measured {meta['date']} on the {meta['machine']}: `{meta['command']}`{note}", ""]
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|" + "---|" * len(rows[0]))
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def generate(readme: str, results: Path) -> str:
    """The README with every table block regenerated from its CSV."""
    tables = {p.stem: p for p in sorted(results.glob("*.csv"))}
    seen = set()

    def block(m: re.Match) -> str:
        name = m.group(2)
        if name not in tables:
            raise TableError(f"benchmarks/README.md: table:{name}: expected benchmarks/results/{name}.csv; got none")
        seen.add(name)
        return m.group(1) + render(*read_table(tables[name])) + m.group(4)

    out = BLOCK.sub(block, readme)
    missing = sorted(set(tables) - seen)
    if missing:
        raise TableError(f"benchmarks/README.md: table blocks: expected one per CSV; got none for {', '.join(missing)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if benchmarks/README.md is stale")
    args = ap.parse_args(argv)
    try:
        text = README.read_text(encoding="utf-8")
        new = generate(text, RESULTS)
    except TableError as e:
        print(e, file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print("benchmarks/README.md is stale: run python scripts/update_benchmarks_readme.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
