"""Where a benchmark leaves its figure: one JSON file per figure in bench/results/, with the
command that measured it, the date and the machine's load, so `make bench-table` can put the
latest of each at the top of bench/README.md (bench.table)."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def command() -> str:
    """The command line that is running, as a reader would type it: `python -m bench.x …`."""
    module = sys.modules["__main__"].__spec__
    program = f"-m {module.name}" if module else sys.argv[0]
    return " ".join(["python", program, *sys.argv[1:]])


def record(name: str, what: str, figure: str, target: str = "", details: dict | None = None) -> Path:
    """Write bench/results/<name>.json. The load is the machine's 5-minute load average as the
    run ends: on the shared 2-core machine it tells a quiet figure from a crowded one. `details`:
    what the figure sums up, kept beside it (the table shows only the figure)."""
    result = {
        "what": what,
        "figure": figure,
        "target": target,
        "command": command(),
        "date": datetime.now(UTC).date().isoformat(),
        "load": f"{os.getloadavg()[1]:.1f}",
        **(details or {}),
    }
    path = RESULTS / f"{name}.json"
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return path
