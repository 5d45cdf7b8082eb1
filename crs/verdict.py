"""The round's judgement of the pending plan on fresh data: kept, with its words, or replaced.

A plan is kept round after round, re-checked on fresh data, so admins have time to read and
approve it. It goes at once when a step became illegal (the stale check, with the earlier
steps applied) or pointless, or no move is warranted any more. It goes when its total gain
fell below the margin, or the round's new plan is better by at least the margin, only once
it has stood the minimum dwell: a plan replaced every minute by a slightly better one
expires before anybody can decide on it. Both plans are judged on the same fresh snapshot,
with as many moves each, and in the margin's own sense: a share of the imbalance they start
from. The steps before a rejected step were computed without it and stay; the ones behind
it went when it was rejected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from .balancer import apply_move, stale_reason
from .decision import Move, RoundResult, total_gain
from .imbalance import NOISE, cluster_imbalance, relative_gain
from .model import Guards, Snapshot
from .planned import PlannedMove
from .usage import demand, node_stats

# Decisions that mean "no move is worth making now". Not `holding`: the engine restarts the
# hold after every recommendation, and the imbalance is still above the threshold meanwhile.
# Not `below-margin` either: the pending plan's own gain is re-checked.
NO_LONGER_WARRANTED = frozenset({"below-threshold", "below-load-floor", "no-candidate"})


@dataclass(frozen=True, slots=True)
class PlanFigures:
    """One plan's figures on one snapshot, as data: the page says them once, labelled "now",
    and draws each node's load after the plan on its bars (no sentence parsed)."""

    plan: int | None
    moves: int
    before: float  # the imbalance now
    after: float  # after all its moves
    gain: float  # relative: (before - after) / before
    nodes_after: dict[str, tuple[float, float]]  # node -> CPU and memory load after, as the bars measure them
    moved: tuple[MovedLoad, ...]  # each move's own share, in order: its card draws it on the bars

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "moves": self.moves,
            "imbalance": self.before,
            "imbalance_after": self.after,
            "gain": self.gain,
            "node_usage_after": {name: {"cpu": c, "memory": m} for name, (c, m) in self.nodes_after.items()},
            "moved_load": [m.to_dict() for m in self.moved],
        }


@dataclass(frozen=True, slots=True)
class MovedLoad:
    """The load one move takes off its source and puts on its target, each as a share of that
    node (CPU, memory), in the bars' measure: pointing at a card shows what leaves and arrives."""

    leader: str
    source: str
    target: str
    leaves: tuple[float, float]
    arrives: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "source": self.source,
            "target": self.target,
            "leaves": {"cpu": self.leaves[0], "memory": self.leaves[1]},
            "arrives": {"cpu": self.arrives[0], "memory": self.arrives[1]},
        }


def plan_figures(snapshot: Snapshot, moves: Iterable[Move], plan: int | None) -> PlanFigures:
    """`moves` applied in order to `snapshot`: the imbalance they lead to and each node's load after."""
    before = cluster_imbalance(snapshot)
    moved = _moved(snapshot, moves := list(moves))
    for move in moves:
        snapshot = apply_move(snapshot, move)
    after = cluster_imbalance(snapshot)
    return PlanFigures(plan, len(moves), before, after, relative_gain(before, after), _loads(snapshot), moved)


def _loads(snapshot: Snapshot) -> dict[str, tuple[float, float]]:
    """Each node's CPU and memory load as the round's node bars show them (dynamic: measured)."""
    return {s.name: (s.cpu_load, s.mem_load) for s in node_stats(snapshot, "dynamic")}


def _moved(snapshot: Snapshot, moves: Iterable[Move]) -> tuple[MovedLoad, ...]:
    """Each move's bundle demand (what `apply_move` shifts) over its source's and target's size."""
    guests = {g.sid: g for g in snapshot.guests}
    nodes = {n.name: n for n in snapshot.nodes}
    out = []
    for move in moves:
        cpu, mem = map(sum, zip(*(demand(guests[sid], "dynamic") for sid in move.guests)))
        share = {name: (cpu / nodes[name].cpus, mem / nodes[name].memory_bytes) for name in (move.source, move.target)}
        out.append(MovedLoad(move.leader, move.source, move.target, share[move.source], share[move.target]))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Verdict:
    replace: str = ""  # why the pending plan must go; "" while it holds
    kept: str = ""  # while it holds: the kept plan on fresh data and why it stays
    figures: PlanFigures | None = None  # while it holds: the same figures as data


