"""Rolling maintenance from the API: three nodes taken down and brought back in turn by a real
worker that is killed and replaced in the middle; bad input named; a node breaking N+1 flagged."""

import os
import signal
import time

import pytest
from celery import Celery
from conftest import race, service_or_skip, set_policy, shared_database_url, single_worker, wait_until
from django.db.models import F
from django.urls import reverse
from test_web_worker_killed import past_the_visibility_timeout

import crs.rolling
from dashboard import rolling
from dashboard.models import AuditEvent, Cluster, Migration, RollingNode

SETTLED = ("done", "failed", "expired")


def url(cluster, what=""):
    return f"/api/v1/clusters/{cluster.pk}/rolling/{what + '/' if what else ''}"


def post(client, cluster, what, data=None):
    return client.post(url(cluster, what), data or {}, content_type="application/json")


def steps(cluster):
    return {q.node: q.step for q in RollingNode.objects.filter(rolling__cluster=cluster)}


def ticker(cluster, broker_url: str):
    """A function that sends a collect (and so a round) about every second, as beat would; not
    while the last one's round is still to run, so a slow machine's worker does not fall ever
    further behind."""
    sender, last = Celery(broker=broker_url, set_as_current=False), [0.0]

    def tick():
        now = time.monotonic()
        fresh = Cluster.objects.filter(pk=cluster.pk, last_round_at__gte=F("collected_at")).exists()
        if now - last[0] > 1.0 and fresh or now - last[0] > 15.0:
            last[0] = now
            sender.send_task("dashboard.tasks.collect", args=[cluster.pk])

    return tick


