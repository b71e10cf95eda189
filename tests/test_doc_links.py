"""Links between the docs resolve: every relative markdown link in docs/, README.md and
benchmarks/README.md names a file that exists, and every citation written
``docs/X.md, "Heading"`` or ``benchmarks/README.md, "Heading"`` (in docs, code, tests, scripts,
benchmarks and notebooks) names a file that exists and text that occurs in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
CITING = [*MARKDOWN, *sorted(ROOT.glob("slackswap/**/*.py")), *sorted(ROOT.glob("tests/*.py")),
          *sorted(ROOT.glob("scripts/*.py")), *sorted(ROOT.glob("benchmarks/*.py")),
          *sorted(ROOT.glob("notebooks/*.ipynb"))]
CITING.remove(Path(__file__).resolve())  # its docstring shows the form, not a citation
CITATION = re.compile(r'((?:docs/[\w/.-]+|benchmarks/README)\.md),\s+\\?"([^"\\]+)')


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_relative_links_resolve():
    broken = []
    for f in MARKDOWN:
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", f.read_text(encoding="utf-8")):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target) and not (f.parent / target).exists():
                broken.append(f"{f.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_heading_citations_resolve():
    texts: dict[str, str] = {}
    broken = []
    for f in CITING:
        for m in CITATION.finditer(f.read_text(encoding="utf-8")):
            target = ROOT / m.group(1)
            if not target.exists():
                broken.append(f"{f.relative_to(ROOT)}: {m.group(1)} does not exist")
                continue
            text = texts.setdefault(m.group(1), _flat(target.read_text(encoding="utf-8")))
            if _flat(m.group(2)) not in text:
                broken.append(f"{f.relative_to(ROOT)}: {m.group(1)} has no {m.group(2)!r}")
    assert not broken, broken
