"""The connector's Proxmox VE 9 extras against the fake PVE: pressure stall information and the
migrate preconditions (where a VM may go, and whether it could be recovered elsewhere)."""

import math

import pytest

from crs.model import Pressure
from crs.sources import open_source
from harness.fakepve import RESPONSES, TOKEN, recorded

T0 = 1_800_000_000.0


def connect(pve, state=None, **extra):
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file} | extra
    return open_source("proxmox", config, state)


def guests(snapshot):
    return {g.sid: g for g in snapshot.guests}


def test_pve8_reports_no_pressure_and_no_preconditions(pve):
    snap = connect(pve).collect(T0)
    assert all(g.pressure is None for g in snap.guests) and all(n.pressure is None for n in snap.nodes)
    assert guests(snap)["vm:100"].allowed_nodes is None and guests(snap)["vm:100"].recoverable


def test_pve9_percent_becomes_fractions_for_vms_containers_and_nodes(pve):
    pve.guest_psi["qemu/100"] = {"pressurecpusome": 12.5, "pressurecpufull": 3.0, "pressurememorysome": 0}
    pve.guest_psi["lxc/300"] = {"pressurecpusome": "40.00", "pressureiosome": "1.50"}  # containers send strings
    rows = [
        {"time": T0 - 600, "pressurecpusome": 90.0},  # older than the 5-minute period: not counted
        {"time": T0 - 120, "pressurecpusome": 10.0, "pressurememorysome": 2.0},
        {"time": T0 - 60, "pressurecpusome": 20.0, "pressurememorysome": 4.0},
    ]
    pve.node_rrd["node2"] = rows
    snap = connect(pve).collect(T0)
    assert guests(snap)["vm:100"].pressure == Pressure(cpu_some=0.125, cpu_full=0.03, memory_some=0.0)
    assert guests(snap)["ct:300"].pressure == Pressure(cpu_some=0.40, io_some=0.015)
    assert snap.node("node2").pressure == Pressure(cpu_some=pytest.approx(0.15), memory_some=pytest.approx(0.03))
    assert snap.node("node1").pressure is None
    assert guests(snap)["ct:300"].uptime_s == 1200


def test_preconditions_narrow_where_a_vm_may_go_and_mark_it_unrecoverable(pve):
    pve.preconditions["qemu/100"] = recorded("qemu-migrate-preconditions.handwritten-go-proxmox.json")
    vm = guests(connect(pve).collect(T0))["vm:100"]
    assert vm.allowed_nodes == {"node2", "node3"}  # node3 allowed, node4 lacks local-lvm; node2 is its own
    assert "node4: storage local-lvm unavailable" in vm.pinned_reason
    assert "local disk local-lvm:vm-101-disk-0" in vm.pinned_reason and not vm.recoverable


def test_preconditions_are_asked_again_only_after_their_lifetime(pve):
    from crs.sources.pve_collect import PRECONDITIONS_TTL_S

    pve.preconditions["qemu/100"] = recorded("qemu-migrate-preconditions.handwritten-go-proxmox.json")
    cluster = connect(pve)
    cluster.collect(T0)
    asked = sum(1 for m, p, _ in pve.requests if m == "GET" and p.endswith("/migrate"))
    again = connect(pve, cluster.state())  # the state the dashboard keeps between rounds
    assert guests(again.collect(T0 + 60))["vm:100"].allowed_nodes == {"node2", "node3"}
    assert sum(1 for m, p, _ in pve.requests if m == "GET" and p.endswith("/migrate")) == asked
    again.collect(T0 + PRECONDITIONS_TTL_S + 1)
    assert sum(1 for m, p, _ in pve.requests if m == "GET" and p.endswith("/migrate")) > asked


def test_usage_is_the_mean_over_the_usage_period_from_rrddata(pve):
    """A 10-second spike in /cluster/resources does not count: the figures are the period's mean."""
    pve.entry("qemu/100").update(cpu=1.0, maxcpu=2)  # the instant: both cores busy
    pve.guest_rrd["qemu/100"] = [
        {"time": T0 - 900, "cpu": 0.9, "maxcpu": 2, "mem": 9 * 2**30},  # before the 5 minutes: not counted
        {"time": T0 - 240, "cpu": 0.10, "maxcpu": 2, "mem": 1 * 2**30},
        {"time": T0 - 60, "cpu": 0.30, "maxcpu": 2, "mem": 3 * 2**30},
    ]
    pve.node_rrd["node2"] = [
        {"time": T0 - 120, "cpu": 0.25, "maxcpu": 8, "memused": 4 * 2**30},
        {"time": T0 - 60, "cpu": 0.75, "maxcpu": 8, "memused": 6 * 2**30},
    ]
    instant = guests(connect(pve).collect(T0))["vm:100"]
    assert instant.cpu_usage == pytest.approx(2.0)  # usage_period absent: the latest value, as Proxmox
    cluster = connect(pve, usage_period=300)
    snap = cluster.collect(T0)
    vm = guests(snap)["vm:100"]
    assert vm.cpu_usage == pytest.approx(0.4) and vm.mem_usage_bytes == pytest.approx(2 * 2**30)
    assert snap.node("node2").cpu_usage == pytest.approx(4.0)
    assert snap.node("node2").mem_usage_bytes == pytest.approx(5 * 2**30)
    # a running guest whose rows carry no usage (the recorded shape) keeps its instant figures
    assert guests(snap)["ct:300"].mem_usage_bytes == pytest.approx(268435456)


