"""The simulated cluster: what a demo user and `crs replay` rely on."""

import gzip
import json

import pytest

from crs import snapshot as contract
from crs.sources import ConfigError, SourceError, open_source
from crs.sources import trace as traces

T0 = 1_800_000_000.0  # any Unix time; the simulator starts its trace clock at the first call
GIB = 2**30


def sim(**config):
    return open_source("simulator", config, None)


def by_sid(snapshot):
    return {g.sid: g for g in snapshot.guests}


def test_default_cluster_is_twelve_mixed_nodes_carrying_every_trace_vm():
    snap = sim().collect(T0)
    assert [n.name for n in snap.nodes] == [f"node{i:02d}" for i in range(1, 13)]
    assert len({(n.cpus, n.memory_bytes) for n in snap.nodes}) == 3
    assert len(snap.guests) == 416
    assert all(g.sid.startswith("vm:") and g.state == "started" for g in snap.guests)


def test_start_crowds_most_vms_onto_three_nodes():
    snap = sim().collect(T0)
    per_node = sorted((sum(g.node == n.name for g in snap.guests) for n in snap.nodes), reverse=True)
    assert sum(per_node[:3]) >= 0.85 * 416


def test_usage_is_the_trace_sample_of_the_moment():
    # vm:1's first two samples in the trace: 7.200 % and 6.767 % of 2 cores, 704641 KB and 469761 KB
    cluster = sim(round_interval_s=10)
    first, second = cluster.collect(T0), cluster.collect(T0 + 10)
    assert by_sid(first)["vm:1"].cpu_usage == pytest.approx(0.144)
    assert by_sid(first)["vm:1"].mem_usage_bytes == 704641 * 1024
    assert by_sid(second)["vm:1"].cpu_usage == pytest.approx(0.13534)
    assert by_sid(first)["vm:1"].cores == 2 and by_sid(first)["vm:1"].memory_bytes == 8388608 * 1024


def test_seconds_per_sample_sets_the_acceleration_and_usage_moves_in_between():
    cluster = sim(round_interval_s=10, seconds_per_sample=60)
    cluster.collect(T0)
    assert by_sid(cluster.collect(T0 + 30))["vm:1"].cpu_usage == pytest.approx((0.144 + 0.13534) / 2)
    assert by_sid(cluster.collect(T0 + 60))["vm:1"].cpu_usage == pytest.approx(0.13534)
    assert by_sid(cluster.collect(T0 + 60))["vm:1"].mem_usage_bytes == 469761 * 1024  # on a sample: exactly it


def test_trace_day_loops():
    cluster = sim(round_interval_s=10)
    first_day, second_day = cluster.collect(T0), cluster.collect(T0 + 288 * 10)
    assert (first_day.nodes, first_day.guests) == (second_day.nodes, second_day.guests)


def test_node_usage_is_the_sum_of_its_guests():
    snap = sim().collect(T0)
    node = snap.nodes[0]
    guests = [g for g in snap.guests if g.node == node.name]
    assert node.cpu_usage == pytest.approx(sum(g.cpu_usage for g in guests))
    assert node.mem_usage_bytes == pytest.approx(sum(g.mem_usage_bytes for g in guests))


def test_an_aborted_migration_fails_and_leaves_its_guest_where_it_was():
    cluster = sim(migration_mib_s=1024)
    before = by_sid(cluster.collect(T0))["vm:1"]
    task = cluster.migrate("vm:1", "node12" if before.node != "node12" else "node11", T0)
    cluster.abort(task, T0 + 2)  # the emergency stop
    status = cluster.task_status(task, T0 + 20)
    assert (status.state, status.reason) == ("failed", "migration aborted: emergency stop")
    after = by_sid(cluster.collect(T0 + 20))["vm:1"]
    assert (after.node, after.state, after.target) == (before.node, "started", None)


