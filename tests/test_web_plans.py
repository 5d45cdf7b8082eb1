"""A round's plan on the web side: approving with dependencies, Apply all, execution side by
side within the concurrency and per-node limits (a real Celery worker), and the emergency stop."""

import asyncio
import contextlib
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from conftest import make_migration, run_rounds, service_or_skip, set_policy, wait_until
from django.urls import reverse
from django.utils import timezone
from test_web_tasks import worker  # noqa: F401 (a fixture)

from dashboard import tasks
from dashboard.live import sender as live
from dashboard.models import AuditEvent, Cluster, Migration, Round
from dashboard.tasks import collect

SETTLED = ("done", "failed", "expired")


def overlap(a: Migration, b: Migration) -> bool:
    return a.started_at < b.finished_at and b.started_at < a.finished_at


@pytest.mark.django_db
def test_approving_a_step_approves_the_steps_it_was_computed_behind(
    admin_client, cluster, django_capture_on_commit_callbacks, monkeypatch
):
    queued = []
    monkeypatch.setattr(tasks.execute, "delay", queued.append)
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    steps = list(Migration.objects.order_by("step"))
    assert len(steps) >= 3
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin_client.post(reverse("api:recommendation-approve", args=[steps[2].pk]))
    assert answer.status_code == 200
    states = dict(Migration.objects.values_list("pk", "state"))
    assert [states[m.pk] for m in steps[:3]] == ["approved"] * 3
    assert {states[m.pk] for m in steps[3:]} <= {"suggested"}
    assert queued == [m.pk for m in steps[:3]]  # to run in plan order


@pytest.mark.django_db
def test_each_step_stores_its_gain_and_cost_and_the_api_serves_them(
    admin_client, cluster, django_capture_on_commit_callbacks
):
    """The cards show gain beside cost from these figures; under proxmox no move has to pay, so none is stored."""
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    step = Migration.objects.order_by("step").first()
    assert step.payoff["payoff_unit"] == "imbalance-seconds"
    assert step.payoff["benefit"] >= (1 + step.margin) * step.payoff["cost"] > 0  # it passed the gate
    assert 0 < step.payoff["horizon_s"] <= cluster.policy.benefit_horizon.total_seconds()
    served = admin_client.get(reverse("api:migration-detail", args=[step.pk])).json()
    assert served["payoff"] == step.payoff
    assert served["imbalance_after"] == step.imbalance_after  # the keys before stay
    last = Migration.objects.order_by("-pk").first().pk
    Migration.objects.update(state="expired")
    cluster.policy.switch_preset("proxmox", None)
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)
    proxmox = Migration.objects.filter(pk__gt=last)
    assert proxmox.exists()
    assert not proxmox.exclude(payoff=None).exists()
    assert admin_client.get(reverse("api:migration-detail", args=[proxmox.first().pk])).json()["payoff"] is None


