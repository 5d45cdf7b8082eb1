"""`python -m crs export`: a cluster's snapshot as a file an admin can plan on or import."""

import json

from crs import snapshot as contract
from crs.programs.cli import main


def test_exported_simulator_snapshot_can_be_planned(tmp_path, capsys):
    path = tmp_path / "demo.json"
    assert main(["export", "simulator", "--settings", '{"mode": "dynamic"}', "-o", str(path)]) == 0
    snap = contract.load_file(path)
    assert len(snap.nodes) == 12 and len(snap.guests) == 416 and snap.settings.mode == "dynamic"
    assert main(["plan", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decision"] == "migrate"


def test_export_writes_to_stdout_with_config_from_a_file(tmp_path, capsys):
    config = tmp_path / "sim.json"
    config.write_text('{"nodes": 4, "hot_nodes": 1}')
    assert main(["export", "simulator", "--config", f"@{config}"]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == ["node01", "node02", "node03", "node04"]


def test_export_reexports_a_what_if_snapshot_unchanged(tmp_path, capsys):
    main(["export", "simulator", "-o", str(tmp_path / "a.json")])
    assert main(["export", "snapshot", "--config", json.dumps({"path": str(tmp_path / "a.json")})]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((tmp_path / "a.json").read_text())


def test_export_refuses_bad_config_naming_the_key(capsys):
    assert main(["export", "simulator", "--config", '{"nodes": "x"}']) == 2
    assert "simulator.nodes: 'x' is not a whole number 2..500" in capsys.readouterr().err
    assert main(["export", "proxmox", "--config", "{"]) == 2
    assert "--config: not JSON" in capsys.readouterr().err
