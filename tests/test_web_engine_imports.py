"""Which dashboard modules may call the engine, and which of its modules (the wave's rule: an
allowlist, module → the crs modules it may import). Adding to ALLOWED is a reviewed change: a
decision belongs in crs, and a dashboard module that starts deciding shows here first."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ALLOWED: dict[str, set[str]] = {
    "dashboard.api.connections": {"crs.sources"},
    "dashboard.api.parsers": {"crs.fields"},
    "dashboard.api.serializers": {"crs.happiness", "crs.model"},
    "dashboard.approvals": {"crs.errors", "crs.sources.base"},
    "dashboard.automation": {"crs.automation", "crs.coexistence", "crs.windows"},
    "dashboard.capacity": {"crs.capacity", "crs.errors", "crs.fits", "crs.model", "crs.power"},
    "dashboard.connections": {"crs.sources"},
    "dashboard.crypt": {"crs.sources", "crs.sources.proxmox"},
    "dashboard.executor": {"crs.claims", "crs.errors", "crs.locks", "crs.sources.base", "crs.starts"},
    "dashboard.forecasts": {"crs.forecast", "crs.model"},
    "dashboard.ha": {"crs.errors", "crs.model", "crs.rules", "crs.snapshot"},
    "dashboard.history": {"crs.forecast", "crs.model", "crs.usage"},
    "dashboard.machine": {"crs.machine"},
    "dashboard.maintenance": {
        "crs.errors",
        "crs.model",
        "crs.owed",
        "crs.precedence",
        "crs.sources.base",
        "crs.sources.proxmox",
    },
    "dashboard.management.commands.export_snapshot": {"crs.snapshot"},
    "dashboard.models.cluster": {"crs.guards", "crs.model", "crs.snapshot", "crs.sources"},
    "dashboard.models.migration": {"crs.decision", "crs.migration", "crs.model", "crs.precedence", "crs.starts"},
    "dashboard.models.policy": {"crs.fits", "crs.model"},
    "dashboard.models.validators": {"crs.model", "crs.sources"},
    "dashboard.n1": {"crs.model", "crs.n1", "crs.n1_batch", "crs.rolling"},
    "dashboard.notify": {"crs.episodes"},
    "dashboard.outcomes": {"crs.paid", "crs.snapshot", "crs.usage"},
    "dashboard.pages.guests": {"crs.fits", "crs.model", "crs.usage"},
    "dashboard.pages.snapshots": {"crs.balancer", "crs.errors", "crs.fields", "crs.model", "crs.snapshot"},
    "dashboard.pages.views": {"crs.model"},
    "dashboard.pages.whatif": {"crs.errors"},
    "dashboard.plans": {"crs.containers", "crs.decision", "crs.model", "crs.precedence", "crs.priority"},
    "dashboard.power": {"crs.errors", "crs.machine", "crs.power", "crs.sources.base", "crs.sources.proxmox"},
    "dashboard.pressure": {"crs.happiness", "crs.locks"},
    "dashboard.rolling": {"crs.model", "crs.rolling", "crs.sources.proxmox"},
    "dashboard.rounds": {
        "crs.decision",
        "crs.forecast",
        "crs.happiness",
        "crs.model",
        "crs.owed",
        "crs.planned",
        "crs.round",
        "crs.trail",
        "crs.usage",
    },
    "dashboard.tasks": {"crs.errors", "crs.model", "crs.snapshot", "crs.sources.base"},
    "dashboard.violations": {"crs.model", "crs.owed"},
    "dashboard.whatif": {"crs.balancer", "crs.errors", "crs.model", "crs.replay", "crs.usage"},
}


def engine_imports(path: Path) -> set[str]:
    """The crs modules `path` imports, at the top or inside a function (`from crs import x` → crs.x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "crs"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "crs":
                found |= {f"crs.{a.name}" for a in node.names}
            elif node.module.split(".")[0] == "crs":
                found.add(node.module)
    return found


def dashboard_modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "dashboard").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def test_dashboard_modules_import_only_the_engine_modules_allowed_to_them() -> None:
    unlisted = {
        name: sorted(extra)
        for name, path in dashboard_modules().items()
        if (extra := engine_imports(path) - ALLOWED.get(name, set()))
    }
    assert not unlisted, (
        f"engine imports not on the allowlist (move the decision into crs, or review and list it): {unlisted}"
    )


def test_the_allowlist_names_only_modules_that_exist() -> None:
    """A module renamed or gone takes its entry with it, so the list never allows more than it shows."""
    assert not set(ALLOWED) - set(dashboard_modules())


def test_an_unlisted_import_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import crs.round\nfrom crs import claims\n\ndef f():\n    from crs.sources.base import SourceError\n"
    )
    assert engine_imports(module) == {"crs.round", "crs.claims", "crs.sources.base"}
