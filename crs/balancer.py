"""One balancing round, and multi-step plans for previews.

Policy calls the math: this module decides *whether* to move (gate, threshold, hold
duration, margin) and asks `moves` for the best candidate. A round is a pure function
(snapshot, settings, round state) → result with a new state, so the web side persists
the hold counter and any worker can run the next round (reference/proxmox-crs.md §4.4).
"""

from __future__ import annotations

from dataclasses import replace

from .bundles import movable_bundles
from .decision import Decision, Explanation, Move, RoundResult, RoundState
from .imbalance import imbalance, relative_gain
from .model import Guards, Settings, Snapshot
from .moves import Cluster, Scored, best_bruteforce, best_topsis
from .rules import compile_rules
from .usage import demand, node_stats


def run_round(
    snapshot: Snapshot,
    settings: Settings,
    state: RoundState,
    *,
    proxmox_gate: bool = False,
    guards: Guards = Guards(),
) -> RoundResult:
    """One round. With `proxmox_gate`, auto-rebalance off or mode basic means no round at
    all, as in Proxmox; the product instead always evaluates and lets the automation
    level decide who approves (DESIGN.md)."""
    stats = node_stats(snapshot, settings.mode)
    loads = {s.name: s.load for s in stats}
    current = imbalance(list(loads.values()), settings.imbalance_scale)
    waiting = _waiting(snapshot, settings, state, current, proxmox_gate)
    if waiting is not None:
        decision, reason, new_state = waiting
        return _result(settings, loads, current, decision, reason, new_state, new_state.hold_count)
    served = state.hold_count + 1  # the hold duration is served: this round acts, the next starts over
    cluster = Cluster(
        stats, movable_bundles(snapshot, compile_rules(snapshot), settings.mode, guards), settings.imbalance_scale
    )
    scored = (best_topsis if settings.method == "topsis" else best_bruteforce)(cluster)
    decision, reason = _verdict(settings, current, scored)
    return _result(settings, loads, current, decision, reason, RoundState(0), served, cluster.candidate_count(), scored)


def _waiting(
    snapshot: Snapshot, settings: Settings, state: RoundState, current: float, proxmox_gate: bool
) -> tuple[Decision, str, RoundState] | None:
    """Why this round does not look for a move yet, with the hold counter it leaves; None = look."""
    if proxmox_gate and (not settings.auto_rebalance or settings.mode == "basic"):
        return "disabled", "Automatic rebalancing is off for this mode: no round runs.", state
    if moving := snapshot.in_motion:
        g = moving[0]
        return (
            "motion-in-flight",
            f"{g.sid} is moving {g.node} → {g.target}: waiting until it finishes "
            f"(hold counter kept at {state.hold_count}).",
            state,
        )
    if current <= settings.threshold:
        return (
            "below-threshold",
            f"Imbalance {_fmt(current)} is at or below the threshold {_fmt(settings.threshold)}: nothing to do.",
            RoundState(0),
        )
    hold = state.hold_count + 1
    if hold < settings.hold_duration:
        return (
            "holding",
            f"Imbalance {_fmt(current)} has been above the threshold {_fmt(settings.threshold)} "
            f"for {hold} of {settings.hold_duration} rounds: waiting to see that it lasts.",
            RoundState(hold),
        )
    return None


def _verdict(settings: Settings, current: float, scored: Scored | None) -> tuple[Decision, str]:
    if scored is None:
        return "no-candidate", "No guest may move: rules, exclusions or a single usable node leave no allowed target."
    gain = relative_gain(current, scored.imbalance_after)
    what = (
        f"{scored.bundle.leader} {scored.bundle.node} → {scored.target} would take the imbalance "
        f"from {_fmt(current)} to {_fmt(scored.imbalance_after)}, a gain of {gain:.1%}"
    )
    if gain < settings.margin:
        return "below-margin", f"The best move, {what}, is less than the margin {settings.margin:.0%}."
    return "migrate", f"Moving {what} (margin {settings.margin:.0%})."


