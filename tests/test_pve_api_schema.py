"""The connector's requests and the fake's answers, against Proxmox VE's own API schema.

Every test on the `pve` fixture already fails on a request or answer outside the schema
(tests/conftest.py); this one drives each call the connector makes, so that a new call to a
path, method or parameter Proxmox does not have fails here even if no other test reaches it.
"""

import pytest

from crs.sources import open_source
from harness.fakepve import TOKEN, recorded
from harness.fakepve.schema import answer_errors, endpoint, request_errors

T0 = 1_800_000_000.0

# The connector's repertoire (crs/sources/proxmox.py); the README's least-privilege table names each.
CALLS = {
    ("GET", "/cluster/resources"),
    ("GET", "/cluster/options"),
    ("GET", "/cluster/metrics/export"),
    ("GET", "/cluster/ha/resources"),
    ("GET", "/cluster/ha/rules"),
    ("GET", "/cluster/ha/status/current"),
    ("GET", "/cluster/ha/status/manager_status"),
    ("GET", "/nodes/{node}/qemu"),
    ("GET", "/nodes/{node}/lxc"),
    ("GET", "/nodes/{node}/rrddata"),
    ("GET", "/nodes/{node}/qemu/{vmid}/rrddata"),
    ("GET", "/nodes/{node}/lxc/{vmid}/rrddata"),
    ("GET", "/nodes/{node}/qemu/{vmid}/migrate"),
    ("POST", "/nodes/{node}/qemu/{vmid}/migrate"),
    ("POST", "/nodes/{node}/lxc/{vmid}/migrate"),
    ("GET", "/nodes/{node}/tasks"),
    ("GET", "/nodes/{node}/tasks/{upid}/status"),
    ("GET", "/nodes/{node}/tasks/{upid}/log"),
    ("DELETE", "/nodes/{node}/tasks/{upid}"),
    ("POST", "/nodes/{node}/status"),
}


def connect(pve, **config):
    base = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file}
    return open_source("proxmox", base | config, None)


def test_every_call_the_connector_makes_is_in_the_pve_api_and_the_fakes_answers_validate(pve):
    pve.guest_psi["qemu/100"] = {"pressurecpusome": 12.5, "pressurememorysome": "0.00"}
    pve.node_rrd["node2"] = [{"time": T0 - 60, "cpu": 0.2, "memused": 2**30, "pressurecpusome": 1.5}]
    pve.guest_rrd["lxc/300"] = [{"time": T0 - 60, "cpu": 0.5, "mem": 2**28, "maxcpu": 2, "maxmem": 2**30}]
    pve.preconditions["qemu/100"] = recorded("qemu-migrate-preconditions.handwritten-go-proxmox.json")
    pve.options = {"crs": "ha=static,ha-rebalance-on-start=1", "keyboard": "en-us"}
    connect(pve, usage_period=300).collect(T0)  # usage from the metrics export
    pve.metrics_export = False  # a PVE before 8.3: from each guest's rrddata
    cluster = connect(pve, usage_period=300)
    cluster.collect(T0)
    for sid, target in (("vm:100", "node3"), ("ct:300", "node1"), ("vm:104", "node1")):
        task = cluster.migrate(sid, target, T0)
        for i in range(10):
            if cluster.task_status(task, T0 + i).state != "running":
                break
    cluster.abort(cluster.migrate("vm:100", "node1", T0 + 20), T0 + 21)
    cluster.shutdown("node4", T0 + 30)

    assert pve.strays == []  # and the fixture checks again after the test
    made = {(method, endpoint(path)[0]) for method, path, _ in pve.requests}
    assert made == CALLS


@pytest.mark.parametrize(
    "method, path, params, error",
    [
        ("GET", "cluster/resource", {}, "GET /cluster/resource: no such path in the PVE API"),
        ("PUT", "cluster/resources", {}, "the PVE API has no PUT here"),
        ("GET", "cluster/resources", {"kind": "vm"}, "parameter 'kind' is not in the PVE API"),
        ("GET", "cluster/resources", {"type": "guest"}, "'guest' is not one of"),
        ("POST", "nodes/node1/qemu/100/migrate", {"online": "1"}, "required parameter target is missing"),
        ("POST", "nodes/node1/qemu/99/migrate", {"target": "node2"}, "parameter vmid: '99' is outside 100"),
        ("GET", "nodes/node1/rrddata", {"timeframe": "minute"}, "parameter timeframe: 'minute' is not one of"),
        ("GET", "nodes/node1/tasks", {"vmid": "x"}, "parameter vmid: 'x' is not of type integer"),
    ],
)
def test_a_request_outside_the_api_is_named(method, path, params, error):
    (found,) = request_errors(method, path, params)
    assert error in found


def test_requests_the_api_has_pass_with_values_as_the_wire_sends_them():
    assert request_errors("GET", "nodes/node1/tasks", {"vmid": "104", "since": "1", "source": "all"}) == []
    assert request_errors("POST", "nodes/node1/lxc/300/migrate", {"target": "node2", "restart": "1"}) == []
    assert request_errors("GET", "nodes/node1/tasks/UPID:node1:0001F000:10F9374C:6A000002:qmigrate:1:x:/log", {}) == []


@pytest.mark.parametrize(
    "path, data, error",
    [
        ("cluster/resources", [{"type": "qemu", "vmid": 100}], "returns[0]: required id is missing"),
        ("cluster/resources", [{"id": "qemu/1", "type": "vm"}], "returns[0]: type: 'vm' is not one of"),
        ("cluster/resources", [{"id": "node/n", "type": "node", "mem": "lots"}], "mem: 'lots' is not of type"),
        ("version", {"version": "9.0.3", "release": "9.0"}, "required repoid is missing"),
        ("nodes/node1/tasks/UPID:x/log", {"n": 1, "t": "x"}, "is not of type array"),
    ],
)
def test_an_answer_the_schema_refuses_is_named(path, data, error):
    (found,) = answer_errors("GET", path, data)
    assert error in found


def test_answers_may_carry_keys_the_schema_leaves_out_and_numbers_as_strings():
    entry = {"id": "lxc/300", "type": "lxc", "cpu": "0.0150", "mem": "268435456", "cgroup": "v2"}
    assert answer_errors("GET", "cluster/resources", [entry]) == []


@pytest.mark.parametrize(
    "name, path",
    [
        ("cluster-resources.pve-go-proxmox.json", "cluster/resources"),
        ("cluster-status.pve-go-proxmox.json", "cluster/status"),
        ("nodes.pve-go-proxmox.json", "nodes"),
        ("qemu-status-current.pve8-go-proxmox.json", "nodes/node1/qemu/100/status/current"),
        ("qemu-rrddata-hour.stopped-vm-go-proxmox.json", "nodes/node1/qemu/100/rrddata"),
        ("qemu-migrate-preconditions.handwritten-go-proxmox.json", "nodes/node1/qemu/100/migrate"),
        ("task-status-stopped.proxmoxer-tests.json", "nodes/node1/tasks/UPID:x/status"),
    ],
)
def test_answers_recorded_from_real_clusters_validate_as_the_dialect_reads_them(name, path):
    assert answer_errors("GET", path, recorded(name)) == []


def test_a_pve_7_node_status_lacks_just_what_pve_9_added():
    assert answer_errors("GET", "nodes/node1/status", recorded("node-status.pve7.4-go-proxmox.json")) == [
        "GET /nodes/{node}/status returns: required boot-info is missing",
        "GET /nodes/{node}/status returns: required current-kernel is missing",
        "GET /nodes/{node}/status returns: memory: required available is missing",
    ]
