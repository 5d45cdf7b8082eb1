"""Proxmox's own HA-manager regression tests, converted (tests/fixtures/proxmox), replayed
through the engine: every placement and every balancing migration must match."""

import pytest
from proxmox_replay import fixture_paths, load, run_placement, run_rebalance

PATHS = fixture_paths()
REBALANCE = [p for p in PATHS if load(p)["event"]["type"] == "auto_rebalance_rounds"]
PLACEMENT = [p for p in PATHS if p not in REBALANCE]


def test_all_92_fixtures_are_replayed():
    """33 of the first wave, 59 converted from pve-ha-manager's rule, group, shutdown, recovery,
    maintenance and command tests (tests/fixtures/README.md lists them and the ones left out)."""
    assert len(PATHS) == 92


@pytest.mark.parametrize("path", PLACEMENT, ids=lambda p: p.stem)
def test_placements_match_proxmox(path):
    fixture = load(path)
    manager, checks = run_placement(fixture)
    for i, (expected, got) in enumerate(checks):
        assert {sid: got.get(sid) for sid in expected} == expected, f"step {i}"
    wanted = [
        (d["sid"], d["action"], d["target"]) for d in fixture["expected_decisions"] if d["action"] != "recover-failed"
    ]
    logged = [d for d in manager.decisions if d[1] != "recover-failed"]
    assert logged == wanted


@pytest.mark.parametrize("scale", ["raw", "normalized"])
@pytest.mark.parametrize("path", REBALANCE, ids=lambda p: p.stem)
def test_balancing_rounds_match_proxmox(path, scale):
    fixture = load(path)
    manager = run_rebalance(fixture, scale)
    key = "raw_cv" if scale == "raw" else "normalized_cv"
    assert manager.migrations == fixture["expected_migrations"][key]["migrations"]
    final = fixture["expected"] if scale == "raw" else fixture["expected_normalized"]
    assert manager.placement() == final
