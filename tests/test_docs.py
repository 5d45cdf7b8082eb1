"""The operator's guide (docs/) against the code it describes."""

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def settings_reference():
    spec = importlib.util.spec_from_file_location("settings_reference", ROOT / "scripts" / "settings_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_reference_is_what_the_model_says():
    """docs/settings.md is generated: a setting added, renamed or re-explained in the model must be
    regenerated (`make settings-reference`) before it ships."""
    written = (ROOT / "docs" / "settings.md").read_text()
    assert written == settings_reference().reference(), "docs/settings.md is out of date: run make settings-reference"


def test_the_settings_reference_gives_each_setting_its_api_key_unit_default_and_range():
    page = settings_reference().reference()
    assert "| `threshold` | fraction (0–1) | `0.3` | 0 to 1 |" in page
    assert "| `cooldown` | seconds | `1800` | 0 to 604800 |" in page
    assert "| `hold_duration` | rounds | `3` | 0 to 1000 |" in page
    assert "| `memory_reserve` | bytes |" in page
    assert "`automatic`: automatic (auto-rebalance on)" in page


def test_the_benchmark_table_is_what_the_results_hold():
    from bench import table

    readme = table.README.read_text()
    assert readme == table.rewritten(readme), "bench/README.md's table is out of date: run make bench-table"


def test_the_benchmark_table_takes_a_new_result_in_place_of_the_old_table(tmp_path):
    import json

    from bench import table

    (tmp_path / "web-1-latency.json").write_text(
        json.dumps(
            {
                "what": "round → browser",
                "figure": "p95 9 ms",
                "command": "python -m bench.latency",
                "date": "2026-11-27",
                "load": "0.4",
            }
        )
    )
    readme = f"# Benchmarks\n\n{table.START}\n| old | row |\n{table.END}\n\n## How\n"
    new = table.rewritten(readme, tmp_path)
    assert "| round → browser | p95 9 ms |  | `python -m bench.latency` | 2026-11-27 | 0.4 |" in new
    assert "| old | row |" not in new and new.endswith(f"{table.END}\n\n## How\n")


# -- the names the docs cite exist ------------------------------------------------------------------

CITING = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "bench" / "README.md"]
PACKAGES = ("crs", "dashboard", "harness", "bench", "project")  # a dotted name from one of them is ours
FILE = r"\.(?:py|hs|md|json|yml|yaml|toml|lock|js|css|html|txt|log)"  # how a cited file's name ends
PATH = re.compile(rf"[\w.-]+(?:/[\w.*-]+)*/[\w*-]*(?:{FILE})?")
ROOT_DIRS = ("bench", "crs", "dashboard", "docs", "harness", "project", "scripts", "static", "templates", "tests")
WRITTEN_BY_RUNS = "tests/artifacts/"  # git ignores it: a run's logs, not the checkout's


def cited(text: str) -> list[str]:
    """Every span a page puts in backticks, inline (`crs.round.decide`, `crs/round.py`,
    `make worker-proxmox`, `python -m bench.latency`), and each line of its fenced blocks."""
    fenced = re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"(?ms)^```[^\n]*\n.*?^```", "", text))
    return inline + [line.strip() for block in fenced for line in block.splitlines()]


def python_name(name: str) -> str | None:
    """The full dotted name `name` cites, or None: ours (`crs.round.decide`), a web module's by
    its short name (`tasks.n1_refresh`) or a model's (`Cluster.task_queue`). A file's name
    (`power.py`, hbal's `Cluster.hs`) and an API field (`settings.threshold`) are none."""
    if not re.fullmatch(r"\w+(?:\.\w+)+", name) or re.search(rf"{FILE}$", name):
        return None
    head = name.split(".")[0]
    if head in PACKAGES:
        return name
    if (ROOT / "dashboard" / f"{head}.py").exists():
        return f"dashboard.{name}"
    if head[0].isupper() and hasattr(importlib.import_module("dashboard.models"), head):
        return f"dashboard.models.{name}"
    return None


def missing(name: str) -> str | None:
    """Why `name` (a Python name, a path, `make TARGET`, `python -m MODULE`) does not exist, or
    None, also for what is none of them. A Python name is its longest importable module and the
    attributes under it."""
    if name.startswith("make "):
        target = name.split()[1]
        return None if re.search(rf"(?m)^{re.escape(target)}:", (ROOT / "Makefile").read_text()) else "no make target"
    if name.startswith("python -m "):
        return None if importlib.util.find_spec(name.split()[2]) else "no module"
    if dotted := python_name(name):
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:end]))
            except ModuleNotFoundError:
                continue
            for at, attr in enumerate(parts[end:], end):
                if not hasattr(found, attr):
                    return f"no {attr} in {'.'.join(parts[:at])}"
                found = getattr(found, attr)
            return None
        return "no module"
    if PATH.fullmatch(name) and name.split("/")[0] in ROOT_DIRS and not name.startswith(WRITTEN_BY_RUNS):
        return None if list(ROOT.glob(name.rstrip("/"))) else "no such file"
    return None


def citations() -> list[tuple[str, str]]:
    """(page, name) for every span a page cites; a command's `make X` and `python -m X` apart."""
    found = []
    for page in CITING:
        for span in cited(page.read_text()):
            for name in re.findall(r"make [\w-]+|python -m [\w.]+", span) or [span.strip()]:
                found.append((str(page.relative_to(ROOT)), name))
    return found


def test_the_names_the_docs_cite_exist():
    """A module, function, file, make target or `python -m` module a page names in backticks
    exists: a rename that leaves the docs behind fails here (docs/scaling.md named
    `dashboard.tasks.task_queue`, which never existed)."""
    wrong = [f"{page}: `{name}`: {why}" for page, name in citations() if (why := missing(name))]
    assert wrong == []


def test_a_made_up_name_is_missing():
    made_up = ["dashboard.tasks.task_queue", "crs.round.nothing", "crs/nothing.py", "make nothing", "tasks.nothing"]
    made_up += ["Cluster.nothing", "python -m bench.nothing", "tests/fixtures/nothing/"]
    assert [name for name in made_up if missing(name) is None] == []
    real = ["crs.round.decide", "crs/round.py", "make worker-proxmox", "tasks.n1_refresh", "Cluster.task_queue"]
    assert [missing(name) for name in real] == [None] * len(real)
