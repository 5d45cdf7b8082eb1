"""The outcome of every move on a simulated cluster: a real round, approval, migration and the
rounds after it; the imbalance observed 5 minutes and 1 hour later beside the prediction."""

import time
from datetime import timedelta

import pytest
from conftest import run_rounds, set_policy
from django.utils import timezone

from dashboard import approvals, executor, outcomes, tasks
from dashboard.models import Migration, Round

pytestmark = pytest.mark.django_db


def migrate_to_done(migration, admin):
    """Approve and run a recommendation as a worker does: claim and start it, poll it until done."""
    approvals.approve_steps(migration, admin)
    tasks.execute(migration.pk)
    for _ in range(50):
        migration.refresh_from_db()
        if migration.state != "running":
            return migration
        time.sleep(FOLLOW_PAUSE)
        tasks.follow(migration.pk)
    raise AssertionError(f"still {migration.state}")


FOLLOW_PAUSE = executor.FOLLOW_SECONDS * 0.6  # a follower polls at most every half FOLLOW_SECONDS
# Ten times the default speed: the demo's first move (511 GiB) then pays for itself (crs.payoff's gate).
FAST_COPY = 10 * 2**30


def test_observed_imbalance_after_a_move_beside_the_prediction(
    cluster, admin, admin_client, django_capture_on_commit_callbacks
):
    set_policy(cluster, hold_duration=0, moves_per_round=1, migration_bytes_s=FAST_COPY)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    move = migrate_to_done(Migration.objects.get(cluster=cluster, state="suggested"), admin)
    assert move.state == "done"
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)  # the rounds after it: measurements
    first, second = Round.objects.filter(cluster=cluster, at__gt=move.finished_at).order_by("at")[:2]
    # As if the first round after the move came 5 minutes later and the second an hour later.
    finished = first.at - outcomes.AFTER["observed_5m"] - timedelta(seconds=1)
    Migration.objects.filter(pk=move.pk).update(finished_at=finished)
    Round.objects.filter(pk=second.pk).update(at=finished + outcomes.AFTER["observed_1h"] + timedelta(seconds=1))

    assert outcomes.measure(cluster.pk, now=finished + timedelta(minutes=4)) == []  # not yet due
    assert outcomes.measure(cluster.pk, now=finished + timedelta(minutes=6)) == [move.pk]
    assert outcomes.measure(cluster.pk, now=finished + timedelta(minutes=61)) == [move.pk]
    assert outcomes.measure(cluster.pk, now=finished + timedelta(minutes=62)) == []  # written once
    move.refresh_from_db()
    assert move.observed_5m == first.imbalance and move.observed_1h == second.imbalance
    # the simulator's cluster did what the engine predicted: the move lowered the imbalance
    assert move.observed_5m < move.imbalance_before
    assert move.observed_5m == pytest.approx(move.imbalance_after, abs=0.05)

    answer = admin_client.get(f"/api/v1/migrations/{move.pk}/").json()
    assert (answer["observed_5m"], answer["observed_1h"]) == (first.imbalance, second.imbalance)
    summary = admin_client.get(f"/api/v1/clusters/{cluster.pk}/outcomes/").json()
    before = move.imbalance_before
    assert (summary["days"], summary["moves"], summary["measured"]) == (7, 1, 1)
    assert summary["predicted_change"] == pytest.approx((move.imbalance_after - before) / before)
    assert summary["observed_change_5m"] == pytest.approx((first.imbalance - before) / before)
    assert summary["observed_change_1h"] == pytest.approx((second.imbalance - before) / before)
    assert summary["plans"][0]["plan"] == move.plan and summary["plans"][0]["observed_1h"] == second.imbalance


def test_a_move_without_a_round_soon_after_is_never_measured(cluster, admin, django_capture_on_commit_callbacks):
    """Collection was down: a round an hour late measures something else, so the figure stays empty."""
    set_policy(cluster, hold_duration=0, moves_per_round=1, migration_bytes_s=FAST_COPY)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    move = migrate_to_done(Migration.objects.get(cluster=cluster, state="suggested"), admin)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    after = Round.objects.filter(cluster=cluster, at__gt=move.finished_at).earliest("at")
    finished = after.at - outcomes.AFTER["observed_5m"] - outcomes.WITHIN - timedelta(seconds=1)
    Migration.objects.filter(pk=move.pk).update(finished_at=finished)
    assert outcomes.measure(cluster.pk, now=after.at) == []


def test_outcome_days_are_checked(admin_client, cluster):
    answer = admin_client.get(f"/api/v1/clusters/{cluster.pk}/outcomes/?days=0")
    assert answer.status_code == 400 and answer.json() == {"days": ["days must be between 1 and 366"]}
    empty = admin_client.get(f"/api/v1/clusters/{cluster.pk}/outcomes/?days=30").json()
    assert (empty["moves"], empty["predicted_change"], empty["plans"]) == (0, None, [])


def test_a_move_is_judged_paid_on_the_rounds_of_the_hour_after_it(
    cluster, admin_client, django_capture_on_commit_callbacks
):
    """crs.paid on the stored rounds: their measured node use, the moved guest's own samples
    counted back on its source for the loads without the move. Judged once, after the hour.
    The move is one the rounds did not make: a guest said to have come to the least loaded node
    from the most loaded one, so that leaving it on its source would have kept the imbalance higher."""
    set_policy(cluster, mode="dynamic")  # the rounds' imbalance on measured use, as the verdict's
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    usage = Round.objects.filter(cluster=cluster).latest("at").node_usage
    load = {name: u["cpu"] + u["memory"] for name, u in usage.items()}
    cluster.refresh_from_db()
    snapshot = cluster.latest_snapshot()
    guest = max((g for g in snapshot.guests if g.node in load), key=lambda g: (-load[g.node], g.mem_usage_bytes))
    finished = timezone.now()
    move = Migration.objects.create(
        cluster=cluster,
        state="done",
        leader=guest.sid,
        guests=[guest.sid],
        source=max(load, key=lambda name: load[name]),
        target=guest.node,
        imbalance_before=0.4,
        imbalance_after=0.3,
        relative_gain=0.25,
        margin=0.1,
        method="bruteforce",
        finished_at=finished,
    )
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)
    rounds = list(Round.objects.filter(cluster=cluster, at__gt=finished))
    horizon = cluster.policy.benefit_horizon  # an hour by default
    assert outcomes.judge(cluster.pk, now=finished + horizon - timedelta(seconds=1)) == []  # not yet
    assert outcomes.judge(cluster.pk, now=finished + horizon + timedelta(seconds=1)) == [move.pk]
    assert outcomes.judge(cluster.pk, now=finished + horizon + timedelta(seconds=2)) == []  # once
    move.refresh_from_db()
    figures = move.paid_figures
    assert move.paid is True and figures["objective"] == "even" and figures["samples"] == len(rounds) == 2
    # as measured, the rounds' own imbalance; without the move, the higher one it removed
    assert figures["imbalance"] == pytest.approx(sum(r.imbalance for r in rounds) / 2)
    assert figures["imbalance_unmoved"] > figures["imbalance"]

    summary = admin_client.get(f"/api/v1/clusters/{cluster.pk}/outcomes/").json()
    assert (summary["judged"], summary["paid"], summary["paid_share"]) == (1, 1, 1.0)
    assert admin_client.get(f"/api/v1/migrations/{move.pk}/").json()["paid"] is True
