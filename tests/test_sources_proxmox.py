"""The Proxmox VE connector against a fake PVE over real HTTPS, through proxmoxer (nothing mocked)."""

import json
import math

import pytest

from crs.sources import ConfigError, SourceError, open_source
from crs.sources.proxmox import config_from_env, parse_config
from harness.fakepve import TOKEN

T0 = 1_800_000_000.0


def connect(pve, state=None, **config):
    base = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file}
    return open_source("proxmox", base | config, state)


def guests(snapshot):
    return {g.sid: g for g in snapshot.guests}


def finish(cluster, task, now=T0, polls=10):
    """Poll as the dashboard does until the task ends; returns the last status."""
    for i in range(polls):
        status = cluster.task_status(task, now + i)
        if status.state != "running":
            return status
    return status


# -- collect --------------------------------------------------------------------------


def test_nodes_have_recorded_sizes_and_usage_in_cores_and_bytes(pve):
    snap = connect(pve).collect(T0)
    node2 = snap.node("node2")
    assert [n.name for n in snap.nodes] == ["node3", "node2", "node1", "node4"]
    assert (node2.cpus, node2.memory_bytes, node2.online) == (12, 33567911936, True)
    assert node2.cpu_usage == pytest.approx(0.00365387809333998 * 12)
    assert node2.mem_usage_bytes == 8127873024


def test_guest_usage_is_cpu_fraction_times_maxcpu(pve):
    vm = guests(connect(pve).collect(T0))["vm:100"]
    assert (vm.node, vm.state, vm.cores, vm.memory_bytes) == ("node2", "started", 1, 1073741824)
    assert vm.cpu_usage == pytest.approx(0.0249060195469461)
    assert vm.mem_usage_bytes == 842551296


def test_templates_are_skipped_and_stopped_guests_carry_no_usage(pve):
    snap = guests(connect(pve).collect(T0))
    assert "vm:101" not in snap  # the recorded template "leap154"
    assert (snap["vm:102"].state, snap["vm:102"].cpu_usage, snap["vm:102"].mem_usage_bytes) == ("stopped", 0, 0)


def test_stopped_guest_missing_fields_gets_proxmox_defaults(pve):
    for key in ("cpu", "mem", "maxcpu", "maxmem"):
        del pve.entry("qemu/200")[key]
    vm = guests(connect(pve).collect(T0))["vm:200"]
    assert (vm.state, vm.cores, vm.memory_bytes, vm.cpu_usage) == ("stopped", 1, 512 * 2**20, 0)


def test_container_numbers_sent_as_strings_are_read(pve):
    ct = guests(connect(pve).collect(T0))["ct:300"]
    assert ct.cpu_usage == pytest.approx(0.015 * 2)
    assert ct.mem_usage_bytes == 268435456


def test_ha_resources_and_rules_come_from_the_ha_manager(pve):
    snap = connect(pve, guests="ha").collect(T0)
    assert {g.sid for g in snap.guests if g.ha} == {"vm:104"}
    (rule,) = snap.rules
    assert (rule.id, rule.resources, rule.nodes, rule.strict) == (
        "db-prefers-node3",
        ("vm:104",),
        (("node3", 2), ("node1", 1)),
        False,
    )


def test_every_guest_is_movable_by_default(pve):
    assert all(g.ha for g in connect(pve).collect(T0).guests)


def test_cluster_without_ha_rules_endpoint_collects_without_rules(pve):
    pve.rules = None  # PVE 8: GET /cluster/ha/rules answers 501
    assert connect(pve).collect(T0).rules == ()


def test_node_in_ha_maintenance_is_marked(pve):
    pve.node_status["node4"] = "maintenance"
    assert connect(pve).collect(T0).node("node4").maintenance


def test_offline_node_without_sizes_is_left_out_with_its_guests(pve):
    node1 = pve.entry("node/node1")
    for key in ("cpu", "maxcpu", "mem", "maxmem", "uptime", "disk", "maxdisk"):
        del node1[key]
    node1["status"] = "offline"
    for vmid in (102, 200):
        pve.entry(f"qemu/{vmid}")["status"] = "unknown"
    snap = connect(pve).collect(T0)
    assert "node1" not in [n.name for n in snap.nodes]
    assert not {"vm:102", "vm:200"} & set(guests(snap))