@pytest.mark.django_db(transaction=True)
def test_bad_input_is_refused_naming_the_field(admin_client, collected):
    for data, field in (
        ({"group_size": "two"}, "group_size"),
        ({"group_size": 0}, "group_size"),
        ({"nodes": ["node01", "nope"]}, "nodes"),
        ({"nodes": ["node01", "node01"]}, "nodes"),
        ({"nodes": []}, "nodes"),
        ({"nodes": "node01"}, "nodes"),
        ({"at_once": "sometimes"}, "at_once"),
    ):
        answer = post(admin_client, collected, "start", data)
        assert answer.status_code == 400, data
        assert field in answer.json(), answer.json()
    assert not collected.rollings.exists()
    assert post(admin_client, collected, "pause").status_code == 409  # nothing to pause
    assert post(admin_client, collected, "start", {"nodes": ["node01", "node02"]}).status_code == 201
    assert post(admin_client, collected, "start").status_code == 409  # one at a time
    answer = post(admin_client, collected, "node-back", {"node": "node05"})
    assert answer.status_code == 400 and "node01" in answer.json()["node"][0]
    assert post(admin_client, collected, "node-back", {"nodes": "node01"}).status_code == 400
    first = admin_client.get(url(collected)).json()["queue"][0]
    answer = post(admin_client, collected, "node-back", {"node": first["node"]})
    assert answer.status_code == 409 and "not waiting for the admin" in answer.json()["detail"]
    assert admin_client.get(f"/api/v1/clusters/{collected.pk}/rolling/").status_code == 200
    assert admin_client.get("/api/v1/clusters/999999/rolling/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_pause_resume_and_cancel_are_safe_to_repeat_and_audited(admin_client, collected):
    assert post(admin_client, collected, "start", {"nodes": ["node01"]}).status_code == 201
    for what, state in (("pause", "paused"), ("pause", "paused"), ("resume", "running"), ("cancel", "cancelled")):
        answer = post(admin_client, collected, what)
        assert answer.status_code == 200 and answer.json()["state"] == state
    assert post(admin_client, collected, "resume").status_code == 409  # cancelled is for good
    actions = list(
        AuditEvent.objects.filter(action__startswith="rolling-").order_by("pk").values_list("action", flat=True)
    )
    assert actions == ["rolling-started", "rolling-paused", "rolling-resumed", "rolling-cancelled"]


@pytest.mark.django_db(transaction=True)
def test_an_operator_may_not_start_one(client, operator, collected):
    client.force_login(operator)
    assert post(client, collected, "start").status_code == 403


# Roomy nodes: N+1 holds all along, so no node is flagged; the small nodes hold two to four guests.
ROOMY = {"migration_mib_s": 1e9, "nodes": 12, "hot_nodes": 3, "node_sizes": [{"cpus": 512, "memory_gib": 8192}]}


def started_on(cluster, node):
    cluster.refresh_from_db()
    return {g["sid"] for g in cluster.snapshot["guests"] if g["node"] == node and g["state"] == "started"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_three_nodes_in_turn_with_a_worker_restart_in_the_middle(admin_client, redis_server):
    service_or_skip("CRS_TEST_DATABASE_URL")
    from dashboard.tasks import collect

    cluster = Cluster.objects.create(name="rolling", source_kind="simulator", source_config=ROOMY)
    collect.apply(args=[cluster.pk])
    set_policy(cluster, max_concurrent_migrations=4, max_migrations_per_node=8)  # manual automation
    chosen = ["node04", "node05", "node07"]
    answer = post(admin_client, cluster, "start", {"nodes": chosen})
    assert answer.status_code == 201, answer.json()
    order = [q["node"] for q in answer.json()["queue"]]
    assert order == crs.rolling.order(Cluster.objects.get(pk=cluster.pk).latest_snapshot(), tuple(chosen))
    held = {node: started_on(cluster, node) for node in order}
    assert all(held.values())

    database_url, tick = shared_database_url(), ticker(cluster, redis_server.url)
    workers = [single_worker(database_url, redis_server.url, "rolling-first")]
    try:
        for i, node in enumerate(order):
            if i == 0:

                def draining(node=node):
                    """the first node entered maintenance and its evacuation started"""
                    tick()
                    moves = Migration.objects.filter(kind="evacuation", source=node)
                    return steps(cluster)[node] == "draining" and moves.exists()

                wait_until(draining, 120)
                os.killpg(workers[0].pid, signal.SIGKILL)  # mid-drain
                workers[0].wait(10)
                past_the_visibility_timeout(redis_server.url)  # the next worker takes the messages back
                workers.append(single_worker(database_url, redis_server.url, "rolling-second"))

            def emptied(node=node):
                """the node is empty and waits for the admin"""
                tick()
                return steps(cluster)[node] == "waiting-admin"

            # a worker killed mid-round leaves its round's lease: rounds wait for it to lapse
            wait_until(emptied, 120 + (Cluster.objects.ROUND_LEASE.total_seconds() if i == 0 else 0))
            assert not started_on(cluster, node)
            status = admin_client.get(url(cluster)).json()
            assert [q["label"] for q in status["queue"]][i] == "waiting for admin"
            assert all(q["step"] == "done" for q in status["queue"][:i])  # one node at a time
            assert all(q["step"] == "waiting" for q in status["queue"][i + 1 :])
            assert status["n1"]["survives"] is True
            assert post(admin_client, cluster, "node-back", {"node": node}).status_code == 200
            assert post(admin_client, cluster, "node-back", {"node": node}).status_code == 200  # repeated

            def back(node=node):
                """the node left maintenance and its failback settled"""
                tick()
                return steps(cluster)[node] == "done"

            wait_until(back, 120)
        wait_until(lambda: tick() or cluster.rollings.get().state == "done", 60)
    finally:
        for process in workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
    assert not cluster.maintenances.filter(left_at=None).exists()
    assert not Migration.objects.filter(kind__in=("evacuation", "failback")).exclude(state__in=SETTLED).exists()
    assert {m.leader for m in Migration.objects.filter(kind="evacuation", state="done")} == set().union(*held.values())
    trail = [
        (e.action, e.actor_name, e.details.get("node"), e.details.get("step"))
        for e in AuditEvent.objects.filter(action__startswith="rolling-").order_by("pk")
    ]
    expected = [("rolling-started", "admin", None, None)]
    for node in order:  # every step once, though a worker died and rounds ran it concurrently
        expected += [
            ("rolling-step", "", node, "draining"),
            ("rolling-step", "", node, "waiting-admin"),
            ("rolling-step", "admin", node, "returning"),
            ("rolling-step", "", node, "done"),
        ]
    assert trail == expected + [("rolling-done", "", None, None)]


@pytest.mark.django_db(transaction=True)
def test_a_node_that_would_break_n1_is_flagged_and_goes_on_only_when_told(admin_client, collected):
    """The test cluster's two crowded nodes already fail N+1; emptying a small node makes more losses fail."""
    assert post(admin_client, collected, "start", {"nodes": ["node06", "node05"]}).status_code == 201
    assert rolling.advance(collected.pk) is False
    assert rolling.advance(collected.pk) is False  # a second look changes nothing
    status = admin_client.get(url(collected)).json()
    first = status["queue"][0]
    assert (first["node"], first["step"], first["label"]) == ("node06", "flagged", "flagged: would break N+1")
    assert first["warning"].startswith("with node06 in maintenance, N+1 fails: losing node01")
    assert status["queue"][1]["step"] == "waiting"
    assert not collected.maintenances.exists()  # nothing was taken down
    page = admin_client.get(f"/clusters/{collected.pk}/rolling/").content.decode()
    assert "Go on anyway" in page and "N+1 fails" in page
    assert post(admin_client, collected, "go-on", {"node": "node05"}).status_code == 409  # not flagged
    assert post(admin_client, collected, "go-on", {"node": "node06"}).status_code == 200
    assert post(admin_client, collected, "go-on", {"node": "node06"}).status_code == 200  # repeated
    assert rolling.advance(collected.pk) is True
    assert steps(collected)["node06"] == "draining"
    assert collected.maintenances.get(left_at=None).node == "node06"
    flagged = AuditEvent.objects.filter(action__in=("rolling-flagged", "rolling-go-on"))
    assert [(e.action, e.actor_name) for e in flagged.order_by("pk")] == [
        ("rolling-flagged", ""),
        ("rolling-go-on", "admin"),
    ]


@pytest.mark.django_db(transaction=True)
def test_two_workers_advancing_at_once_take_each_step_once(admin, collected):
    rolling.start(collected, ["node06"], 1, True, admin)
    RollingNode.objects.update(go_on=True, step="flagged")  # as after an admin's "go on anyway"
    results = []
    race(lambda: results.append(rolling.advance(collected.pk)), 60)
    assert sorted(results) == [False, True]
    assert steps(collected) == {"node06": "draining"}
    assert AuditEvent.objects.filter(action="rolling-step").count() == 1
    assert AuditEvent.objects.filter(action="maintenance-entered").count() == 1


@pytest.mark.django_db
def test_before_the_first_collect_the_page_says_why_there_is_no_node_to_choose(admin_client):
    cluster = Cluster.objects.create(name="new", source_kind="simulator")
    html = admin_client.get(reverse("dashboard:rolling", args=[cluster.pk])).content.decode()
    assert 'id="rolling-no-nodes"' in html and "has not been collected" in html
    assert 'name="nodes"' not in html


def evacuations(cluster, node):
    return Migration.objects.filter(cluster=cluster, kind="evacuation", source=node)


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_pause_mid_drain_lets_the_move_under_way_finish_and_starts_no_other_until_resumed(admin_client, redis_server):
    service_or_skip("CRS_TEST_DATABASE_URL")
    from dashboard.models import Round
    from dashboard.tasks import collect

    # node06 holds seven guests; at 2 GiB/s one move takes 1 to 8 s, and one runs at a time
    config = ROOMY | {"migration_mib_s": 2048}
    cluster = Cluster.objects.create(name="paused", source_kind="simulator", source_config=config)
    collect.apply(args=[cluster.pk])
    set_policy(cluster, max_concurrent_migrations=1, max_migrations_per_node=1)
    held = started_on(cluster, "node06")
    assert len(held) >= 5
    assert post(admin_client, cluster, "start", {"nodes": ["node06"]}).status_code == 201
    tick = ticker(cluster, redis_server.url)
    process = single_worker(shared_database_url(), redis_server.url, "rolling-paused")
    try:

        def moving():
            """the first move of node06's evacuation is under way"""
            tick()
            return evacuations(cluster, "node06").filter(state="running").exists()

        wait_until(moving, 120)
        answer = post(admin_client, cluster, "pause")
        assert answer.status_code == 200 and answer.json()["state"] == "paused"
        assert answer.json()["queue"][0]["label"].startswith("draining, paused")
        begun = set(evacuations(cluster, "node06").exclude(started_at=None).values_list("pk", flat=True))
        rounds = Round.objects.filter(cluster=cluster).count()

        def several_rounds():
            """four rounds since the pause, and the move under way finished"""
            tick()
            finished = not evacuations(cluster, "node06").filter(state="running").exists()
            return finished and Round.objects.filter(cluster=cluster).count() >= rounds + 4

        wait_until(several_rounds, 120)
        assert set(evacuations(cluster, "node06").exclude(started_at=None).values_list("pk", flat=True)) == begun
        assert {m.state for m in evacuations(cluster, "node06").filter(pk__in=begun)} == {"done"}  # finished
        waiting = evacuations(cluster, "node06").filter(state="approved")
        assert waiting.count() == len(held) - len(begun) >= 3
        assert all(m.reason.startswith("the rolling maintenance is paused") for m in waiting), [
            (m.pk, m.step, m.reason, m.decided_at) for m in waiting
        ]
        assert steps(cluster) == {"node06": "draining"}
        held_events = AuditEvent.objects.filter(
            action="start-held", details__reason__startswith="the rolling maintenance is paused"
        )
        assert held_events.count() == waiting.count()  # once per move, though rounds queue them again

        assert post(admin_client, cluster, "resume").json()["state"] == "running"

        def drained():
            """node06 is empty and waits for the admin"""
            tick()
            return steps(cluster)["node06"] == "waiting-admin"

        wait_until(drained, 180)  # this test's requests queue on its in-memory broker: rounds queue the moves again
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    assert not started_on(cluster, "node06")
    assert evacuations(cluster, "node06").filter(state="done").count() == len(held)
    actions = list(
        AuditEvent.objects.filter(action__startswith="rolling-").order_by("pk").values_list("action", flat=True)
    )
    assert actions == ["rolling-started", "rolling-step", "rolling-paused", "rolling-resumed", "rolling-step"]


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_drain_leaves_the_node_in_maintenance_and_starts_no_further_move(
    admin_client, collected, django_capture_on_commit_callbacks
):
    from conftest import run_rounds

    from dashboard.executor import admit

    set_policy(collected, max_concurrent_migrations=8, max_migrations_per_node=8)
    assert post(admin_client, collected, "start", {"nodes": ["node06"]}).status_code == 201
    rolling.advance(collected.pk)  # flagged: the test cluster's N+1 breaks with node06 down
    assert post(admin_client, collected, "go-on", {"node": "node06"}).status_code == 200
    assert rolling.advance(collected.pk) is True
    run_rounds(collected, 1, django_capture_on_commit_callbacks)  # plans and approves the evacuation
    first, *rest = evacuations(collected, "node06").filter(state="approved").order_by("step")
    assert rest, "node06 holds several guests"
    assert admit(first.pk) == "running"  # under way before the cancel: it finishes
    answer = post(admin_client, collected, "cancel")
    assert answer.status_code == 200 and answer.json()["state"] == "cancelled"
    node06 = answer.json()["queue"][0]
    assert node06["label"] == "left in maintenance, its evacuation stopped (cancelled)"
    assert [admit(m.pk) for m in rest] == ["approved"] * len(rest)  # none starts
    for m in rest:
        m.refresh_from_db()
        assert m.reason.startswith("the rolling maintenance was cancelled: node06 stays in maintenance")
    run_rounds(collected, 2, django_capture_on_commit_callbacks)  # rounds neither start nor re-plan them
    assert evacuations(collected, "node06").filter(state="running").count() == 1
    assert collected.maintenances.get(left_at=None).node == "node06"
    page = admin_client.get(f"/clusters/{collected.pk}/rolling/").content.decode()
    assert "its evacuation stopped (cancelled)" in page
    leave = f"/api/v1/clusters/{collected.pk}/maintenance/leave/"  # the way out the reason names
    assert admin_client.post(leave, {"node": "node06"}, content_type="application/json").status_code == 200
    assert {m.state for m in evacuations(collected, "node06").filter(pk__in=[m.pk for m in rest])} == {"expired"}