def _result(
    settings: Settings,
    loads: dict[str, float],
    current: float,
    decision: Decision,
    reason: str,
    state: RoundState,
    hold_count: int,
    candidates: int = 0,
    scored: Scored | None = None,
) -> RoundResult:
    move = _move(scored, current) if scored else None
    explanation = Explanation(
        reason,
        current,
        settings.threshold,
        hold_count,
        settings.hold_duration,
        candidates,
        settings.margin,
        settings.method,
        move.imbalance_after if move else None,
        move.relative_gain if move else None,
    )
    return RoundResult(decision, current, loads, candidates, move, state, explanation)


def _move(scored: Scored, before: float) -> Move:
    b = scored.bundle
    return Move(
        b.leader, b.guests, b.node, scored.target, scored.imbalance_after, relative_gain(before, scored.imbalance_after)
    )


def _fmt(value: float) -> str:
    return f"{value:.1%}"


def plan(snapshot: Snapshot, steps: int = 1) -> RoundResult:
    """The snapshot's answer to one round as if the hold duration were already served,
    extended to up to `steps` moves, each applied before the next is chosen (like
    Ganeti hbal's move sequence). The sequence stops at the first step that does not
    migrate, i.e. that would not clear the threshold and margin."""
    settings = replace(snapshot.settings, hold_duration=0)
    first = run_round(snapshot, settings, RoundState())
    moves: list[Move] = []
    result, current = first, snapshot
    while result.decision == "migrate" and result.move:
        moves.append(result.move)
        if len(moves) == steps:
            break
        current = apply_move(current, result.move)
        result = run_round(current, settings, RoundState())
    return replace(first, moves=tuple(moves))


def apply_move(snapshot: Snapshot, move: Move) -> Snapshot:
    """The snapshot after `move` completed: its guests sit on the target, and measured node
    usage, where given, shifts with them (clamped at zero, as in Proxmox)."""
    members = set(move.guests)
    mode = snapshot.settings.mode
    cpu = mem = 0.0
    for g in snapshot.guests:
        if g.sid in members:
            c, m = demand(g, "dynamic")
            cpu, mem = cpu + c, mem + m
    guests = tuple(replace(g, node=move.target) if g.sid in members else g for g in snapshot.guests)
    nodes = []
    for n in snapshot.nodes:
        if n.cpu_usage is not None and mode == "dynamic" and n.name in (move.source, move.target):
            sign = -1.0 if n.name == move.source else 1.0
            n = replace(
                n,
                cpu_usage=max(0.0, n.cpu_usage + sign * cpu),
                mem_usage_bytes=max(0.0, (n.mem_usage_bytes or 0.0) + sign * mem),
            )
        nodes.append(n)
    return replace(snapshot, guests=guests, nodes=tuple(nodes))


def stale_reason(snapshot: Snapshot, move: Move, guards: Guards = Guards()) -> str | None:
    """Why `move` must not run on this (fresh) snapshot, or None if it still may.

    A suggestion waits for a person; meanwhile guests move, nodes fail and rules change.
    Executing it on stale data is what admins fear most, so it is re-checked right
    before it starts: same guests on the same source, target usable and allowed, no
    guest resting after a recent migration.
    """
    guests = {g.sid: g for g in snapshot.guests}
    for sid in move.guests:
        guest = guests.get(sid)
        if guest is None:
            return f"{sid} no longer exists"
        if guest.node != move.source or guest.state != "started":
            return f"{sid} is no longer running on {move.source} (now {guest.state} on {guest.node})"
        if sid in guards.resting:
            return f"{sid} is in its cooldown after a recent migration"
    for sid in move.guests:
        if (sid, move.target) in guards.barred:
            return (
                f"{sid} may not go to {move.target} now: it left that node within its cooldown, "
                "or that move was rejected recently"
            )
    nodes = {n.name: n for n in snapshot.nodes}
    if move.target not in nodes or not nodes[move.target].usable:
        return f"{move.target} is offline, in maintenance or gone"
    mode = snapshot.settings.mode
    bundle = next(
        (b for b in movable_bundles(snapshot, compile_rules(snapshot), mode, guards) if b.leader == move.leader), None
    )
    if bundle is None or set(bundle.guests) != set(move.guests):
        return f"the rules no longer let {' + '.join(move.guests)} move together"
    allowed = bundle.targets if bundle.targets is not None else tuple(n for n in nodes if n != move.source)
    if move.target not in allowed:
        return f"the rules no longer allow {move.leader} on {move.target}"
    return None
