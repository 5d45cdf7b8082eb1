"""Expiry: why a recommendation, or an approved migration not yet started, stops waiting.

The causes, named here and nowhere else (each sets the migration's reason):

* replaced    — the pending plan no longer holds on fresh data (`verdict`: a step became
                illegal or pointless, its total gain fell below the margin, a step was
                rejected) or a new plan is better by at least the margin;
* overdue     — nobody decided within the recommendation expiry;
* outdated    — the latest round no longer supports a move (below threshold or load floor, no candidate);
* behind_rejected — a step computed behind a rejected step (re-planned once the steps before
                it are decided: they stay);
* stopped     — an emergency stop;
* stale       — at approval, the cluster's latest snapshot no longer allows it (guest moved,
                cooldown, rule, ...): the engine names what changed;
* stale_at_start — the same check on a fresh snapshot taken just before it starts;
* unverifiable — no fresh snapshot could be taken to re-check it before it starts;
* outranked   — a plan of a higher kind (evacuation > rule fix > pressure relief >
                balancing, crs.precedence) took over: the lower kind's pending moves go;
* maintenance_ended — the node an evacuation was emptying left maintenance.

A recommendation expires from `suggested`, an approved migration from `approved`; both
through Migration.objects.transition, so each expiry is audited once.
"""

from dataclasses import dataclass

import crs.balancer
import crs.decision
import crs.imbalance
import crs.precedence
import crs.usage
from crs.decision import RoundResult, total_gain
from crs.model import Snapshot

from .models import Cluster, Migration

# Decisions that mean "no move is worth making now". Not `holding`: the engine restarts the
# hold after every recommendation, and the imbalance is still above the threshold meanwhile.
# Not `below-margin` either: the pending plan's own gain is re-checked (`verdict`).
NO_LONGER_WARRANTED = frozenset({"below-threshold", "below-load-floor", "no-candidate"})
NOISE = 1e-9  # a step gaining less than this gains nothing


@dataclass(frozen=True)
class Verdict:
    """A round's judgement of the pending plan on fresh data."""

    replace: str  # why the pending plan must go; "" while it holds
    kept: str = ""  # while it holds and the round computed a plan of its own: the kept plan and why it stays


def verdict(cluster: Cluster, snapshot: Snapshot, pending: list[Migration], result: RoundResult) -> Verdict:
    """Whether the pending plan (its steps still suggested, in order) holds on fresh data.

    The one place that decides whether recommendations stay: a plan is kept round after
    round, re-checked on fresh data, so admins have time to read and approve it. It goes
    when a step became illegal (the engine's stale check, with the earlier steps applied)
    or pointless, its total gain fell below the margin, or the round's new plan is better by
    at least the margin. Both plans are judged on the same fresh snapshot, with as many moves
    each, and in the margin's own sense, a share of the imbalance they start from: the new
    plan's first moves replace the kept ones when their total gain exceeds what the kept plan
    still gains by at least the margin. (Comparing the two end points relative to the kept
    plan's end instead makes any small difference look large once the plan ends low, and
    replaced every plan within a minute on the demo. Comparing a whole new plan with the
    moves left of a plan partly carried out, or cut short by a rejection, replaced the rest
    of a plan 4 s after its first move was done, on the demo, by much the same moves: the
    new plan gained more only by having more moves.) The steps before a rejected step were
    computed without it and stay; the ones behind it went when it was rejected.
    """
    if result.decision in NO_LONGER_WARRANTED:
        return Verdict(f"no longer recommended: {result.explanation.reason}")
    plan = pending[0].plan
    if cluster.migrations.filter(plan=plan, state__in=["approved", "running"]).exists():
        return Verdict("")  # part of it runs: its remaining steps are kept as they are
    guards = cluster.guards()
    settings = snapshot.settings
    before = current = _imbalance(snapshot)
    for m in pending:
        if reason := crs.balancer.stale_reason(snapshot, m.as_move(), guards):
            return Verdict(f"step #{m.pk} no longer holds: {reason}")
        snapshot = crs.balancer.apply_move(snapshot, m.as_move())
        after = _imbalance(snapshot)
        if after >= current - NOISE:
            return Verdict(f"step #{m.pk} no longer helps: imbalance {current:.1%} → {after:.1%}")
        current = after
    gain = (before - current) / before if before else 0.0
    if gain < settings.margin:
        return Verdict(f"its total gain fell to {gain:.1%}, below the margin {settings.margin:.0%}")
    n = len(pending)
    kept = (
        f"Plan {plan} is kept: on fresh data its {n} move{'s' if n > 1 else ''}, starting with {_first(pending[0])}, "
        f"take{'' if n > 1 else 's'} the imbalance from {before:.1%} to {current:.1%}, a total gain of {gain:.1%}"
    )
    if result.decision != "migrate" or not result.plan:
        # Still above the threshold but the round makes no plan of its own (its hold counter
        # restarted after the plan was made): the status describes the plan the list shows.
        return Verdict("", f"{kept}; this round makes no plan of its own.")
    rival = result.plan[:n]  # as many moves as the kept plan has left
    if _same(pending, rival):
        return Verdict("", f"{kept}; this round's plan is the same.")
    new_gain = total_gain(rival)
    moves = _moves(len(rival), len(result.plan))
    if new_gain - gain >= settings.margin:
        return Verdict(
            f"a new plan gains {new_gain:.1%} {moves} on fresh data where this one still gains {gain:.1%}: "
            f"better by at least the margin {settings.margin:.0%}"
        )
    return Verdict(
        "",
        f"{kept}; this round's plan, starting with {_first(rival[0].move)}, would gain {new_gain:.1%} "
        f"{moves}, not better by the margin {settings.margin:.0%}.",
    )