def test_without_the_metrics_export_guest_rrddata_calls_are_bounded_and_not_repeated_within_a_step(pve):
    from crs.sources.pve_collect import GUEST_RRD_PER_ROUND

    pve.metrics_export = False  # a Proxmox VE before 8.3

    def asked():
        return sum(1 for m, p, _ in pve.requests if m == "GET" and p.count("/") == 4 and p.endswith("/rrddata"))

    for i in range(GUEST_RRD_PER_ROUND + 5):  # more running VMs than one collection may ask about
        vm = dict(pve.entry("qemu/100"), id=f"qemu/{500 + i}", vmid=500 + i)
        pve.resources.append(vm)
    cluster = connect(pve, usage_period=300)
    cluster.collect(T0)
    first = asked()
    assert first == GUEST_RRD_PER_ROUND
    again = connect(pve, cluster.state(), usage_period=300)
    again.collect(T0 + 10)  # the rest now, none of the first batch again within the RRD's minute
    assert asked() - first < GUEST_RRD_PER_ROUND and asked() > first


pytestmark = pytest.mark.skipif(not RESPONSES.is_dir(), reason=f"recorded PVE responses not found at {RESPONSES}")


def test_usage_comes_from_the_metrics_export_in_one_call_and_then_only_what_is_new(pve):
    """One call for every guest's and node's recent usage (Proxmox VE 8.3+), instead of a
    `rrddata` call per guest; the next collect asks only for the points after the last one."""
    pve.guest_rrd["qemu/100"] = [
        {"time": T0 - 900, "cpu": 0.9, "maxcpu": 2, "mem": 9 * 2**30},  # before the 5 minutes: not asked
        {"time": T0 - 240, "cpu": 0.10, "maxcpu": 2, "mem": 1 * 2**30},
        {"time": T0 - 60, "cpu": 0.30, "maxcpu": 2, "mem": 3 * 2**30},
    ]
    cluster = connect(pve, usage_period=300)
    vm = guests(cluster.collect(T0))["vm:100"]
    assert vm.cpu_usage == pytest.approx(0.4) and vm.mem_usage_bytes == pytest.approx(2 * 2**30)
    assert not [p for _, p, _ in pve.requests if p.endswith("/rrddata") and p.count("/") == 4]
    pve.metrics_time = T0 + 10  # a new generation: both cores busy for 10 s
    pve.entry("qemu/100").update(cpu=1.0, maxcpu=2)
    again = connect(pve, cluster.state(), usage_period=300)
    spiked = guests(again.collect(T0 + 10))["vm:100"]
    export = [p for _, path, p in pve.requests if path == "cluster/metrics/export"][-1]
    assert export["start-time"] == str(int(T0 - 60))  # only what came after the last point
    # weighted by the 70 s since the last point, with the 5-minute period as the time constant
    assert spiked.cpu_usage == pytest.approx(0.4 + (2.0 - 0.4) * (1 - math.exp(-70 / 300)), abs=1e-3)


def test_without_the_metrics_export_usage_comes_from_rrddata_and_the_export_is_asked_again_later(pve):
    from crs.sources.pve_reads import EXPORT_RETRY_S

    pve.metrics_export = False
    pve.guest_rrd["qemu/100"] = [{"time": T0 - 60, "cpu": 0.30, "maxcpu": 2, "mem": 3 * 2**30}]
    cluster = connect(pve, usage_period=300)
    assert guests(cluster.collect(T0))["vm:100"].cpu_usage == pytest.approx(0.6)
    exports = lambda: sum(1 for _, p, _ in pve.requests if p == "cluster/metrics/export")  # noqa: E731
    connect(pve, cluster.state(), usage_period=300).collect(T0 + 10)
    assert exports() == 1
    connect(pve, cluster.state(), usage_period=300).collect(T0 + EXPORT_RETRY_S)
    assert exports() == 2


def test_a_guest_that_stopped_has_no_usage_though_its_mean_is_still_kept(pve):
    pve.guest_rrd["qemu/100"] = [{"time": T0 - 60, "cpu": 0.30, "maxcpu": 2, "mem": 3 * 2**30}]
    cluster = connect(pve, usage_period=300)
    assert guests(cluster.collect(T0))["vm:100"].cpu_usage == pytest.approx(0.6)
    pve.entry("qemu/100")["status"] = "stopped"
    stopped = guests(connect(pve, cluster.state(), usage_period=300).collect(T0 + 10))["vm:100"]
    assert (stopped.cpu_usage, stopped.mem_usage_bytes) == (0.0, 0.0)