@pytest.mark.django_db
def test_apply_all_approves_the_whole_list_in_plan_order(
    admin_client, cluster, django_capture_on_commit_callbacks, monkeypatch
):
    queued = []
    monkeypatch.setattr(tasks.execute, "delay", queued.append)
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin_client.post(f"/api/v1/clusters/{cluster.pk}/recommendations/approve-all/")
    steps = list(Migration.objects.order_by("step").values_list("pk", flat=True))
    assert [m["id"] for m in answer.json()["approved"]] == steps == queued
    assert set(Migration.objects.values_list("state", "decided_by__username")) == {("approved", "admin")}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("alternatives", "kind"),
    [([], "balancing"), (["node05"], "balancing"), ([], "pressure")],
    ids=["waits", "alternative", "outranks"],
)
def test_an_approved_moves_claim_holds_its_target_from_approval_until_it_is_released(
    admin_client, collected, monkeypatch, alternatives, kind
):
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: None)
    snapshot = collected.snapshot
    g1, g2 = [g for g in snapshot["guests"] if g["node"] == "node01"][:2]
    node06 = next(n for n in snapshot["nodes"] if n["name"] == "node06")
    carried = sum(g["memory_bytes"] for g in snapshot["guests"] if g["node"] == "node06")
    # node06 keeps room for g1 and half of g2: each move fits alone, not both together.
    reserve = int(node06["memory_bytes"] - carried - g1["memory_bytes"] - g2["memory_bytes"] / 2)
    set_policy(collected, memory_reserve_bytes=reserve, max_concurrent_migrations=3, max_migrations_per_node=3)
    now = timezone.now()
    # Approved first, not started yet (it waits for its turn): its claim on node06 holds already.
    first = make_migration(collected, "approved", g1["sid"], target="node06", decided_at=now - timedelta(minutes=1))
    second = make_migration(
        collected, "approved", g2["sid"], target="node06", alternatives=alternatives, decided_at=now, kind=kind
    )
    tasks.execute.apply(args=[second.pk])
    second.refresh_from_db()
    if alternatives:
        assert (second.state, second.target) == ("running", "node05")
        return
    if kind == "pressure":  # it goes before balancing: the balancing move waits for it instead
        assert (second.state, second.target) == ("running", "node06")
        return
    assert (second.state, second.target) == ("approved", "node06")
    assert second.reason == f"waits: node06's memory is claimed by migration {first.pk}"
    loaded = admin_client.get(reverse("api:cluster-state", args=[collected.pk])).json()  # what the page loads
    row = next(m for m in loaded["migrations"] if m["id"] == second.pk)
    assert (row["state"], row["reason"]) == ("approved", second.reason)  # the row says why beside "approved"
    Migration.objects.transition(first.pk, "approved", "expired", None, reason="the plan was abandoned")
    tasks.execute.apply(args=[second.pk])  # its claim released, node06 takes the second move
    second.refresh_from_db()
    assert (second.state, second.target, second.reason) == ("running", "node06", "")


@pytest.mark.django_db
def test_a_step_into_room_a_running_move_frees_waits_for_it_instead_of_expiring(collected, monkeypatch):
    """A swap: node06 takes g only once h, moving off it, has left. The step waits, naming the
    move it waits for; with no move under way to free the room, the same step expires."""
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: None)
    snapshot = collected.snapshot
    g = next(g for g in snapshot["guests"] if g["node"] == "node01")
    h = max((g for g in snapshot["guests"] if g["node"] == "node06"), key=lambda g: g["memory_bytes"])
    node06 = next(n for n in snapshot["nodes"] if n["name"] == "node06")
    carried = sum(g["memory_bytes"] for g in snapshot["guests"] if g["node"] == "node06")
    # node06 lacks half of h's memory for g now, and has room for it once h has left.
    reserve = int(node06["memory_bytes"] - carried - g["memory_bytes"] + h["memory_bytes"] / 2)
    set_policy(collected, memory_reserve_bytes=reserve, max_concurrent_migrations=3, max_migrations_per_node=3)
    leaving = make_migration(collected, "running", h["sid"], source="node06", target="node05")
    step = make_migration(collected, "approved", g["sid"], target="node06")
    tasks.execute.apply(args=[step.pk])
    step.refresh_from_db()
    assert (step.state, step.reason) == ("approved", f"waits: node06's room is freed when migration {leaving.pk} ends")

    Migration.objects.transition(leaving.pk, "running", "failed", None, reason="the source said so")
    tasks.execute.apply(args=[step.pk])  # h stays on node06: nothing frees the room now
    step.refresh_from_db()
    assert step.state == "expired"


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers  # a worker through rounds, mostly waiting: beside the rest
def test_apply_all_runs_steps_in_order_within_the_concurrency_and_per_node_limits(admin_client, cluster, worker):  # noqa: F811
    service_or_skip("CRS_TEST_DATABASE_URL")  # workers beside the test need a database that takes concurrent writers
    set_policy(cluster, hold_duration=0, max_concurrent_migrations=2, max_migrations_per_node=1)
    collect.delay(cluster.pk)
    wait_until(lambda: Migration.objects.filter(state="suggested").count() >= 3)
    assert admin_client.post(f"/api/v1/clusters/{cluster.pk}/recommendations/approve-all/").status_code == 200
    wait_until(lambda: not Migration.objects.exclude(state__in=SETTLED).exists(), timeout=90)
    ran = list(Migration.objects.filter(state="done").order_by("step"))
    assert len(ran) >= 3
    assert [m.started_at for m in ran] == sorted(m.started_at for m in ran)  # started in plan order
    for m in ran:
        side_by_side = [o for o in ran if o.pk != m.pk and overlap(m, o)]
        assert len(side_by_side) <= 1  # at most 2 at once
        for o in side_by_side:
            assert not {m.source, m.target} & {o.source, o.target}  # at most 1 per node


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers  # a worker through rounds, mostly waiting: beside the rest
def test_automatic_plans_run_migrations_side_by_side(cluster, worker):  # noqa: F811
    service_or_skip("CRS_TEST_DATABASE_URL")
    set_policy(cluster, hold_duration=0, automation="automatic", max_concurrent_migrations=3)
    collect.delay(cluster.pk)
    wait_until(lambda: Migration.objects.filter(state="done").count() >= 2, timeout=90)
    wait_until(lambda: not Migration.objects.filter(state__in=["approved", "running"]).exists(), timeout=90)
    done = list(Migration.objects.filter(state="done"))
    assert any(overlap(a, b) for a in done for b in done if a.pk < b.pk)