def test_offline_node_that_reports_sizes_is_kept_offline(pve):
    pve.entry("node/node4")["status"] = "offline"
    assert connect(pve).collect(T0).node("node4").online is False


def test_a_node_s_uptime_is_collected_and_a_reboot_shows_as_a_smaller_one(pve):
    cluster = connect(pve)
    assert cluster.collect(T0).node("node2").uptime_s == 874373  # the recorded capture's
    pve.power_off("node2")
    assert "node2" not in [n.name for n in cluster.collect(T0 + 10).nodes]  # down: no sizes, left out
    pve.boot("node2", uptime=42)
    back = cluster.collect(T0 + 60).node("node2")
    assert (back.online, back.uptime_s, back.cpus) == (True, 42, 12)


@pytest.mark.parametrize(
    "entry, key, value, message",
    [
        ("qemu/100", "cpu", math.nan, r"qemu/100.cpu: nan is not a finite number"),
        ("qemu/100", "mem", -5, r"qemu/100.mem: -5 is negative"),
        ("node/node2", "maxmem", "lots", r"node/node2.maxmem: 'lots' is not a number"),
        ("qemu/100", "node", "node9", r"qemu/100.node: 'node9' is not a node of this cluster"),
    ],
)
def test_bad_data_refuses_the_collection_naming_the_entry(pve, entry, key, value, message):
    pve.entry(entry)[key] = value
    with pytest.raises(SourceError, match=message):
        connect(pve).collect(T0)
    pve.strays.clear()  # off the schema on purpose: the connector's guard is under test, not the fake


def test_wrong_token_is_a_clear_error(pve):
    with pytest.raises(SourceError, match="GET /cluster/resources: Proxmox answered 401"):
        connect(pve, token=TOKEN + "x").collect(T0)


def test_tls_is_verified_by_default(pve):
    base = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN}
    with pytest.raises(SourceError, match="TLS verification of 127.0.0.1:.* failed"):
        open_source("proxmox", base, None).collect(T0)
    assert pve.requests == []


def test_a_pinned_certificate_is_trusted_without_a_ca(pve):
    spelled = pve.fingerprint.replace(":", "").lower()
    snapshot = connect(pve, verify_ssl=True, fingerprint=spelled).collect(T0)
    assert len(snapshot.nodes) == 4


def test_a_changed_certificate_is_refused_naming_both_fingerprints_before_the_token_is_sent(pve):
    old = ":".join(["AB"] * 32)
    with pytest.raises(SourceError) as refused:
        connect(pve, verify_ssl=True, fingerprint=old).collect(T0)
    assert str(refused.value) == (
        f"GET /cluster/resources: the certificate of 127.0.0.1:{pve.port} changed: pinned {old}, "
        f"the server presents {pve.fingerprint}; refused, the token was not sent"
    )
    assert pve.requests == []


def test_unreachable_cluster_is_a_clear_error(pve):
    pve.stop()
    with pytest.raises(SourceError, match="cannot reach 127.0.0.1"):
        connect(pve, timeout_s=2).collect(T0)


# -- migrate ----------------------------------------------------------------------


def test_vm_live_migrates_and_moves_when_the_task_ends(pve):
    cluster = connect(pve)
    task = cluster.migrate("vm:100", "node3", T0)
    assert pve.requests[-1] == ("POST", "nodes/node2/qemu/100/migrate", {"target": "node3", "online": "1"})

    first = cluster.task_status(task, T0 + 1)
    assert first.state == "running" and 0 < first.progress < 1
    vm = guests(cluster.collect(T0 + 1))["vm:100"]
    assert (vm.node, vm.state, vm.target) == ("node2", "migrate", "node3")

    assert finish(cluster, task, T0 + 2) == cluster.task_status(task, T0 + 20)
    assert cluster.task_status(task, T0 + 20).state == "done"
    vm = guests(cluster.collect(T0 + 20))["vm:100"]
    assert (vm.node, vm.state, vm.target) == ("node3", "started", None)


