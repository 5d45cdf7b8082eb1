"""Claims: the capacity an approved or running move holds on its target, until the move ends.

As OpenStack Placement claims a move's target when it is scheduled and keeps the source's
allocation until the move succeeds (docs/design.md "Claims"), a claimed guest counts on its
source *and* on its target: the room it goes to is taken from approval, the room it leaves is
not free until it has left. A claim is applied as Proxmox's HA manager counts a guest it
migrates (state `migrate`, `target` set), so every capacity check, placement score and the
round's wait for moves under way see it without knowing of claims. The source's data wins: a
move whose guests it shows moving, moved or gone claims nothing more. A claim is released when
its move ends, expires or is rejected: the move is no longer among those given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from .decision import Move
from .model import Snapshot
from .planned import PlannedMove
from .planner import apply_move, target_refusal
from .precedence import outranks

HOLDING = ("approved", "running")  # the states of a move that holds a claim


def held(snapshot: Snapshot, moves: Iterable[Move]) -> Snapshot:
    """`snapshot` with the claims of `moves` applied: each move's guests, still started on its
    source, counted on its target as well."""
    guests = {g.sid: g for g in snapshot.guests}
    nodes = {n.name for n in snapshot.nodes}
    claimed: dict[str, str] = {}
    for move in moves:
        present = [guests.get(sid) for sid in move.guests]
        if move.target in nodes and all(g and g.node == move.source and g.state == "started" for g in present):
            claimed.update(dict.fromkeys(move.guests, move.target))
    if not claimed:
        return snapshot
    return replace(
        snapshot,
        guests=tuple(
            replace(g, state="migrate", target=claimed[g.sid]) if g.sid in claimed else g for g in snapshot.guests
        ),
    )


def against(moves: Iterable[PlannedMove], kind: str | None = None) -> list[Move]:
    """The claims a new plan of `kind` must leave room for: every running move's, and those of
    approved moves it does not outrank (it expires the others, crs.precedence). All of them
    when `kind` is None."""
    return [
        m.move
        for m in moves
        if m.state == "running" or (m.state == "approved" and (kind is None or not outranks(kind, m.kind)))
    ]


def holder(snapshot: Snapshot, move: Move, claims: Sequence[tuple[str, Move]]) -> str:
    """Whose claim keeps `move` off its target, as the admin reads it ("node03's memory is
    claimed by migration 12"): the first of `claims` (name, move), in order, after which the
    target no longer takes it. "" if the target is full without them, or takes it with them."""
    if target_refusal(snapshot, move.guests, move.target):
        return ""
    for name, claim in claims:
        snapshot = held(snapshot, (claim,))
        if refused := target_refusal(snapshot, move.guests, move.target):
            what = "memory" if refused == "memory" else "CPU"
            return f"{move.target}'s {what} is claimed by {name}"
    return ""


def ending(snapshot: Snapshot, move: Move, claims: Sequence[tuple[str, Move]]) -> Iterator[tuple[str, Snapshot]]:
    """The room `move` waits for when its target is full now: for each of `claims` (name, move)
    that leaves that target, in order, its name and `snapshot` once it and the earlier ones that
    leave it have ended (their guests started on their targets). A step into the room a running
    move frees (a swap) waits for that move instead of expiring; the caller judges each."""
    for name, claim in claims:
        if claim.source != move.target:
            continue
        gone = set(claim.guests)
        snapshot = apply_move(snapshot, claim.guests, claim.source, claim.target)
        snapshot = replace(
            snapshot,
            guests=tuple(replace(g, state="started", target=None) if g.sid in gone else g for g in snapshot.guests),
        )
        yield name, snapshot