def _moves(compared: int, planned: int) -> str:
    """The new plan's moves weighed against the kept plan's, in words: "with 2 moves", or
    "with its first 2 moves of 3" when the new plan has more. An admin read "a new plan gains
    32.5% with 2 moves", then saw a plan of 3 suggested, and could not tell why."""
    if compared == planned:
        return f"with {compared} move{'s' if compared > 1 else ''}"
    first = "its first move" if compared == 1 else f"its first {compared} moves"
    return f"with {first} of {planned}"


def _first(move) -> str:
    return f"{move.leader} {move.source} → {move.target}"


def replaced(pending: list[Migration], reason: str) -> list[int]:
    return _expire([m.pk for m in pending], reason)


def behind_rejected(migration: Migration) -> list[int]:
    """The steps computed behind a rejected step: their math assumed it. The steps before it
    stay (`verdict`); a plan after them is made once they are decided."""
    later = [m.pk for m in migration.dependents() if m.state == "suggested"]
    return _expire(
        later, f"computed after #{migration.pk}, which was rejected; re-planned once the moves before it are decided"
    )


def stopped(cluster: Cluster, actor) -> list[int]:
    """Emergency stop: every approved migration not yet started expires."""
    pks = cluster.migrations.filter(state="approved").values_list("pk", flat=True)
    reason = "emergency stop: automation paused"
    return [pk for pk in pks if Migration.objects.transition(pk, "approved", "expired", actor, reason=reason)]


def _same(pending: list[Migration], plan) -> bool:
    return [(m.leader, m.target) for m in pending] == [(s.move.leader, s.move.target) for s in plan]


def _imbalance(snapshot: Snapshot) -> float:
    stats = crs.usage.node_stats(snapshot, snapshot.settings.mode)
    return crs.imbalance.imbalance([s.load for s in stats], snapshot.settings.imbalance_scale)


def overdue(cluster: Cluster, now) -> list[int]:
    """Recommendations nobody decided on within the recommendation expiry: the data they rest on is old."""
    expiry = cluster.policy.recommendation_expiry
    late = cluster.migrations.filter(state="suggested", suggested_at__lt=now - expiry)
    return _expire(
        late.values_list("pk", flat=True), f"not decided within the recommendation expiry of {_human(expiry)}"
    )


def outdated(cluster: Cluster, result: RoundResult) -> list[int]:
    """Recommendations the latest round no longer supports, if it supports none."""
    if result.decision not in NO_LONGER_WARRANTED:
        return []
    pending = cluster.migrations.filter(state="suggested").exclude(kind__in=crs.precedence.MANDATORY)
    reason = f"no longer recommended: {result.explanation.reason}"
    return _expire(pending.values_list("pk", flat=True), reason, {"decision": result.decision})


def stale(migration: Migration, actor) -> bool:
    """At approval: expire it (True) if the cluster's latest snapshot no longer allows the move."""
    reason = migration.stale_reason(migration.cluster.latest_snapshot())
    return bool(reason) and Migration.objects.transition(migration.pk, "suggested", "expired", actor, reason=reason)


def stale_at_start(migration: Migration, snapshot) -> bool:
    """Just before it starts: expire an approved migration (True) that a fresh snapshot no longer allows."""
    reason = migration.stale_reason(snapshot)
    return bool(reason) and Migration.objects.transition(migration.pk, "approved", "expired", None, reason=reason)


def unverifiable(migration_id: int, error: Exception) -> bool:
    """Just before it starts: no fresh snapshot to re-check it against, so it is not started."""
    reason = f"could not re-check it on a fresh snapshot: {error}"
    return Migration.objects.transition(migration_id, "approved", "expired", None, reason=reason)


def outranked(cluster: Cluster, kind: str, plan: int, why: str) -> list[int]:
    """A new plan of `kind` takes over: pending moves of lower kinds (suggested, or approved and
    not started) expire with the reason; a running migration is never cut short."""
    lower = [k for k in crs.precedence.KINDS if crs.precedence.outranks(kind, k)]
    reason = f"replaced by {kind} plan {plan}, which goes first: {why}"
    out = []
    for m in cluster.migrations.filter(kind__in=lower, state__in=["suggested", "approved"]).order_by("plan", "step"):
        if Migration.objects.transition(m.pk, m.state, "expired", None, {"outranked_by": plan}, reason=reason):
            out.append(m.pk)
    return out


def maintenance_ended(cluster: Cluster, node: str) -> list[int]:
    """The evacuation of `node` stops where it is: the node left maintenance."""
    reason = f"{node} left maintenance before this move started"
    out = []
    for m in cluster.migrations.filter(
        kind__in=crs.precedence.EMPTYING, source=node, state__in=["suggested", "approved"]
    ):
        if Migration.objects.transition(m.pk, m.state, "expired", None, reason=reason):
            out.append(m.pk)
    return out


def _expire(pks, reason: str, details: dict | None = None) -> list[int]:
    """suggested → expired for each of `pks` still pending; the ones this call expired."""
    return [pk for pk in pks if Migration.objects.transition(pk, "suggested", "expired", None, details, reason=reason)]


def _human(duration) -> str:
    minutes = duration.total_seconds() / 60
    return f"{minutes:g} minutes" if minutes != 1 else "1 minute"