def test_aborting_a_migration_stops_its_task_and_the_vm_stays(pve):
    cluster = connect(pve)
    task = cluster.migrate("vm:100", "node3", T0)
    cluster.abort(task, T0 + 1)  # the emergency stop
    assert pve.requests[-1] == ("DELETE", f"nodes/node2/tasks/{task}", {})
    status = cluster.task_status(task, T0 + 2)
    assert (status.state, status.reason) == ("failed", "interrupted by signal")
    vm = guests(cluster.collect(T0 + 3))["vm:100"]
    assert (vm.node, vm.state, vm.target) == ("node2", "started", None)


def test_stopped_vm_migrates_offline(pve):
    connect(pve).migrate("vm:102", "node2", T0)
    assert pve.requests[-1][2] == {"target": "node2", "online": "0"}


def test_running_container_migrates_with_restart(pve):
    cluster = connect(pve)
    task = cluster.migrate("ct:300", "node1", T0)
    assert pve.requests[-1] == ("POST", "nodes/node4/lxc/300/migrate", {"target": "node1", "restart": "1"})
    assert finish(cluster, task).state == "done"
    assert guests(cluster.collect(T0 + 20))["ct:300"].node == "node1"


def test_ha_guest_migration_is_followed_from_hamigrate_to_the_real_qmigrate(pve):
    cluster = connect(pve)
    task = cluster.migrate("vm:104", "node1", T0)
    assert ":hamigrate:104:" in task
    waiting = cluster.task_status(task, T0 + 1)  # the HA manager has not started it yet
    assert (waiting.state, waiting.progress) == ("running", 0.0)
    moving = cluster.task_status(task, T0 + 2)
    assert moving.state == "running" and moving.progress > 0
    vm = guests(cluster.collect(T0 + 2))["vm:104"]
    assert (vm.node, vm.state, vm.target) == ("node3", "migrate", "node1")
    assert finish(cluster, task, T0 + 3).state == "done"
    assert guests(cluster.collect(T0 + 10))["vm:104"].node == "node1"


def test_failed_task_is_a_failed_migration_with_its_exit_status(pve):
    pve.fail_next = "migration aborted (duration 00:00:03): internal error"
    cluster = connect(pve)
    status = finish(cluster, cluster.migrate("vm:100", "node3", T0))
    assert (status.state, status.reason) == ("failed", "migration aborted (duration 00:00:03): internal error")
    assert guests(cluster.collect(T0 + 20))["vm:100"].node == "node2"


def test_ha_request_the_ha_manager_never_acts_on_fails_after_a_while(pve):
    pve.ha_starts_migration = False
    cluster = connect(pve)
    task = cluster.migrate("vm:104", "node1", T0)
    assert cluster.task_status(task, T0 + 10).state == "running"
    status = cluster.task_status(task, T0 + 200)
    assert (status.state, status.reason) == ("failed", "the HA manager started no migration within 120 s")


def test_a_migration_is_followed_by_another_worker_from_the_saved_state(pve):
    cluster = connect(pve)
    task = cluster.migrate("vm:104", "node1", T0)
    cluster.task_status(task, T0 + 1)
    cluster.task_status(task, T0 + 2)  # now following the qmigrate
    resumed = connect(pve, json.loads(json.dumps(cluster.state())))
    vm = guests(resumed.collect(T0 + 3))["vm:104"]
    assert vm.state == "migrate"
    assert finish(resumed, task, T0 + 3).state == "done"


def test_refused_migration_names_the_reason(pve):
    with pytest.raises(SourceError, match="no such cluster node 'node9'"):
        connect(pve).migrate("vm:100", "node9", T0)
    with pytest.raises(SourceError, match="vm:999 is not a guest of this cluster"):
        connect(pve).migrate("vm:999", "node1", T0)


