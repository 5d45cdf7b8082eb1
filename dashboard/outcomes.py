"""The outcome of every move: the imbalance measured after it, next to what was predicted.

An admin trusts a balancer that shows its record: each done migration gets the imbalance
of the first stored round 5 minutes and 1 hour after it finished (a round is a measurement
of the whole cluster), and a plan's outcome is its last step's. Nothing is computed that
the rounds did not measure: with no round soon after the moment (collection was down),
the figure stays empty rather than borrow a later, unrelated one.

Once its horizon has passed (the cluster's benefit horizon, an hour by default: the time its
benefit was reckoned over), a balancing or pressure move is judged paid or not (crs.paid) on
the rounds of that horizon: their measured node use, with the moved guests' own
measured use (the guest samples) counted back on the source for the loads without the move.
"""

from bisect import bisect_right
from datetime import datetime, timedelta
from typing import cast

from django.db.models import Q
from django.utils import timezone

import crs.paid
import crs.snapshot
from crs.usage import NodeStats

from .models import Cluster, GuestSample, Migration, Policy, Round

AFTER = {"observed_5m": timedelta(minutes=5), "observed_1h": timedelta(hours=1)}
# The round that measures a moment must come within this long after it; later is another story.
WITHIN = timedelta(minutes=10)
SUMMARY_DAYS = 7
JUDGED = {"balancing": "even", "pressure": "pressure"}  # kind → crs.paid's objective; owed moves are not judged


def first_round_after(cluster_id: int, moment) -> float | None:
    """The imbalance of the first round at or after `moment`, if one came within WITHIN."""
    rounds = Round.objects.filter(cluster_id=cluster_id, at__gte=moment, at__lt=moment + WITHIN)
    return rounds.order_by("at").values_list("imbalance", flat=True).first()


def measure(cluster_id: int, now=None) -> list[int]:
    """Fill in the outcomes whose moment has passed: called after every round, in the round's
    process (tasks.run_round), so it is no Celery message of its own. Each figure is written
    once, by a conditional UPDATE, so two workers measuring at once agree. Returns the
    migrations it measured, once each (the round's task pushes them to the page).
    `now`: the clock, for replaying history."""
    now = now or timezone.now()
    measured = []
    for field, delay in AFTER.items():
        due = Migration.objects.filter(
            Q(**{f"{field}__isnull": True}),
            cluster_id=cluster_id,
            state="done",
            finished_at__lte=now - delay,
            finished_at__gt=now - delay - WITHIN,  # older ones missed their round: never measured
        )
        for pk, finished_at in due.values_list("pk", "finished_at"):
            value = first_round_after(cluster_id, cast(datetime, finished_at) + delay)  # filtered: finished
            if value is not None and Migration.objects.filter(pk=pk, **{f"{field}__isnull": True}).update(
                **{field: value}
            ):
                measured.append(pk)
    measured += judge(cluster_id, now)
    return list(dict.fromkeys(measured))


def judge(cluster_id: int, now) -> list[int]:
    """Give each done move whose horizon ended within WITHIN its verdict (crs.paid), written
    once by a conditional UPDATE. A move with no round in its horizon stays unjudged."""
    horizon, scale = Policy.objects.values_list("benefit_horizon", "imbalance_scale").get(cluster_id=cluster_id)
    due = Migration.objects.filter(
        cluster_id=cluster_id,
        state="done",
        kind__in=JUDGED,
        paid__isnull=True,
        finished_at__lte=now - horizon,
        finished_at__gt=now - horizon - WITHIN,
    )
    moves = list(due.values_list("pk", "kind", "source", "guests", "finished_at"))
    if not moves:
        return []
    stored = Cluster.objects.filter(pk=cluster_id).values_list("snapshot", flat=True).get()
    sizes = {} if stored is None else {n.name: n for n in crs.snapshot.parse(stored).nodes}
    judged = []
    for pk, kind, source, guests, finished_at in moves:
        samples = measurements(cluster_id, guests, cast(datetime, finished_at), horizon, sizes)  # filtered: finished
        verdict = crs.paid.judge(JUDGED[kind], source, samples, horizon.total_seconds(), scale)
        if verdict is not None and Migration.objects.filter(pk=pk, paid__isnull=True).update(
            paid=verdict.paid, paid_figures=verdict.to_dict()
        ):
            judged.append(pk)
    return judged


