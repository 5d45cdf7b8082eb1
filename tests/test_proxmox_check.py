"""`crs check proxmox` against the fake PVE over real HTTPS (harness/fakepve), nothing mocked."""

import json
import re
import socket
from pathlib import Path

import pytest

from crs.programs.cli import main
from crs.sources import ConfigError
from crs.sources.proxmox_check import PRIVILEGES, Target, ha_finding, missing_privileges
from harness.fakepve import TOKEN

SECRET = TOKEN.split("=", 1)[1]


def run(pve, capsys, monkeypatch, *flags, token=TOKEN, port=None):
    monkeypatch.setenv("CRS_PVE_TOKEN", token)
    code = main(["check", "proxmox", "--host", "127.0.0.1", "--port", str(port or pve.port), *flags])
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    return code, out.out


def lines(out):
    """{topic: (ok, text)} of the printed report."""
    found = re.findall(r"^  (ok|FAIL) +(\w+) +(.*)$", out, re.MULTILINE)
    return {topic: (verdict == "ok", text) for verdict, topic, text in found}


def test_a_healthy_cluster_with_its_ca_bundle_is_all_well(pve, capsys, monkeypatch):
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file)
    report = lines(out)
    assert code == 0 and all(ok for ok, _ in report.values()), out
    assert report["tls"][1] == f"verified against the CA bundle {pve.ca_file}; SHA-256 {pve.fingerprint}"
    assert report["version"][1] == "Proxmox VE 9.0.3 (release 9.0, repoid 025864202ebb6109)"
    assert report["cluster"][1] == "4 nodes (4 online), 5 guests (4 VMs, 1 container)"
    assert report["ha"][1].startswith("quorate; manager node1 (active, ")
    assert report["ha"][1].endswith("; 1 HA resource")
    assert report["crs"][1] == "crs not set (Proxmox's defaults: ha=basic); Proxmox's own auto-rebalance is off"
    assert report["privileges"][1] == "the token has every privilege the scheduler uses"
    assert out.rstrip().endswith("all well")


def test_the_connection_comes_from_the_connector_s_environment_variables(pve, capsys, monkeypatch):
    monkeypatch.setenv("CRS_PVE_TOKEN", TOKEN)
    for name, value in (("HOST", "127.0.0.1"), ("PORT", str(pve.port)), ("VERIFY_SSL", pve.ca_file)):
        monkeypatch.setenv(f"CRS_PVE_{name}", value)
    assert main(["check", "proxmox"]) == 0
    assert lines(capsys.readouterr().out)["tls"][1].startswith(f"verified against the CA bundle {pve.ca_file}")
    assert main(["check", "proxmox", "--insecure"]) == 0  # a flag wins over the environment
    assert lines(capsys.readouterr().out)["tls"][1].startswith("NOT verified (insecure, chosen explicitly)")


def test_a_pinned_fingerprint_is_accepted_in_any_spelling(pve, capsys, monkeypatch):
    spelled = pve.fingerprint.replace(":", "").lower()
    code, out = run(pve, capsys, monkeypatch, "--fingerprint", spelled)
    assert code == 0
    assert lines(out)["tls"] == (True, f"matches the pinned fingerprint; SHA-256 {pve.fingerprint}")


def test_a_changed_certificate_is_refused_naming_both_fingerprints_and_the_token_is_not_sent(pve, capsys, monkeypatch):
    old = ":".join(["AB"] * 32)
    code, out = run(pve, capsys, monkeypatch, "--fingerprint", old)
    ok, text = lines(out)["tls"]
    assert (code, ok) == (1, False)
    assert (
        text
        == f"certificate changed: pinned {old}, the server presents {pve.fingerprint}; refused, the token was not sent"
    )
    assert pve.requests == []
    assert "version" not in lines(out)


def test_a_self_signed_certificate_fails_the_system_cas_and_its_fingerprint_is_offered(pve, capsys, monkeypatch):
    code, out = run(pve, capsys, monkeypatch)
    ok, text = lines(out)["tls"]
    assert (code, ok) == (1, False)
    assert text.startswith("certificate not trusted by the system's CAs (self-signed certificate")
    assert f"Its SHA-256 fingerprint is {pve.fingerprint}: if it is the one the node shows" in text
    assert pve.requests == []


def test_insecure_is_possible_only_as_a_labelled_choice(pve, capsys, monkeypatch):
    code, out = run(pve, capsys, monkeypatch, "--insecure")
    assert code == 0
    assert lines(out)["tls"][1].startswith("NOT verified (insecure, chosen explicitly)")


def test_a_token_without_privileges_names_what_stops_working(pve, capsys, monkeypatch):
    pve.permissions = {"/": {"Sys.Audit": 1}, "/vms": {"VM.Audit": 1}}
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file, "--json")
    report = json.loads(out)
    assert (code, report["ok"]) == (1, False)
    (privileges,) = [f for f in report["findings"] if f["topic"] == "privileges"]
    assert privileges["ok"] is False
    assert privileges["details"]["missing"] == [
        {"privilege": "Sys.Audit", "path": "/nodes", "optional": False},
        {"privilege": "VM.Migrate", "path": "/vms", "optional": False},
        {"privilege": "Sys.Modify", "path": "/nodes", "optional": True},
        {"privilege": "Sys.PowerMgmt", "path": "/nodes", "optional": True},
    ]
    assert "VM.Migrate on /vms: without it no migration can start" in privileges["text"]
    assert report["fingerprint"] == pve.fingerprint