def test_guest_moves_only_when_its_migration_finishes_and_loads_both_nodes_meanwhile():
    cluster = sim(migration_mib_s=1024)
    before = by_sid(cluster.collect(T0))["vm:1"]  # 8 GiB configured: 8 s at 1 GiB/s
    target = "node12" if before.node != "node12" else "node11"
    task = cluster.migrate("vm:1", target, T0)

    during = cluster.collect(T0 + 4)
    guest = by_sid(during)["vm:1"]
    assert (guest.node, guest.state, guest.target) == (before.node, "migrate", target)
    on_target = [g for g in during.guests if target in (g.node, g.target)]
    assert during.node(target).cpu_usage == pytest.approx(sum(g.cpu_usage for g in on_target))
    assert guest in on_target
    status = cluster.task_status(task, T0 + 4)
    assert status.state == "running" and status.progress == pytest.approx(0.5)

    after = by_sid(cluster.collect(T0 + 8))["vm:1"]
    assert (after.node, after.state, after.target) == (target, "started", None)
    assert cluster.task_status(task, T0 + 8).state == "done"
    assert cluster.task_status(task, T0 + 8).progress == 1.0


def test_migration_time_is_proportional_to_guest_memory():
    cluster = sim(migration_mib_s=512)
    snap = cluster.collect(T0)
    small, large = by_sid(snap)["vm:3"], by_sid(snap)["vm:1"]  # 0.67 GiB and 8 GiB configured
    tasks = [cluster.migrate(g.sid, "node12" if g.node != "node12" else "node11", T0) for g in (small, large)]
    seconds = large.memory_bytes / (512 * 2**20)
    assert cluster.task_status(tasks[1], T0 + seconds / 4).progress == pytest.approx(0.25)
    assert cluster.task_status(tasks[1], T0 + seconds - 0.01).state == "running"
    assert cluster.task_status(tasks[0], T0 + seconds * small.memory_bytes / large.memory_bytes + 1).state == "done"


def test_migration_time_stays_within_its_bounds_whatever_the_memory():
    cluster = sim(migration_mib_s=512, migration_min_s=5, migration_max_s=10)
    snap = cluster.collect(T0)
    small, large = by_sid(snap)["vm:3"], by_sid(snap)["vm:1"]  # 1.3 s and 16 s at this rate
    tasks = [cluster.migrate(g.sid, "node12" if g.node != "node12" else "node11", T0) for g in (small, large)]
    assert [cluster.task_status(t, T0 + 4.9).state for t in tasks] == ["running", "running"]
    assert cluster.task_status(tasks[0], T0 + 5.1).state == "done"
    assert cluster.task_status(tasks[1], T0 + 9.9).state == "running"
    assert cluster.task_status(tasks[1], T0 + 10.1).state == "done"


def test_failing_migration_is_reported_and_leaves_the_guest_where_it_was():
    cluster = sim(fail_rate=1.0)
    source = by_sid(cluster.collect(T0))["vm:1"].node
    task = cluster.migrate("vm:1", "node12" if source != "node12" else "node11", T0)
    status = cluster.task_status(task, T0 + 60)
    assert status.state == "failed"
    assert "simulated failure" in status.reason
    guest = by_sid(cluster.collect(T0 + 60))["vm:1"]
    assert (guest.node, guest.state, guest.target) == (source, "started", None)


def test_fail_rate_fails_about_that_share_of_migrations():
    cluster = sim(fail_rate=0.5, migration_mib_s=1e6)
    snap = cluster.collect(T0)
    tasks = [cluster.migrate(g.sid, "node12" if g.node != "node12" else "node11", T0) for g in snap.guests[:100]]
    failed = sum(cluster.task_status(t, T0 + 10).state == "failed" for t in tasks)
    assert 35 <= failed <= 65


def test_reopening_from_state_gives_the_same_next_snapshot():
    cluster = sim(fail_rate=0.3)
    cluster.collect(T0)
    tasks = [cluster.migrate(sid, "node12", T0 + 5) for sid in ("vm:1", "vm:386", "vm:27")]
    cluster.collect(T0 + 20)
    saved = json.loads(json.dumps(cluster.state()))
    resumed = open_source("simulator", {}, saved)
    for now in (T0 + 30, T0 + 200, T0 + 900):
        assert resumed.collect(now) == cluster.collect(now)
        assert [resumed.task_status(t, now) for t in tasks] == [cluster.task_status(t, now) for t in tasks]


