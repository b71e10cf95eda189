"""benchmarks/README.md's result tables are generated from benchmarks/results/*.csv by
scripts/update_benchmarks_readme.py: the README must match its CSVs, and the generator must
notice a stale README and malformed CSVs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("update_benchmarks_readme", ROOT / "scripts" / "update_benchmarks_readme.py")
ubr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ubr)


def test_the_readme_matches_its_csvs():
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert ubr.generate(text, ROOT / "benchmarks" / "results") == text, (
        "benchmarks/README.md is stale: run python scripts/update_benchmarks_readme.py")
    assert ubr.main(["--check"]) == 0


def test_every_csv_has_date_machine_and_command():
    csvs = sorted((ROOT / "benchmarks" / "results").glob("*.csv"))
    assert csvs
    for path in csvs:
        meta, rows = ubr.read_table(path)
        assert all(meta[k] for k in ("date", "machine", "command")), path.name
        assert len(rows) >= 2, path.name


def _write(tmp_path, csv_text, readme_text):
    results = tmp_path / "results"
    results.mkdir()
    (results / "t.csv").write_text(csv_text, encoding="utf-8")
    return results, readme_text


CSV = "# date: 2026-12-04\n# machine: test machine\n# command: python x.py\na,b\n1,\"2,5\"\n"
README = "intro\n<!-- table:t:start -->\nold\n<!-- table:t:end -->\nafter\n"


def test_a_changed_csv_makes_the_readme_stale(tmp_path):
    results, readme = _write(tmp_path, CSV, README)
    fresh = ubr.generate(readme, results)
    assert fresh != readme
    assert "| 1 | 2,5 |" in fresh and fresh.startswith("intro\n") and fresh.endswith("after\n")
    assert "Measured 2026-12-04 on the test machine: `python x.py`" in fresh
    assert ubr.generate(fresh, results) == fresh
    (results / "t.csv").write_text(CSV.replace("2,5", "3"), encoding="utf-8")
    assert ubr.generate(fresh, results) != fresh


@pytest.mark.parametrize("bad, message", [
    (CSV.replace("# machine: test machine\n", ""), "t.csv: machine: expected a '# machine: ...' line; got none"),
    (CSV.replace("1,\"2,5\"\n", ""), "t.csv: rows: expected a header and at least one row; got 1 line(s)"),
    (CSV.replace("1,\"2,5\"", "1,2,3"), "t.csv: row 2: expected 2 fields; got 3"),
])
def test_a_malformed_csv_is_one_error(tmp_path, bad, message):
    results, readme = _write(tmp_path, bad, README)
    with pytest.raises(ubr.TableError) as e:
        ubr.generate(readme, results)
    assert str(e.value) == message


def test_a_csv_without_a_block_and_a_block_without_a_csv_are_errors(tmp_path):
    results, _ = _write(tmp_path, CSV, README)
    with pytest.raises(ubr.TableError, match="got none for t"):
        ubr.generate("no blocks\n", results)
    with pytest.raises(ubr.TableError, match="table:u: expected benchmarks/results/u.csv"):
        ubr.generate(README + "<!-- table:u:start -->\n<!-- table:u:end -->\n", results)