def test_only_optional_privileges_missing_is_still_all_well(pve, capsys, monkeypatch):
    pve.permissions = {"/": {"Sys.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/vms": {"VM.Audit": 1, "VM.Migrate": 1}}
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file)
    assert code == 0
    assert lines(out)["privileges"][1].startswith("missing Sys.Modify on /nodes (optional): without it the emergency")


def test_without_sys_audit_the_token_sees_no_node_and_no_ha_and_says_so(pve, capsys, monkeypatch):
    pve.permissions = {"/vms": {"VM.Audit": 1, "VM.Migrate": 1}}
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file)
    report = lines(out)
    assert code == 1
    assert report["privileges"][1].startswith("missing Sys.Audit on /: without it HA resources, HA rules")
    assert report["cluster"] == (
        False,
        "0 nodes (0 online), 5 guests (4 VMs, 1 container): no node visible (see privileges)",
    )
    refused = "refused (403): the token lacks the privilege for it"
    assert report["ha"] == (False, f"GET /cluster/ha/status/current {refused}")
    assert report["crs"] == (False, f"GET /cluster/options {refused}")


def test_a_wrong_token_is_refused_by_name_without_its_secret(pve, capsys, monkeypatch):
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file, token="root@pam!crs=wrong")
    assert code == 1
    assert lines(out)["token"] == (False, "token root@pam!crs refused (401): wrong id or secret")


def test_an_unreachable_port_says_why(pve, capsys, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file, port=closed)
    assert code == 1
    assert lines(out) == {
        "reach": (False, f"127.0.0.1:{closed} unreachable: connection refused (nothing listens on that port)")
    }


def test_proxmox_s_own_auto_rebalance_and_nodes_in_maintenance_are_reported(pve, capsys, monkeypatch):
    pve.options = {"crs": "ha=dynamic,ha-auto-rebalance=1"}
    pve.lrm_mode["node2"] = "maintenance"
    code, out = run(pve, capsys, monkeypatch, "--ca-bundle", pve.ca_file)
    report = lines(out)
    assert code == 0
    assert report["crs"][1].startswith("crs ha=dynamic,ha-auto-rebalance=1; Proxmox's own auto-rebalance is ON")
    assert report["ha"][1].endswith("; in maintenance: node2")


def test_a_malformed_fingerprint_is_refused_before_connecting(pve, capsys, monkeypatch):
    monkeypatch.setenv("CRS_PVE_TOKEN", TOKEN)
    assert main(["check", "proxmox", "--host", "127.0.0.1", "--port", str(pve.port), "--fingerprint", "AB:CD"]) == 2
    assert "fingerprint 'AB:CD': not a SHA-256 fingerprint" in capsys.readouterr().err
    assert pve.requests == []


def test_ha_without_quorum_fails_and_a_cluster_without_ha_resources_has_no_manager():
    lost = ha_finding(200, [{"id": "quorum", "type": "quorum", "node": "node1", "status": "No quorum", "quorate": 0}])
    assert (lost.ok, lost.text) == (False, "NOT quorate; no HA manager elected (no HA resources yet); 0 HA resources")


def test_a_missing_ca_bundle_is_refused_before_connecting(pve, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CRS_PVE_TOKEN", TOKEN)
    missing = str(tmp_path / "none.pem")
    assert main(["check", "proxmox", "--host", "127.0.0.1", "--port", str(pve.port), "--ca-bundle", missing]) == 2
    assert f"--ca-bundle {missing}: no such file" in capsys.readouterr().err
    assert pve.requests == []


def test_a_path_the_permission_map_leaves_out_holds_nothing():
    """An ACL on / without propagation gives /vms nothing; PVE then leaves /vms out of the map."""
    everything = {p.name: 1 for p in PRIVILEGES}
    assert missing_privileges({"/": everything, "/nodes": everything, "/vms": everything}) == []
    assert [(p.name, p.path) for p in missing_privileges({"/": everything, "/nodes": everything})] == [
        ("VM.Audit", "/vms"),
        ("VM.Migrate", "/vms"),
    ]


def test_the_documented_least_privilege_table_is_the_one_the_check_uses():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "proxmox.md").read_text()
    table = guide.split("## The API token's least-privilege role", 1)[1].split("\n\n")[2]
    rows = re.findall(r"^\| `([\w.]+)`( \(optional\))? \| `([/\w]+)` \|", table, re.MULTILINE)
    assert {(name, path, bool(optional)) for name, optional, path in rows} == {
        (p.name, p.path, p.optional) for p in PRIVILEGES
    }


@pytest.mark.parametrize(
    "tls, extra, message",
    [
        ("none", {}, "tls 'none': not one of system, ca-bundle, fingerprint, insecure"),
        ("fingerprint", {}, "tls 'fingerprint' goes with a fingerprint"),
        ("system", {"ca_bundle": "ca.pem"}, "tls 'system' goes with a fingerprint or a CA bundle of its own"),
    ],
)
def test_a_target_s_tls_choice_is_one_and_complete(tls, extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Target("pve1", 8006, "crs@pve", "crs", "secret", tls=tls, **extra)