def test_state_from_another_node_count_is_refused_with_a_reason():
    saved = sim().state()
    with pytest.raises(ConfigError, match=r"node 'node\d+' is no longer configured; reset the cluster"):
        open_source("simulator", {"nodes": 4, "hot_nodes": 2}, saved)


def test_snapshot_is_a_valid_crs_snapshot_file():
    cluster = sim()
    cluster.migrate("vm:1", "node12", T0)
    snap = cluster.collect(T0 + 1)
    assert contract.parse(json.loads(contract.dumps(snap))) == snap


@pytest.mark.parametrize(
    "sid, target, message",
    [
        ("vm:99999", "node01", "'vm:99999' is not a guest"),
        ("vm:1", "node99", "'node99' is not a node"),
    ],
)
def test_migrate_refuses_unknown_guest_or_node(sid, target, message):
    with pytest.raises(SourceError, match=message):
        sim().migrate(sid, target, T0)


def test_migrate_refuses_a_guest_already_moving_or_already_there():
    cluster = sim()
    source = by_sid(cluster.collect(T0))["vm:1"].node
    with pytest.raises(SourceError, match="already on"):
        cluster.migrate("vm:1", source, T0)
    cluster.migrate("vm:1", "node12" if source != "node12" else "node11", T0)
    with pytest.raises(SourceError, match="already migrating"):
        cluster.migrate("vm:1", "node10", T0 + 1)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"nodes": "many"}, r"simulator.nodes: 'many' is not a whole number 2..500"),
        ({"nodes": 1}, r"simulator.nodes: 1 is not a whole number 2..500"),
        ({"fail_rate": 2}, r"simulator.fail_rate: 2 is out of range; must be >= 0 and <= 1"),
        ({"hot_nodes": 13}, r"simulator.hot_nodes: 13 is not a whole number 1..12"),
        ({"node_sizes": [{"cpus": 8}]}, r"simulator.node_sizes\[0\].memory_gib: 0.0 is out of range"),
        ({"speed": 3}, r"simulator.speed: unknown key; allowed: cluster, fail_rate"),
    ],
)
def test_bad_config_names_the_key_and_allowed_values(config, message):
    with pytest.raises(ConfigError, match=message):
        sim(**config)


def test_unknown_source_kind_names_the_kinds():
    with pytest.raises(ConfigError, match="kind: 'vmware' is not one of simulator, proxmox, snapshot"):
        open_source("vmware", {}, None)


def test_trace_from_another_directory_without_files_is_refused(tmp_path):
    with pytest.raises(SourceError, match="no usage-\\*.csv.gz"):
        sim(trace=str(tmp_path))


def test_packaged_trace_has_a_full_day_of_416_vms():
    trace = traces.load()
    assert (len(trace.vm_ids), trace.samples) == (416, 288)
    assert trace.memory_bytes.max() == pytest.approx(511.5 * GIB, rel=1e-3)


def test_what_if_cluster_returns_its_snapshot_and_refuses_migrations(tmp_path):
    snap = sim().collect(T0)
    path = tmp_path / "lab.json"
    path.write_text(contract.dumps(snap))
    what_if = open_source("snapshot", {"path": str(path)}, None)
    assert what_if.collect(T0 + 3600) == snap
    with pytest.raises(SourceError, match="read-only what-if cluster"):
        what_if.migrate("vm:1", "node12", T0)


def test_what_if_cluster_refuses_a_bad_snapshot_naming_the_key():
    bad = {"format": "crs-snapshot/1", "nodes": [{"name": "a", "cpus": -1, "memory_bytes": 1}]}
    with pytest.raises(ConfigError, match=r"nodes\[0\].cpus: -1 is out of range"):
        open_source("snapshot", {"snapshot": bad}, None)


