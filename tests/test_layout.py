"""The folders keep the shape DESIGN.md ("How it grows") gives them: imports run one way.

The web side is split by what admins see: the domain in `dashboard/` (models, rounds, plans,
expiry, automation, …), the pages in `dashboard/pages/`, the REST API in `dashboard/api/`, live push
in `dashboard/live/`. Pages, API and live use the domain; the domain never uses them, so a
change to a page cannot break a round. The engine `crs/` uses neither Django nor the dashboard.
The Django project (`project/`: settings, URLs, ASGI, Celery) wires them and is imported by none.
Read from the source with `ast`, so an import added inside a function is caught too.

A newcomer reads a module at a time and follows its imports: no module is over MAX_LINES lines
(the product's, the harness's, the benchmarks' and the tests' helpers; not the test modules),
and the longest chain of imports inside `dashboard/` is at most LONGEST_CHAIN modules.
"""

import ast
import graphlib
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FACES = ("dashboard.pages", "dashboard.api", "dashboard.live")  # what admins see: pages, API, live push
# The Django project's wiring (project/: settings, URLs, ASGI, Celery) names every part to serve it;
# the app never imports it, but for the command that runs the whole project in one process.
RUNS_THE_PROJECT = {"dashboard.management.commands.runembedded"}
# Celery tasks are the domain's one way to push: a thin task calls the engine, persists, then
# pushes what changed to the live pages (DESIGN.md: "thin tasks ... persist, then push").
# The migration executor, which the tasks call, pushes each migration's progress as it polls it.
PUSHERS = {"dashboard.tasks": ("dashboard.live.sender",), "dashboard.executor": ("dashboard.live.sender",)}
MAX_LINES = 500
LONGEST_CHAIN = 7  # modules, the first importing the second, and so on


def is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: Path) -> list[tuple[str, set[str]]]:
    """Each import of `path`, inside functions too: the module, relative imports resolved, and
    what `from X import …` names as X.y (y may be a module; empty for a plain `import`)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, set()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, {f"{module}.{alias.name}" for alias in node.names}))
    return found


def imported(path: Path) -> set[str]:
    """Every module `path` imports, `from X import y` counted as X.y too; packages left out
    (`from .live import sender` imports live/sender.py)."""
    found = set()
    for module, names in import_statements(path):
        found |= {module} | names
    return {m for m in found if not is_package(m)}


def modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def domain(path: Path) -> bool:
    name = module_name(path)
    return not any(within(name, face) for face in FACES)


@pytest.mark.parametrize("path", [p for p in modules("dashboard") if domain(p)], ids=module_name)
def test_the_domain_never_imports_pages_api_or_live_push(path):
    allowed = PUSHERS.get(module_name(path), ())
    wrong = sorted(
        m for m in imported(path) if any(within(m, face) for face in FACES) and not any(within(m, a) for a in allowed)
    )
    assert not wrong, f"{module_name(path)} (domain) imports {wrong}: pages, API and live push use the domain, not back"


@pytest.mark.parametrize("path", modules("dashboard"), ids=module_name)
def test_the_app_never_imports_the_project_wiring(path):
    wrong = sorted(m for m in imported(path) if within(m, "project"))
    assert module_name(path) in RUNS_THE_PROJECT or not wrong, f"{module_name(path)} imports {wrong}"


@pytest.mark.parametrize("path", modules("crs"), ids=module_name)
def test_the_engine_imports_neither_django_nor_the_dashboard(path):
    wrong = sorted(m for m in imported(path) if m.split(".")[0] in {"django", "dashboard", "celery", "channels"})
    assert not wrong, f"{module_name(path)} imports {wrong}: the engine is pure"


def math(path: Path) -> bool:
    return module_name(path) != "crs.__main__" and not within(module_name(path), "crs.programs")


@pytest.mark.parametrize("path", [p for p in modules("crs") if math(p)], ids=module_name)
def test_the_engine_math_never_imports_the_command_line_programs(path):
    wrong = sorted(m for m in imported(path) if within(m, "crs.programs"))
    assert not wrong, f"{module_name(path)} imports {wrong}: the programs call the engine, not back"


def test_the_check_sees_a_wrong_import():
    """The checks above would pass on an empty list: this one proves `imported` finds what they look for."""
    paths = {p.name: p for p in modules("dashboard")}
    assert "dashboard.live.sender" in imported(paths["tasks.py"])
    assert "dashboard.models.Cluster" in imported(ROOT / "dashboard/pages/views.py")
    assert len([p for p in modules("dashboard") if domain(p)]) > 20


def from_the_tests(source: str) -> set[str]:
    """Modules of tests/ that `source` imports: `tests.x`, or `x` found through a sys.path edit."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    top = {m.split(".")[0] for m in found}
    return {m for m in top if m == "tests" or (ROOT / "tests" / f"{m}.py").exists()}


