"""The fake Proxmox's network options (harness/fakepve: latency_s, slow_s, silent), which the
benchmarks and the fault soak use to play a cluster over a real network, and the connector
over such a network."""

import threading
import time

import pytest
import requests

from harness.fakepve import TOKEN

AUTH = {"Authorization": f"PVEAPIToken={TOKEN}"}


def ask(pve, path="version", timeout=5.0):
    url = f"https://127.0.0.1:{pve.port}/api2/json/{path}"
    return requests.get(url, headers=AUTH, verify=pve.ca_file, timeout=timeout)


@pytest.mark.parametrize("option", ["latency_s", "slow_s"])
def test_every_answer_waits_the_delay_it_is_given(pve, option):
    setattr(pve, option, 0.25)
    started = time.monotonic()
    assert ask(pve).json()["data"]["version"] == "9.0.3"
    assert time.monotonic() - started >= 0.25


def test_a_silent_cluster_takes_the_request_and_never_answers(pve):
    pve.silent = True
    with pytest.raises(requests.exceptions.ReadTimeout):
        ask(pve, timeout=0.3)
    assert pve.requests == [] and pve.gate.peak == 1  # accepted and read, not answered


def test_requests_are_served_at_the_same_time(pve):
    pve.latency_s = 0.3
    threads = [threading.Thread(target=ask, args=(pve,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pve.gate.peak == 3 and len(pve.requests) == 3


# -- the connector over such a network ---------------------------------------------------

T0 = 1_800_000_000.0


def connect(pve, state=None, **config):
    from crs.sources import open_source

    base = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file}
    return open_source("proxmox", base | config, state)


def asked(pve, since=0):
    return sorted(path for _, path, _ in pve.requests[since:])


def test_a_collect_asks_at_once_within_its_bound_and_counts_its_calls(pve):
    from crs.sources.pve_collect import PARALLEL

    pve.latency_s = 0.05
    cluster = connect(pve, usage_period=300)
    cluster.collect(T0)
    assert 1 < pve.gate.peak <= PARALLEL
    assert cluster.calls == len(pve.requests)


def test_a_cluster_that_stops_answering_is_a_clear_error_after_the_timeout(pve):
    from crs.sources import SourceError

    pve.silent = True
    with pytest.raises(SourceError, match=r"GET /cluster/resources: 127.0.0.1:\d+ did not answer within 0.3 s"):
        connect(pve, timeout_s=0.3).collect(T0)


def test_what_changes_slowly_is_read_once_a_minute_and_kept_in_the_state(pve):
    from crs.sources.pve_reads import SLOW_READS_S

    pve.guest_psi["qemu/100"] = {"pressurecpusome": 12.5}
    pve.options = {"crs": "ha=static,ha-auto-rebalance=1"}
    first = connect(pve, usage_period=300)
    first.collect(T0)
    seen = len(pve.requests)
    again = connect(pve, first.state(), usage_period=300)  # the dashboard's next collect, in any worker
    snap = again.collect(T0 + 10)
    assert asked(pve, seen) == ["cluster/metrics/export", "cluster/resources"]
    assert {g.sid: g for g in snap.guests}["vm:100"].pressure.cpu_some == 0.125  # kept from the first read
    assert {g.sid: g for g in snap.guests}["vm:104"].proxmox_ha and again.proxmox_balancer.auto_rebalance
    seen = len(pve.requests)
    later = connect(pve, again.state())
    later.collect(T0 + 2 * SLOW_READS_S)  # every node due by now, each in its own part of the minute
    assert {"cluster/options", "cluster/ha/resources", "nodes/node1/qemu", "nodes/node4/rrddata"} <= set(
        asked(pve, seen)
    )


def test_an_ha_migration_to_a_target_not_kept_yet_reads_the_ha_state_at_once(pve):
    cluster = connect(pve)
    cluster.collect(T0)
    pve.entry("qemu/104").update(hastate="migrate", lock="migrate")
    pve.services["vm:104"] |= {"state": "migrate", "target": "node1"}
    seen = len(pve.requests)
    moving = {g.sid: g for g in connect(pve, cluster.state()).collect(T0 + 10).guests}["vm:104"]
    assert (moving.state, moving.target) == ("migrate", "node1")
    assert "cluster/ha/status/manager_status" in asked(pve, seen)


def test_a_malformed_answer_names_the_call_and_the_field(pve):
    from crs.sources import SourceError

    del pve.entry("qemu/100")["vmid"]
    with pytest.raises(SourceError, match=r"cluster/resources qemu/100.vmid: missing"):
        connect(pve).collect(T0)
    pve.strays.clear()  # off the schema on purpose: the connector's guard is under test, not the fake
