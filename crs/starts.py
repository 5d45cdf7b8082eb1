"""Whether an approved step may start now: its turn, its slot, the claims ahead of it, an
alternative target, or what it waits for (the decisions dashboard/executor.py's admit applies).

Two questions, because a fresh snapshot costs a collect and is taken only for a step whose turn
it is: `turn` (no approved move of a higher kind, none earlier in its plan, a cluster slot and
room on both its nodes) on what the cluster runs and queues; then `decide` on the fresh
snapshot with the claims of the moves ahead of it (`ahead`): a locked guest waits; a target
that no longer takes it gives way to its first alternative the snapshot allows; with none, a
step another move's claim keeps off its target, or that goes into room a move ahead of it frees,
waits, naming that move; any other stale step expires; the rest start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from . import balancer, claims, locks, mandatory, planner, precedence
from .decision import Move
from .model import Guards, Snapshot


@dataclass(frozen=True, slots=True)
class Step:
    """An approved step as the executor reads it; `approved_at`: when it was approved (0: stored
    approved with no time), with its id after it, for the order of claims."""

    name: str  # as the admin reads it: "migration 12"
    move: Move
    kind: str = "balancing"
    state: str = "approved"
    approved_at: tuple[float, int] = (0.0, 0)
    alternatives: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Queue:
    """What the cluster runs and queues beside the step, for its turn."""

    approved_kinds: frozenset[str] = frozenset()  # kinds of the other approved steps
    earlier_in_plan: bool = False  # an approved step of its own plan comes before it
    running: tuple[tuple[str, str], ...] = ()  # (source, target) of each running migration
    max_concurrent: int = 1
    max_per_node: int = 1


@dataclass(frozen=True, slots=True)
class Start:
    """What becomes of the step now: it starts (to `target`, its own or an alternative), waits
    (`reason`: whose move or which lock; it is queued again), or expires (`reason`)."""

    verdict: Literal["start", "wait", "expire"]
    target: str = ""
    reason: str = ""


def turn(step: Step, queue: Queue) -> bool:
    """Whether it is the step's turn and a slot is free: its kind's turn (approved moves of a
    higher kind go first, crs.precedence), its turn in plan order, a cluster slot, and room on
    both its nodes."""
    if any(precedence.outranks(k, step.kind) for k in queue.approved_kinds) or queue.earlier_in_plan:
        return False
    if len(queue.running) >= queue.max_concurrent:
        return False
    return all(
        sum(node in pair for pair in queue.running) < queue.max_per_node
        for node in (step.move.source, step.move.target)
    )


def ahead(step: Step, holding: Sequence[Step]) -> list[tuple[str, Move]]:
    """The claims the step must leave room for, named as the admin reads them: every running
    move's, then those of the moves approved before it (the first claim holds, as in Placement),
    so of two moves the later one never takes the earlier one's room. Not those of kinds it
    outranks: they wait for it (`turn`), as a round's plan of its kind expires them."""
    first = [
        s
        for s in holding
        if s.state == "running" or (s.approved_at < step.approved_at and not precedence.outranks(step.kind, s.kind))
    ]
    first.sort(key=lambda s: (s.state != "running", s.approved_at))
    return [(s.name, s.move) for s in first]


def unguarded(kind: str) -> bool:
    """Owed moves and a power-down's emptying (an evacuation ranked last): Proxmox's placement
    rules, no guards against thrashing."""
    return kind in precedence.MANDATORY or kind in precedence.EMPTYING


def stale_reason(snapshot: Snapshot | None, move: Move, kind: str, guards: Guards = Guards()) -> str:
    """Why `snapshot` (judged under the cluster's settings) makes the move illegal or unwise; ""
    if it fits, or there is no snapshot yet. Unguarded kinds follow Proxmox's placement rules;
    the others the balancer's, with the guards."""
    if snapshot is None:
        return ""
    if unguarded(kind):
        return mandatory.stale_reason(snapshot, move, kind) or ""
    return balancer.stale_reason(snapshot, move, guards) or ""


def decide(step: Step, fresh: Snapshot, claims_ahead: Sequence[tuple[str, Move]], guards: Guards = Guards()) -> Start:
    """What becomes of a step whose turn it is, on a fresh snapshot (under the cluster's
    settings) with the claims of the moves ahead of it."""
    if reason := locks.waits(fresh, step.move.guests):
        return Start("wait", reason=reason)
    held = claims.held(fresh, [m for _, m in claims_ahead])
    move = step.move
    if stale_reason(held, move, step.kind, guards):
        if target := alternative(step, held, guards):
            move = replace(move, target=target)
        elif whose := waits_for(step, fresh, claims_ahead, guards):
            return Start("wait", reason=f"waits: {whose}")
    if reason := stale_reason(held, move, step.kind, guards):
        return Start("expire", move.target, reason)
    return Start("start", move.target)


def alternative(step: Step, snapshot: Snapshot, guards: Guards = Guards()) -> str | None:
    """The step's first alternative target the snapshot allows, if its own target no longer takes it."""
    if not planner.target_refusal(snapshot, step.move.guests, step.move.target):
        return None  # stale for another reason: an alternative would not help
    for target in step.alternatives:
        if balancer.stale_reason(snapshot, replace(step.move, target=target), guards) is None:
            return target
    return None


def waits_for(step: Step, fresh: Snapshot, claims_ahead: Sequence[tuple[str, Move]], guards: Guards = Guards()) -> str:
    """Whose move the step waits for, in the admin's words; "" if none: a claim that keeps it
    off a target it fits now, or a move ahead of it whose end frees the room it needs there."""
    move = step.move
    if not stale_reason(fresh, move, step.kind, guards):
        return claims.holder(fresh, move, claims_ahead)
    for name, ended in claims.ending(fresh, move, claims_ahead):
        if not stale_reason(claims.held(ended, [m for _, m in claims_ahead]), move, step.kind, guards):
            return f"{move.target}'s room is freed when {name} ends"
    return ""