@pytest.mark.django_db
def test_emergency_stop_expires_approved_aborts_running_and_a_second_click_lifts_it(
    client, operator, cluster, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: None)
    Cluster.objects.filter(pk=cluster.pk).update(source_config={**cluster.source_config, "migration_mib_s": 1})
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    first, second = Migration.objects.order_by("step")[:2]
    Migration.objects.transition(first.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[first.pk])
    assert Migration.objects.get(pk=first.pk).state == "running"
    Migration.objects.transition(second.pk, "suggested", "approved", None)
    client.force_login(operator)
    url = f"/api/v1/clusters/{cluster.pk}/emergency-stop/"
    layer = get_channel_layer()  # a page open on the cluster
    page = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(live.group_name(cluster.pk), page)

    async def told() -> list[dict]:
        messages = []
        with contextlib.suppress(TimeoutError):
            while True:
                messages.append(json.loads((await asyncio.wait_for(layer.receive(page), 0.2))["text"]))
        return messages

    def stops_pushed() -> list[dict]:
        """what the page was told of the stops since last asked"""
        stops = [m for m in async_to_sync(told)() if m["type"] == "stop"]
        return [{k: v for k, v in m.items() if k in ("type", "here", "all", "by")} for m in stops]

    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(url, {"stop": True}, content_type="application/json").json()["clusters"][0]
    assert (answer["stopped"], answer["expired"], answer["aborted"]) == (True, [second.pk], [first.pk])
    assert stops_pushed() == [{"type": "stop", "here": True, "all": False, "by": operator.username}]
    with django_capture_on_commit_callbacks(execute=True):  # already set: nothing changes, nothing is pushed
        client.post(url, {"stop": True}, content_type="application/json")
    assert stops_pushed() == []
    assert Migration.objects.get(pk=second.pk).reason == "emergency stop: automation paused"
    tasks.follow.apply(args=[first.pk])
    first.refresh_from_db()
    assert (first.state, first.reason) == ("failed", "migration aborted: emergency stop")
    set_policy(cluster, automation="automatic")
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert not Migration.objects.filter(state="approved").exists()  # automation paused
    with django_capture_on_commit_callbacks(execute=True):
        lifted = client.post(url, {"stop": False}, content_type="application/json").json()["clusters"]
    nothing = {"here": False, "all": False, "by": None, "at": None}
    assert lifted == [{"id": cluster.pk, "name": "test", "stopped": False, "stop": nothing}]
    assert stops_pushed() == [{"type": "stop", "here": False, "all": False, "by": None}]
    assert client.get(reverse("api:cluster-state", args=[cluster.pk])).json()["stopped"] is False
    actions = list(AuditEvent.objects.filter(action__startswith="emergency").values_list("action", "actor"))
    assert sorted(actions) == [("emergency-stop", operator.pk), ("emergency-stop-lifted", operator.pk)]
    assert client.post(url, {"stop": "maybe"}, content_type="application/json").json() == {
        "stop": ["stop must be true (stop) or false (lift)"]
    }


