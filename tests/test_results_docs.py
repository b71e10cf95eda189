"""The generated results (README.md, docs/results.md, scripts/update_results.py): what they state
is what the generator measured, with the machine and the date, one row per setting."""

import datetime
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _script():
    spec = importlib.util.spec_from_file_location("update_results", ROOT / "scripts" / "update_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_timings_name_the_machine_and_the_date():
    text = _script().timing(54.4, datetime.date(2026, 11, 30))
    assert re.fullmatch(r"54 s wall on a \d+-core .+ machine, 2026-11-30", text)
    for doc in DOCS:   # no bare "17 s here": a time without where and when
        assert not re.search(r"\d s here", doc.read_text()), doc.name


def test_generated_timings_in_the_docs_carry_machine_and_date():
    found = re.findall(r"\d+ s wall on a \d+-core [^,]+ machine, \d{4}-\d\d-\d\d", (ROOT / "docs" / "results.md").read_text())
    assert len(found) == 6   # one per sweep file


def test_the_optimality_table_does_not_show_slack_as_an_independent_milp_optimum():
    for doc in (ROOT / "README.md", ROOT / "docs" / "results.md"):
        block = doc.read_text().split("### optimality_gap", 1)[1]
        header = next(line for line in block.splitlines() if line.startswith("| model"))
        cells = [c.strip() for c in header.strip("|").split("|")]
        assert "milp" not in cells and {"milp plan", "milp plan is", "ceiling", "proven gap"} <= set(cells), doc.name


def test_ablation_tables_in_the_docs_have_one_row_per_setting():
    text = (ROOT / "docs" / "results.md").read_text()
    link = text.split("### link", 1)[1]
    header = next(line for line in link.splitlines() if line.startswith("| model"))
    assert [c.strip() for c in header.strip("|").split("|")][:3] == ["model", "budget", "link"]
    for name in ("attention", "shape"):
        block = text.split(f"### {name}", 1)[1]
        header = next(line for line in block.splitlines() if line.startswith("| model"))
        assert [c.strip() for c in header.strip("|").split("|")][:3] == ["model", "budget", "overrides"], name
