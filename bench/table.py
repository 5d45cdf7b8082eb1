"""`make bench-table`: the table of current figures at the top of bench/README.md, rewritten
from the latest result of each figure in bench/results/ (bench.results.record writes them).

Run: .venv/bin/python -m bench.table [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.results import RESULTS

README = Path(__file__).resolve().parent / "README.md"
START = "<!-- bench-table: written by `make bench-table` from bench/results/; do not edit by hand -->"
END = "<!-- bench-table end -->"
COLUMNS = ("what", "figure", "target", "command", "date", "load")


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(results: Path = RESULTS) -> str:
    """The table, one row per result file, in the files' name order (their names group them)."""
    rows = ["| what | figure | target | command | date | load |", "| --- | --- | --- | --- | --- | ---: |"]
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        values = [cell(result.get(column, "")) for column in COLUMNS]
        values[3] = f"`{values[3]}`" if values[3] else ""
        rows.append("| " + " | ".join(values) + " |")
    return "\n".join(rows)


def rewritten(readme: str, results: Path = RESULTS) -> str:
    """`readme` with the text between the markers replaced by the current table."""
    before, found, rest = readme.partition(START)
    if not found:
        raise SystemExit(f"{README.name}: no table marker ({START})")
    _, found, after = rest.partition(END)
    if not found:
        raise SystemExit(f"{README.name}: no end marker ({END})")
    return f"{before}{START}\n{table(results)}\n{END}{after}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if bench/README.md's table is out of date")
    args = parser.parse_args()
    text = README.read_text()
    new = rewritten(text)
    if args.check:
        sys.exit(0 if new == text else "bench/README.md's table is out of date: run make bench-table")
    README.write_text(new)
    print(f"wrote the table of {len(list(RESULTS.glob('*.json')))} figures into bench/README.md")


if __name__ == "__main__":
    main()