@pytest.mark.django_db
def test_a_viewer_may_not_stop_a_cluster(client, viewer, cluster):
    client.force_login(viewer)
    assert (
        client.post("/api/v1/clusters/emergency-stop/", {"stop": True}, content_type="application/json").status_code
        == 403
    )
    assert not Cluster.objects.get(pk=cluster.pk).stopped


@pytest.mark.django_db
def test_a_step_whose_target_is_claimed_full_takes_its_next_alternative_or_expires(collected, monkeypatch):
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: None)
    snapshot = collected.snapshot
    g1, g2, g3 = [g for g in snapshot["guests"] if g["node"] == "node01"][:3]
    node06 = next(n for n in snapshot["nodes"] if n["name"] == "node06")
    carried = sum(g["memory_bytes"] for g in snapshot["guests"] if g["node"] == "node06")
    # node06 keeps room for g1 and half of g2: once g1's move claims it, g2 no longer fits there.
    reserve = int(node06["memory_bytes"] - carried - g1["memory_bytes"] - g2["memory_bytes"] / 2)
    set_policy(collected, memory_reserve_bytes=reserve, max_concurrent_migrations=3, max_migrations_per_node=3)
    first = make_migration(collected, "approved", g1["sid"], target="node06")
    second = make_migration(collected, "approved", g2["sid"], target="node06", alternatives=["node05"])
    third = make_migration(collected, "approved", g3["sid"], target="node06")
    for m in (first, second, third):
        tasks.execute.apply(args=[m.pk])
        m.refresh_from_db()
    assert (first.state, first.target) == ("running", "node06")
    assert (second.state, second.target) == ("running", "node05")  # its next alternative target
    assert third.state == "expired" and third.reason.startswith(f"{g3['sid']} no longer fits on node06")


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers  # a worker through rounds, mostly waiting: beside the rest
def test_with_a_real_worker_a_plan_stays_while_it_holds_and_goes_when_a_step_breaks(cluster, worker):  # noqa: F811
    # The simulator's clock is real time here: each round sees the load moved on (samples interpolated).
    service_or_skip("CRS_TEST_DATABASE_URL")
    set_policy(cluster, hold_duration=0)  # every round computes a plan of its own and weighs it against the kept one

    def rounds_done(count):
        for _ in range(count):
            before = Round.objects.count()
            collect.delay(cluster.pk)
            wait_until(lambda before=before: Round.objects.count() > before)

    rounds_done(4)
    plan = list(Migration.objects.order_by("step"))
    assert {(m.plan, m.state) for m in plan} == {(1, "suggested")}  # kept four rounds on fresh data
    kept = [r.explanation for r in Round.objects.order_by("at")[1:]]
    assert all(e["kept_plan"] == 1 and e["reason"].startswith("Plan 1 is kept: on fresh data") for e in kept)
    # Someone moves the guest of step 1 elsewhere: the plan no longer holds and the next plan replaces it.
    broken = plan[1]
    cluster.refresh_from_db()
    other = next(n["name"] for n in cluster.snapshot["nodes"] if n["name"] not in (broken.source, broken.target))
    placement = {**cluster.source_state["placement"], broken.leader: other}
    Cluster.objects.filter(pk=cluster.pk).update(source_state={**cluster.source_state, "placement": placement})
    rounds_done(1)
    assert set(Migration.objects.filter(plan=1).values_list("state", flat=True)) == {"expired"}
    assert Migration.objects.get(pk=broken.pk).reason.startswith(f"step #{broken.pk} no longer holds: ")
    assert Migration.objects.filter(plan=2, state="suggested").exists()
