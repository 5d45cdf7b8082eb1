"""The operator's guide (docs/) against the code it describes."""

import importlib.util
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