def verdict(
    snapshot: Snapshot,
    pending: list[PlannedMove],
    result: RoundResult,
    guards: Guards,
    running: bool,
    now: datetime,
) -> Verdict:
    """Whether the pending plan (its steps still suggested, in order) holds on fresh data.
    `running`: part of the plan is approved or running, so its remaining steps stay as they are."""
    if result.decision in NO_LONGER_WARRANTED:
        return Verdict(f"no longer recommended: {result.explanation.reason}")
    if running:
        return Verdict()
    fresh = snapshot
    before = current = cluster_imbalance(snapshot)
    for m in pending:
        if reason := stale_reason(snapshot, m.move, guards):
            return Verdict(f"step {m.name} no longer holds: {reason}")
        snapshot = apply_move(snapshot, m.move)
        after = cluster_imbalance(snapshot)
        if after >= current - NOISE:
            return Verdict(f"step {m.name} no longer helps: imbalance {current:.1%} → {after:.1%}")
        current = after
    gain = relative_gain(before, current)
    moved = _moved(fresh, (m.move for m in pending))  # every guest there: no step is stale
    figures = PlanFigures(pending[0].plan, len(pending), before, current, gain, _loads(snapshot), moved)
    margin = snapshot.settings.margin
    stays = _dwelling(pending, snapshot.settings.minimum_dwell, now)
    n = len(pending)
    kept = (
        f"Plan {pending[0].plan} is kept: on fresh data its {n} move{'s' if n > 1 else ''}, starting with "
        f"{_first(pending[0].move)}, take{'' if n > 1 else 's'} the imbalance from {before:.1%} to {current:.1%}, "
        f"a total gain of {gain:.1%}"
    )
    if gain < margin:
        if stays:
            return Verdict("", f"{kept}, below the margin {margin:.0%}; {stays}.", figures)
        return Verdict(f"its total gain fell to {gain:.1%}, below the margin {margin:.0%}")
    if result.decision != "migrate" or not result.plan:
        # Still above the threshold but the round makes no plan of its own (its hold counter
        # restarted after the plan was made): the status describes the plan the list shows.
        return Verdict("", f"{kept}; this round makes no plan of its own.", figures)
    rival = result.plan[:n]  # as many moves as the kept plan has left
    if [(m.move.leader, m.move.target) for m in pending] == [(s.move.leader, s.move.target) for s in rival]:
        return Verdict("", f"{kept}; this round's plan is the same.", figures)
    new_gain = total_gain(rival)
    moves = _moves(len(rival), len(result.plan))
    offer = f"this round's plan, starting with {_first(rival[0].move)}, would gain {new_gain:.1%} {moves}"
    if new_gain - gain < margin:
        return Verdict("", f"{kept}; {offer}, not better by the margin {margin:.0%}.", figures)
    if stays:
        return Verdict("", f"{kept}; {offer}, better by the margin {margin:.0%}, but {stays}.", figures)
    return Verdict(
        f"a new plan gains {new_gain:.1%} {moves} on fresh data where this one still gains {gain:.1%}: "
        f"better by at least the margin {margin:.0%}"
    )


def remaining(
    held: Snapshot, cluster: Snapshot, under_way: list[PlannedMove], pending: list[PlannedMove], guards: Guards
) -> PlanFigures | None:
    """A plan partly under way keeps its waiting steps as they are, unjudged; their figures still
    say what the plan does from here: from the imbalance now (on `held`, the round's own measure)
    to where its moves not yet done leave `cluster`, each node's load then (the bars' marks), and
    each waiting step's own moved load (its card). None if a waiting step no longer holds:
    nothing is drawn for a step that cannot be made as it stands."""
    guests = {g.sid: g.node for g in cluster.guests}
    arriving = [m for m in under_way if all(guests.get(sid) == m.move.source for sid in m.move.guests)]
    for m in arriving:
        cluster = apply_move(cluster, m.move)
    after = cluster
    for m in pending:
        if stale_reason(after, m.move, guards):
            return None
        after = apply_move(after, m.move)
    figures = plan_figures(cluster, (m.move for m in pending), pending[0].plan)
    before = cluster_imbalance(held)
    gain = relative_gain(before, figures.after)
    return replace(figures, moves=len(arriving) + len(pending), before=before, gain=gain)


def _dwelling(pending: list[PlannedMove], dwell_s: float, now: datetime) -> str:
    """Why the plan stays although a better one, or its own small gain, would replace it: it has
    not stood the minimum dwell yet. "" = it has (a step with no `suggested_at` counts as having)."""
    if any(m.suggested_at is None for m in pending):
        return ""
    stood = (now - min(m.suggested_at for m in pending if m.suggested_at is not None)).total_seconds()
    if stood >= dwell_s:
        return ""
    return f"it stays until it has stood the minimum dwell of {dwell_s / 60:g} minutes ({stood / 60:.0f} min so far)"


def _moves(compared: int, planned: int) -> str:
    """The new plan's moves weighed against the kept plan's: "with 2 moves", or "with its
    first 2 moves of 3" when the new plan has more, so the words match the plan then shown."""
    if compared == planned:
        return f"with {compared} move{'s' if compared > 1 else ''}"
    first = "its first move" if compared == 1 else f"its first {compared} moves"
    return f"with {first} of {planned}"


def _first(move: Move) -> str:
    return f"{move.leader} {move.source} → {move.target}"