def test_trace_with_a_negative_value_is_refused_naming_the_row(tmp_path):
    rows = [
        "vm_id,timestamp,cpu_cores,cpu_usage_pct,mem_capacity_kb,mem_usage_kb",
        "1,1372809600,2,5.0,1048576,1000",
        "1,1372809900,2,-5.0,1048576,1000",
    ]
    with gzip.open(tmp_path / "usage-bad.csv.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    with pytest.raises(SourceError, match="data row 2 has a negative or non-finite value"):
        sim(trace=str(tmp_path))


def test_the_demo_cluster_looks_busy_and_uneven_from_its_first_snapshots():
    # what `make run` shows before its first round may act (hold duration 3): the demo
    # command's simulator, a trace sample over DEMO_ROUNDS_PER_SAMPLE rounds
    from dashboard.management.commands.demo import DEMO_ROUND_SECONDS, DEMO_ROUNDS_PER_SAMPLE

    demo = sim(round_interval_s=DEMO_ROUND_SECONDS, seconds_per_sample=DEMO_ROUND_SECONDS * DEMO_ROUNDS_PER_SAMPLE)
    for r in range(4):
        snap = demo.collect(T0 + r * DEMO_ROUND_SECONDS)
        busiest = max(max(n.cpu_usage / n.cpus, n.mem_usage_bytes / n.memory_bytes) for n in snap.nodes)
        cluster_cpu = sum(n.cpu_usage for n in snap.nodes) / sum(n.cpus for n in snap.nodes)
        quietest = min(n.cpu_usage / n.cpus for n in snap.nodes)
        assert busiest > 0.6, f"round {r}: busiest node at {busiest:.0%}"
        assert 0.30 <= cluster_cpu <= 0.50, f"round {r}: cluster CPU at {cluster_cpu:.0%}"
        assert busiest - quietest > 0.4  # uneven: there is something to balance


def test_a_saturated_node_stalls_its_guests_by_the_excess_share():
    from crs.model import Node
    from crs.sources.simulator import _stall

    assert _stall(Node("n", 8, 64 * 2**30, cpu_usage=10.0, mem_usage_bytes=32 * 2**30)).cpu_some == pytest.approx(0.2)
    calm = _stall(Node("n", 8, 64 * 2**30, cpu_usage=6.0, mem_usage_bytes=80 * 2**30))
    assert calm.cpu_some == 0.0 and calm.memory_some == pytest.approx(0.2)


def test_a_node_in_maintenance_is_reported_so_takes_no_guests_and_survives_a_resume():
    s = sim(nodes=4, hot_nodes=1)
    s.maintenance("node02", True, 0.0)
    resumed = open_source("simulator", {"nodes": 4, "hot_nodes": 1}, s.state())
    snapshot = resumed.collect(1.0)
    assert [n.name for n in snapshot.nodes if n.maintenance] == ["node02"]
    guest = next(g for g in snapshot.guests if g.node == "node01")
    with pytest.raises(SourceError, match="node02 is in maintenance"):
        resumed.migrate(guest.sid, "node02", 1.0)
    resumed.maintenance("node02", False, 2.0)
    assert not resumed.collect(2.0).node("node02").maintenance
    with pytest.raises(SourceError, match="not a node"):
        resumed.maintenance("node99", True, 2.0)


def test_starts_are_counted_per_route_across_a_resume_and_the_pruning_of_finished_tasks():
    """The fault soak reads these counts: a migration started twice on its source shows as a 2."""
    cluster = sim(migration_mib_s=1e9)
    snap = cluster.collect(T0)
    guest = snap.guests[0]
    target = next(n.name for n in snap.nodes if n.name != guest.node)
    cluster.migrate(guest.sid, target, T0)
    resumed = open_source("simulator", {"migration_mib_s": 1e9}, cluster.state())
    resumed.collect(T0 + 5)  # done: the guest is on its target
    resumed.migrate(guest.sid, guest.node, T0 + 5)
    resumed.collect(T0 + 10)
    resumed.migrate(guest.sid, target, T0 + 10)
    assert resumed.state()["starts"] == {
        f"{guest.sid} {guest.node}>{target}": 2,
        f"{guest.sid} {target}>{guest.node}": 1,
    }