def edits_sys_path(source: str) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys"
        for node in ast.walk(ast.parse(source))
    )


@pytest.mark.parametrize("path", modules("bench"), ids=module_name)
def test_the_benchmarks_import_nothing_from_the_tests_and_run_as_modules(path):
    source = path.read_text()
    assert not from_the_tests(source), f"{module_name(path)} imports {from_the_tests(source)} from tests/: use harness/"
    assert not edits_sys_path(source), f"{module_name(path)} edits sys.path: run it as `python -m {module_name(path)}`"


def test_the_benchmark_checks_see_the_old_way():
    old = "import sys\nsys.path.insert(0, str(ROOT / 'tests'))\nfrom round_scenarios import x\nimport tests.conftest\n"
    assert from_the_tests(old) == {"round_scenarios", "tests"}
    assert edits_sys_path(old)


def test_the_readme_is_short_and_points_only_inside_the_repository():
    """A newcomer's page: at most 150 lines, the rest in docs/. Every file or folder it names exists
    here (it once sent readers to a design file kept beside the project)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    # files it names: a path with a folder (docs/install.md), or any Markdown file (DESIGN.md)
    named = re.findall(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.[a-z]+\b|[\w.-]+\.md\b", readme)
    assert "docs/install.md" in named
    missing = [name for name in named if not (ROOT / name).exists()]
    assert not missing, f"README.md names {missing}, which are not in the repository"


def sized() -> list[Path]:
    """The modules the size rule covers: the product (dashboard/, crs/), the harness and the
    benchmarks, and the tests' helpers (round_scenarios.py, conftest.py, …); the test modules
    themselves (tests/test_*.py) are exempt."""
    helpers = [p for p in modules("tests") if not p.name.startswith("test_")]
    return [*modules("dashboard"), *modules("crs"), *modules("harness"), *modules("bench"), *helpers]


def test_no_module_is_over_max_lines():
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sized()}
    over = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}; split them by concept"


def test_the_size_rule_covers_harness_bench_and_test_helpers_not_test_modules():
    covered = {str(p.relative_to(ROOT)) for p in sized()}
    assert {"harness/faultsoak.py", "tests/round_scenarios.py", "tests/conftest.py"} <= covered
    assert any(name.startswith("bench/") for name in covered)
    assert not any(Path(name).name.startswith("test_") for name in covered)


def dashboard_imports() -> dict[str, set[str]]:
    """Each module of `dashboard/` (migrations aside) → the modules of `dashboard/` it imports.
    `from X import y` imports X.y when that is a module, else X; a package is its `__init__.py`
    (dashboard.models re-exports the models of its modules)."""
    paths = {module_name(p): p for p in modules("dashboard")}
    graph = {}
    for name, path in paths.items():
        found = set()
        for module, names in import_statements(path):
            found |= names & paths.keys() or {module}
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports a → b → … in an import graph without cycles."""

    @cache
    def chain(module: str) -> tuple[str, ...]:
        return (module, *max((chain(m) for m in sorted(graph[module])), key=len, default=()))

    return list(max((chain(m) for m in sorted(graph)), key=len))


def test_imports_inside_the_dashboard_run_one_way():
    try:
        tuple(graphlib.TopologicalSorter(dashboard_imports()).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"an import cycle: {' → '.join(reversed(exc.args[1]))}")


def test_the_longest_chain_of_imports_inside_the_dashboard_is_at_most_longest_chain():
    chain = longest_chain(dashboard_imports())
    assert len(chain) <= LONGEST_CHAIN, f"{len(chain)} modules: {' → '.join(chain)}"


def test_the_chain_check_sees_a_chain():
    graph = dashboard_imports()
    assert {"dashboard.models", "dashboard.executor", "dashboard.live.sender"} <= graph["dashboard.tasks"]
    assert "dashboard.models.cluster" in graph["dashboard.models"] and "dashboard" not in graph["dashboard.tasks"]
    assert longest_chain({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == ["a", "b", "c"]