def measurements(
    cluster_id: int, guests: list[str], finished_at: datetime, horizon: timedelta, sizes: dict
) -> list[crs.paid.Measured]:
    """The rounds of the `horizon` after `finished_at`, each with the moved guests' latest sample at
    or before it (summed over the bundle; where the leader ran). Node sizes: the latest snapshot's."""
    rounds = Round.objects.filter(
        cluster_id=cluster_id, span_s=0, at__gt=finished_at, at__lte=finished_at + horizon
    ).values_list("at", "node_usage")
    rows = list(
        GuestSample.objects.filter(
            cluster_id=cluster_id, guest__in=guests, at__gt=finished_at - WITHIN, at__lte=finished_at + horizon
        )
        .order_by("at")
        .values_list("at", "guest", "node", "cpu_usage", "mem_usage_bytes")
    )
    times = [r[0] for r in rows]
    out = []
    for at, usage in rounds.order_by("at"):
        seen = rows[: bisect_right(times, at)]
        latest = {guest: (node, cpu, mem) for _, guest, node, cpu, mem in seen}
        if guests[0] not in latest:
            continue
        nodes = tuple(
            NodeStats(
                name,
                u["cpu"] * sizes[name].cpus,
                sizes[name].cpus,
                u["memory"] * sizes[name].memory_bytes,
                sizes[name].memory_bytes,
            )
            for name, u in usage.items()
            if name in sizes
        )
        cpu, mem = sum(v[1] for v in latest.values()), sum(v[2] for v in latest.values())
        out.append(crs.paid.Measured(nodes, latest[guests[0]][0], cpu, mem))
    return out


def change(before: float, after: float | None) -> float | None:
    """The relative change of the imbalance (−0.18: 18 % lower); None without a figure."""
    return None if after is None or not before else (after - before) / before


def mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def plan_outcomes(steps: list[Migration]) -> list[dict]:
    """Per finished plan (every step done): imbalance before its first step, predicted after
    its last, and observed after its last step finished."""
    plans: dict[int | None, list[Migration]] = {}
    for m in steps:
        plans.setdefault(m.plan, []).append(m)
    out = []
    for number, members in plans.items():
        members.sort(key=lambda m: m.step)
        last = max(members, key=lambda m: cast(datetime, m.finished_at))  # done: finished
        out.append(
            {
                "plan": number,
                "moves": len(members),
                "finished_at": last.finished_at,
                "imbalance_before": members[0].imbalance_before,
                "predicted": members[-1].imbalance_after,
                "observed_5m": last.observed_5m,
                "observed_1h": last.observed_1h,
            }
        )
    return sorted(out, key=lambda p: p["finished_at"], reverse=True)


def summary(cluster: Cluster, days: int = SUMMARY_DAYS) -> dict:
    """The record of the last `days`: moves done, the mean predicted change of the imbalance and
    the mean observed one (5 minutes and 1 hour after), how many of the judged moves paid, and
    each finished plan's outcome."""
    since = timezone.now() - timedelta(days=days)
    done = list(cluster.migrations.filter(state="done", finished_at__gte=since).order_by("finished_at"))
    open_plans = set(
        cluster.migrations.filter(state__in=["suggested", "approved", "running"]).values_list("plan", flat=True)
    )
    finished = [m for m in done if m.plan is not None and m.plan not in open_plans]
    return {
        "days": days,
        "moves": len(done),
        "measured": sum(m.observed_5m is not None or m.observed_1h is not None for m in done),
        "predicted_change": mean([change(m.imbalance_before, m.imbalance_after) for m in done]),
        "observed_change_5m": mean([change(m.imbalance_before, m.observed_5m) for m in done]),
        "observed_change_1h": mean([change(m.imbalance_before, m.observed_1h) for m in done]),
        "judged": sum(m.paid is not None for m in done),
        "paid": sum(m.paid is True for m in done),
        "paid_share": crs.paid.share([m.paid for m in done]),
        "plans": plan_outcomes(finished),
    }
