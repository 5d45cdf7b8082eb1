"""What-if: the two methods side by side on the current snapshot, and other settings replayed
over this cluster's stored history (crs.replay on its guest samples) by a worker.

A replay answers "with threshold 25 %, hold 2, the last 24 h would have had 14 moves and p90
imbalance 22 %, against 9 and 31 %": the same history replayed with the current settings is
the comparison (the same model of the cluster on both sides), and what really happened is
given beside it. One stored sample time is one round.
"""

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

import numpy as np
from django import forms
from django.utils import timezone

import crs.balancer
import crs.model
import crs.replay
import crs.usage
from crs.errors import CrsError
from crs.model import Snapshot

from . import events
from .models import Cluster, WhatIf

PERIODS = {"3h": timedelta(hours=3), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
CHANGEABLE = ("threshold", "hold_duration", "margin", "method")
PROGRESS_EVERY = 20  # rounds between two progress updates


# -- (a) bruteforce and TOPSIS on the current snapshot -------------------------------------------------


def compare_methods(snapshot: Snapshot) -> dict:
    """The single move each method ranks best now (threshold and margin set aside, so there is
    always an answer), the imbalance and busiest node after it, and why they differ."""
    picks, reasons = {}, {}
    for method in crs.model.METHODS:
        settings = replace(
            snapshot.settings, method=method, threshold=0.0, margin=0.0, target_imbalance=None, moves_per_round=1
        )
        result = crs.balancer.plan(snapshot.with_settings(settings))
        move = result.plan[0].move if result.plan else None
        reasons[method] = result.explanation.reason
        after = crs.balancer.apply_move(snapshot, move) if move else snapshot
        stats = crs.usage.node_stats(after, snapshot.settings.mode)
        picks[method] = {
            "guests": list(move.guests) if move else [],
            "source": move.source if move else None,
            "target": move.target if move else None,
            "imbalance_after": result.plan[0].imbalance_after if move else result.imbalance,
            "busiest_after": max((max(s.cpu_load, s.mem_load) for s in stats), default=0.0),
        }
    brute, topsis = picks["bruteforce"], picks["topsis"]
    same = (brute["guests"], brute["target"]) == (topsis["guests"], topsis["target"])
    return {
        "imbalance": crs.balancer.plan(snapshot).imbalance,
        **picks,
        "same": same,
        "why": why(brute, topsis, same, reasons["bruteforce"]),
    }


def why(brute: dict, topsis: dict, same: bool, reason: str) -> str:
    if not brute["guests"] and not topsis["guests"]:
        return f"Neither method picks a move now: {reason}"
    if same:
        return "Both methods pick the same move."
    return (
        "Bruteforce picks the move that leaves the lowest imbalance "
        f"({brute['imbalance_after'] * 100:.1f} % after, busiest node at {brute['busiest_after'] * 100:.1f} %). "
        "TOPSIS, as Proxmox does it, weighs four loads after the move (mean and highest CPU and memory, "
        "weights 1, 2, 5 and 10), so it favours relieving the busiest node over evening out the rest "
        f"({topsis['imbalance_after'] * 100:.1f} % after, busiest node at {topsis['busiest_after'] * 100:.1f} %)."
    )


# -- (b) other settings replayed over the stored history ---------------------------------------------


class WhatIfForm(forms.Form):
    """What a what-if changes (fractions, as the API's settings) and how far back it replays."""

    threshold = forms.FloatField(required=False, min_value=0, max_value=1)
    hold_duration = forms.IntegerField(required=False, min_value=0, max_value=1000)
    margin = forms.FloatField(required=False, min_value=0, max_value=1)
    method = forms.ChoiceField(required=False, choices=[(m, m) for m in crs.model.METHODS])
    period = forms.ChoiceField(choices=[(p, p) for p in PERIODS])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():  # every message names its field
            field.error_messages.update(
                {
                    "required": f"{name} is required",
                    "invalid": f"{name} must be a number",
                    "min_value": f"{name} must be at least %(limit_value)s",
                    "max_value": f"{name} must be at most %(limit_value)s",
                    "invalid_choice": f"{name} must be one of: "
                    + ", ".join(str(v) for v, _ in getattr(field, "choices", [])),
                }
            )

    def changes(self) -> dict:
        return {name: self.cleaned_data[name] for name in CHANGEABLE if self.cleaned_data.get(name) not in (None, "")}


def create(cluster: Cluster, form: WhatIfForm, user) -> WhatIf:
    """Store the what-if; its replay (tasks.run_whatif) is queued once that commits."""
    created = WhatIf.objects.create(
        cluster=cluster, created_by=user, period=PERIODS[form.cleaned_data["period"]], changes=form.changes()
    )
    events.whatif_created.send(WhatIf, whatif_id=created.pk)
    return created


def frames(cluster: Cluster, since) -> dict[float, Snapshot]:
    """The cluster at each stored guest-sample time since `since`: the latest snapshot's nodes,
    guests' sizes and rules, with each sampled guest's node and use then."""
    base = cluster.latest_snapshot()
    if base is None:
        raise CrsError("no snapshot yet: the cluster has not been collected")
    by_sid = {g.sid: g for g in base.guests}
    samples: dict[float, dict[str, tuple]] = defaultdict(dict)
    rows = (
        cluster.guest_samples.filter(at__gte=since)
        .order_by("at", "span_s")
        .values_list("at", "guest", "node", "cpu_usage", "mem_usage_bytes")
    )
    nodes = {n.name for n in base.nodes}
    for at, sid, node, cpu, mem in rows.iterator(chunk_size=20000):
        if sid in by_sid and node in nodes:
            samples[at.timestamp()][sid] = (node, cpu, mem)
    return {
        t: replace(
            base,
            guests=tuple(
                replace(by_sid[sid], node=node, cpu_usage=cpu, mem_usage_bytes=mem, state="started", target=None)
                for sid, (node, cpu, mem) in sampled.items()
            ),
        )
        for t, sampled in samples.items()
    }


def figures(result: crs.replay.Replay) -> dict:
    out = crs.replay.summary(result)
    return {
        "moves": out["migrations"]["started"],
        "p90_imbalance": out["imbalance"]["p90"],
        "share_above_threshold": out["share_above_threshold"],
    }


def run(pk: int) -> None:
    """Replay the what-if's settings and the current ones over the same stored history.
    Safe to run twice: a finished one is left as it is."""
    if not WhatIf.objects.filter(pk=pk, state__in=["queued", "running"]).update(state="running", progress=0.0):
        return
    whatif = WhatIf.objects.select_related("cluster__policy").get(pk=pk)
    cluster, policy = whatif.cluster, whatif.cluster.policy
    since = timezone.now() - whatif.period
    try:
        stored = frames(cluster, since)
        if len(stored) < 2:
            raise CrsError("not enough stored history in this period: at least two samples are needed")
        current = replace(policy.engine_settings(), auto_rebalance=True)
        proposed = replace(current, **whatif.changes)
        rounds = len(stored)

        def replayed(settings, offset):
            world = crs.replay.History(stored)

            def progress(done):
                if done % PROGRESS_EVERY == 0 or done == rounds:
                    WhatIf.objects.filter(pk=pk).update(progress=(offset + done) / (2 * rounds))

            return crs.replay.run(world, world.clock(), settings, policy.cooldown.total_seconds(), progress)

        result = {
            "rounds": rounds,
            "hours": (max(stored) - min(stored)) / 3600,
            "proposed": figures(replayed(proposed, 0)),
            "current": figures(replayed(current, rounds)),
            "recorded": recorded(cluster, since),
        }
    except CrsError as exc:
        WhatIf.objects.filter(pk=pk).update(state="failed", error=str(exc), finished_at=timezone.now())
        return
    WhatIf.objects.filter(pk=pk).update(state="done", progress=1.0, result=result, finished_at=timezone.now())


def recorded(cluster: Cluster, since) -> dict:
    """What really happened in the period: migrations started and the p90 of the rounds' imbalance."""
    values = list(cluster.rounds.filter(at__gte=since).values_list("imbalance", flat=True))
    return {
        "moves": cluster.migrations.filter(started_at__gte=since).count(),
        "p90_imbalance": float(np.percentile(values, 90)) if values else None,
    }