def test_a_guest_s_lock_is_collected_and_proxmox_refuses_to_migrate_it(pve):
    pve.entry("qemu/100")["lock"] = "backup"  # vzdump holds it
    pve.entry("lxc/300")["lock"] = "snapshot"
    cluster = connect(pve)
    collected = guests(cluster.collect(T0))
    assert (collected["vm:100"].lock, collected["ct:300"].lock, collected["vm:104"].lock) == ("backup", "snapshot", "")
    with pytest.raises(SourceError, match=r"Proxmox answered 500 .*VM is locked \(backup\)"):
        cluster.migrate("vm:100", "node3", T0)  # qemu-server refuses before it starts a task
    status = finish(cluster, cluster.migrate("ct:300", "node1", T0))  # pve-container fails the task
    assert (status.state, status.reason) == ("failed", "CT is locked (snapshot)")
    assert guests(cluster.collect(T0 + 20))["ct:300"].node == "node4"


def test_a_migration_s_own_lock_is_no_hold(pve):
    pve.entry("qemu/100")["lock"] = "migrate"  # a migration started elsewhere (not followed here)
    vm = guests(connect(pve).collect(T0))["vm:100"]
    assert (vm.state, vm.lock, vm.locked) == ("started", "", False)


# -- configuration ------------------------------------------------------------------


def test_token_as_proxmox_shows_it_is_split_and_its_secret_stays_out_of_repr():
    config = parse_config({"host": "pve.lab", "token": "crs@pve!balancer=5e1f-secret"})
    assert (config.user, config.token_name, config.token_value) == ("crs@pve", "balancer", "5e1f-secret")
    assert "5e1f-secret" not in repr(config)
    assert config.verify_ssl is True and config.port == 8006


def test_environment_supplies_connection_settings():
    env = {"CRS_PVE_HOST": "pve.lab", "CRS_PVE_TOKEN": "crs@pve!balancer=s3cret", "CRS_PVE_VERIFY_SSL": "false"}
    assert config_from_env(env) == {"host": "pve.lab", "token": "crs@pve!balancer=s3cret", "verify_ssl": False}


@pytest.mark.parametrize(
    "config, message",
    [
        ({"token": TOKEN}, r"proxmox.host: missing"),
        ({"host": "pve", "token": "secret"}, r"proxmox.token: not of the form USER@REALM!TOKENID=SECRET"),
        ({"host": "pve", "user": "root@pam", "token_name": "crs"}, r"proxmox.token_value: missing"),
        ({"host": "pve", "token": TOKEN, "port": 0}, r"proxmox.port: 0 is not a whole number 1..65535"),
        ({"host": "pve", "token": TOKEN, "guests": "some"}, r"proxmox.guests: 'some' is not one of all, ha"),
        ({"host": "pve", "token": TOKEN, "verify": False}, r"proxmox.verify: unknown key; allowed: cluster"),
        ({"host": "pve", "token": TOKEN, "fingerprint": "AB:CD"}, r"fingerprint 'AB:CD': not a SHA-256 fingerprint"),
        (
            {"host": "pve", "token": TOKEN, "fingerprint": "AB" * 32, "verify_ssl": False},
            r"proxmox.fingerprint: a pinned certificate replaces verify_ssl",
        ),
    ],
)
def test_bad_config_names_the_key(config, message):
    with pytest.raises(ConfigError, match=message):
        open_source("proxmox", config, None)


def test_node_whose_lrm_reports_maintenance_mode_is_marked(pve):
    # `ha-manager crm-command node-maintenance enable node2`: the LRM switches to maintenance mode,
    # which GET /cluster/ha/status/current words "node2 (maintenance mode, <time>)"
    pve.lrm_mode["node2"] = "maintenance"
    snapshot = connect(pve).collect(T0)
    assert snapshot.node("node2").maintenance and not snapshot.node("node1").maintenance


def test_ha_resources_are_marked_as_proxmox_s_own(pve):
    snapshot = connect(pve).collect(T0)
    assert {g.sid for g in snapshot.guests if g.proxmox_ha} == {"vm:104"}


def test_maintenance_is_refused_with_the_command_to_run(pve):
    with pytest.raises(SourceError, match="ha-manager crm-command node-maintenance enable node2"):
        connect(pve).maintenance("node2", True, T0)
