"""One balancing round, and the plan preview of `crs plan`.

Policy calls the math: this module decides *whether* to move (gate, threshold, load
floor, hold duration, margin on the plan's total gain) and asks `planner` for the plan.
A round is a pure function (snapshot with its settings, round state) → result with a new
state, so the web side persists the hold counter and any worker can run the next round
(reference/proxmox-crs.md §4.4).
"""

from __future__ import annotations

from dataclasses import replace

from . import forecast, futile, gating, lasting, payoff, pressure
from .bundles import movable_bundles
from .decision import Decision, Explanation, Move, RoundResult, RoundState, Step, total_gain
from .fits import committed, guest_cores, room
from .imbalance import NOISE, cluster_imbalance, relative_gain
from .model import Guards, Settings, Snapshot
from .planner import apply_move as _apply
from .planner import limits_of, plan_moves, target_refusal
from .rules import compile_rules
from .usage import NodeStats, carried_by, node_stats, usable_nodes


def run_round(
    snapshot: Snapshot,
    state: RoundState,
    *,
    proxmox_gate: bool = False,
    guards: Guards = Guards(),
) -> RoundResult:
    """One round under `snapshot.settings` (the one way settings enter the engine). With
    `proxmox_gate`, auto-rebalance off or mode basic means no round at all, as in
    Proxmox; the product instead always evaluates and lets the automation level decide
    who approves (DESIGN.md). With the forecast on, the explanation carries its figures."""
    # With the forecast on, no move goes to a node predicted to stall within the hour, and a
    # stall due before a move could finish is relieved ahead of it (crs.forecast).
    if snapshot.settings.forecast != "on":
        return _round(snapshot, state, (), proxmox_gate=proxmox_gate, guards=guards)
    foreseen = forecast.stalls(snapshot, _limits(snapshot.settings))
    result = _round(snapshot, state, foreseen, proxmox_gate=proxmox_gate, guards=guards)
    figures = forecast.figures(snapshot, foreseen)
    return replace(result, explanation=replace(result.explanation, forecast=figures))


def _round(
    snapshot: Snapshot,
    state: RoundState,
    foreseen: tuple[forecast.Stall, ...],
    *,
    proxmox_gate: bool,
    guards: Guards,
) -> RoundResult:
    settings = snapshot.settings
    stats = node_stats(snapshot, settings.mode)
    loads = {s.name: s.load for s in stats}
    current = cluster_imbalance(snapshot, stats)
    # Why no placement can help this round's stalls (the cluster as a whole lacks the CPU or
    # memory): said under every objective, and no pressure move is made meanwhile.
    short = pressure.cluster_short(snapshot, _limits(settings))
    futile_now, state = futile.after_peak(snapshot, state, short)
    if foreseen:
        guards = replace(guards, barred=guards.barred | forecast.barred(snapshot, foreseen))
    if settings.objective != "even":
        wait, state = gating.gate(snapshot, state)  # every round: a state change restarts the quiet minute
        lasted = frozenset(state.stalled_nodes)
        state = replace(state, stalled_nodes=pressure.stalled_nodes(snapshot, _limits(settings)))
        held = futile_now or wait or short
        relieving = None if held or snapshot.in_motion else _relief(snapshot, guards, current, lasted)
        if not (relieving and relieving[2]) and not (held or snapshot.in_motion):
            relieving = _ahead(snapshot, guards, current, foreseen) or relieving
        # A pressure move that does not pay leaves objective `both` to its evenness plan.
        if not snapshot.in_motion and ((relieving and relieving[2]) or settings.objective == "pressure"):
            decision, reason, steps = relieving or _no_relief(snapshot, held, guards)
            return _result(settings, loads, current, decision, reason, state, state.hold_count, len(steps), steps)
    note = (
        f" No pressure move: {futile_now}."
        if futile_now and settings.objective != "even"
        else ""
        if not short
        else f" No pressure move: {short}."
        if settings.objective != "even"
        else f" {short[0].upper()}{short[1:]}."
    )
    if foreseen:
        note += (
            f" No move onto {', '.join(s.node for s in foreseen)}: "
            + "; ".join(s.text(snapshot.taken_at) for s in foreseen)
            + "."
        )
    waiting = _waiting(snapshot, stats, state, current, proxmox_gate)
    if waiting is not None:
        decision, reason, new_state = waiting
        return _result(settings, loads, current, decision, reason + note, new_state, new_state.hold_count)
    served = state.hold_count + 1  # the hold duration is served: this round acts, the next starts over
    steps, candidates = plan_moves(snapshot, guards, settings.moves_per_round, evenness_target(settings), stats)
    decision, reason = _verdict(settings, current, steps)
    if not steps or total_gain(steps) <= NOISE:
        reason += _held_back(snapshot, stats)
    state = replace(state, hold_count=0)
    return _result(settings, loads, current, decision, reason + note, state, served, candidates, steps)


def evenness_target(settings: Settings) -> float:
    """Where a round's evenness plan stops: the target, or for objective `both` halfway from
    the target to the threshold. There pressure moves relieve the stalls, and an evenness
    plan's last steps gain least but cost full migrations (bench/README.md). A threshold
    under the target leaves the target."""
    if settings.objective != "both":
        return settings.target
    return max(settings.target, (settings.target + settings.threshold) / 2)


def _limits(settings: Settings) -> pressure.Limits:
    return pressure.Limits(containers=settings.containers == "restart")


def _relief(
    snapshot: Snapshot, guards: Guards, current: float, lasted: frozenset[str] = frozenset()
) -> tuple[Decision, str, tuple[Step, ...]] | None:
    """Objective pressure or both: the guests that hurt most and have somewhere to go, moved
    first whatever the imbalance (DRS 2.0's order: relieve contention, then even out); the
    guards apply as to any move. The seed moves one guest per check; the product plans up to
    `moves_per_round`, each on the snapshot the earlier ones are expected to leave
    (`pressure.settled`), so a saturated node is relieved in one round, not one guest a
    minute. None: nothing to relieve."""
    if not pressure.has_data(snapshot):
        return None
    settings = snapshot.settings
    limits = _limits(settings)
    steps: list[Step] = []
    reasons: list[str] = []
    moved: set[str] = set()
    now, before = snapshot, current
    net = [0]  # the guests the plan's first k steps bring under the limits (pressure.net_relief)
    hurting = pressure.hurting(snapshot, limits)
    hurt = len(hurting)
    guards = futile.barred(guards, hurting, futile.short_at_peak(snapshot, limits))
    unpaid: list[payoff.Payoff] = []  # guests whose move would not pay: skipped, at most a budget of them
    while len(steps) < settings.moves_per_round and len(unpaid) < settings.moves_per_round:
        found = pressure.relief(now, limits, in_cooldown=guards.in_cooldown | moved, barred=guards.barred)
        if found is None:
            break
        g = found.guest
        moved.add(g.sid)
        settled = pressure.settled(now, found)
        paid = _relief_payoff(now, settled, found, lasted) if payoff.gated(settings) else None
        if paid is not None and not paid.pays(settings.margin):
            unpaid.append(paid)
            continue
        after_snapshot = _apply(now, (g.sid,), g.node, found.target)
        after = cluster_imbalance(after_snapshot)
        gain = relative_gain(before, after)
        pressure_before = max(g.cpu_pressure, g.memory_pressure)
        move = Move(g.sid, (g.sid,), g.node, found.target, after, gain, "pressure", pressure_before, found.relief, paid)
        steps.append(Step(move, before, after, gain, (), len(steps) - 1 if steps else None))
        reasons.append(f"{found.reason[:-1]}: it would {paid.text()}." if paid else found.reason)
        now, before = settled, after
        net.append(pressure.net_relief(hurt, now, [s.move.source for s in steps], limits, lasted))
    kept = max(range(len(net)), key=lambda k: (net[k], -k))  # the fewest steps with the most relief
    if not kept and unpaid and not steps:
        best = max(unpaid, key=lambda p: p.benefit - p.cost)
        count = f"{hurt} guest hurts" if hurt == 1 else f"{hurt} guests hurt"
        return (
            "no-pressure",
            f"{count}; no move that would relieve one pays for itself: the best would {best.text()}.",
            (),
        )
    if not kept:
        return None
    steps, reasons = steps[:kept], reasons[:kept]
    # Percent, as every figure the page shows (the reason is shown as it is).
    weights = ", ".join(f"{c} {w:.0%}" for c, w in zip(pressure.CRITERIA, pressure.WEIGHTS.weights))
    reason = " ".join(reasons) + (
        f" (AHP weights: {weights}; consistency ratio {pressure.WEIGHTS.consistency_ratio:.1%}{_period(settings)})"
    )
    return "migrate", reason, tuple(steps)


def _relief_payoff(before: Snapshot, after: Snapshot, found: pressure.Relief, lasted: frozenset[str]) -> payoff.Payoff:
    """A pressure move's benefit against its cost (crs.payoff): the stall it ends for the guest
    and its source's guests, net of what its target's guests gain (`pressure.settled`'s
    contention model), over as long as the stall is expected to last (crs.lasting; `lasted`:
    the nodes stalled at the round before too); against the stall the copy's own core adds on
    both nodes while it runs, and the switchover."""
    g, ends = found.guest, (found.guest.node, found.target)

    def stalls(snapshot: Snapshot) -> float:
        return sum(x.pressure.cpu_some for x in snapshot.guests if x.node in ends and x.sid != g.sid and x.pressure)

    moved = after.guest(g.sid)
    left = moved.pressure.cpu_some if moved.pressure else 0.0
    relieved = found.relief - left + stalls(before) - stalls(after)
    use = pressure.node_use(before)
    extra = 0.0
    for name in ends:
        node = before.node(name)
        now = use[name].cpu
        added = pressure.cpu_stall(now + payoff.MIGRATION_CORES, node) - pressure.cpu_stall(now, node)
        extra += added * sum(1 for x in before.guests if x.node == name and x.state == "started")
    settings = before.settings
    expected = lasting.horizon(payoff.horizon(moved, settings), before, found, lasted, _limits(settings))
    return payoff.pressure(relieved, extra, moved.memory_bytes, expected, settings)


def _ahead(
    snapshot: Snapshot, guards: Guards, current: float, foreseen: tuple[forecast.Stall, ...]
) -> tuple[Decision, str, tuple[Step, ...]] | None:
    """Pressure moves ahead of the predicted stalls that are due (within a round and a
    migration of now), planned on the snapshot as predicted at them; their reason starts with
    what was predicted. None: no stall is due, or none has a guest to move."""
    due = tuple(s for s in foreseen if s.due)
    if not due:
        return None
    found = _relief(forecast.foreseen(snapshot, due), guards, current, lasting.foreseen(due))
    if found is None:
        return None
    decision, reason, steps = found
    said = "; ".join(s.text(snapshot.taken_at) for s in due)
    return decision, f"{said[0].upper()}{said[1:]}. {reason}", steps


def _period(settings: Settings) -> str:
    """Which period the usage figures cover, for every explanation."""
    if settings.usage_period <= 0:
        return "; usage is the latest value"
    return f"; usage is the mean of the last {settings.usage_period / 60:g} min"


def _no_relief(snapshot: Snapshot, wait: str | None, guards: Guards) -> tuple[Decision, str, tuple[Step, ...]]:
    if not pressure.has_data(snapshot):
        return "no-pressure-data", "No pressure data: the source reports no stall figures (Proxmox VE 8).", ()
    if wait:
        return "pressure-wait", f"Waiting: {wait}.", ()
    limits = _limits(snapshot.settings)
    hurt = pressure.hurting(snapshot, limits)
    if not hurt:
        return "no-pressure", "No guest stalls beyond the limits.", ()
    full = futile.short_at_peak(snapshot, limits)
    guards = futile.barred(guards, hurt, full)
    found = pressure.relief(snapshot, limits, in_cooldown=guards.in_cooldown, barred=guards.barred)
    count = f"{len(hurt)} guest hurts" if len(hurt) == 1 else f"{len(hurt)} guests hurt"
    if found is None:
        peak = f" ({', '.join(sorted(full))} would stall on CPU at their forecast peak)" if full else ""
        return "no-pressure", f"{count}; none that does has a node to go to{peak}.", ()
    return (
        "no-pressure",
        (
            f"{count}; moving {found.guest.sid} would leave {found.guest.node} short of CPU as a whole, "
            f"its other guests stalling ({pressure.cpu_basis(snapshot, found.guest.node)}): a new stall is left "
            "a round to pass."
        ),
        (),
    )


def _waiting(
    snapshot: Snapshot, stats: list[NodeStats], state: RoundState, current: float, proxmox_gate: bool
) -> tuple[Decision, str, RoundState] | None:
    """Why this round does not look for a move yet, with the hold counter it leaves; None = look."""
    settings = snapshot.settings
    if proxmox_gate and (not settings.auto_rebalance or settings.mode == "basic"):
        return "disabled", "Automatic rebalancing is off for this mode: no round runs.", state
    if moving := snapshot.in_motion:
        g = moving[0]
        return (
            "motion-in-flight",
            # A guest the source shows moving, or one an approved move claims (crs.claims).
            f"{g.sid}'s move {g.node} → {g.target} is approved or under way: waiting until it finishes "
            f"(hold counter kept at {state.hold_count}).",
            state,
        )
    if current <= settings.threshold:
        return (
            "below-threshold",
            f"Imbalance {_fmt(current)} is at or below the threshold {_fmt(settings.threshold)}: nothing to do.",
            replace(state, hold_count=0),
        )
    busiest = max(stats, key=lambda s: (max(s.cpu_load, s.mem_load), s.name))
    busiest_load = max(busiest.cpu_load, busiest.mem_load)
    if busiest_load < settings.load_floor:
        return (
            "below-load-floor",
            f"No move: the busiest node, {busiest.name}, is at {_fmt(busiest_load)} "
            f"(CPU {_fmt(busiest.cpu_load)}, memory {_fmt(busiest.mem_load)}), "
            f"below the load floor {_fmt(settings.load_floor)}.",
            replace(state, hold_count=0),
        )
    hold = state.hold_count + 1
    if hold < settings.hold_duration:
        return (
            "holding",
            f"Imbalance {_fmt(current)} has been above the threshold {_fmt(settings.threshold)} "
            f"for {hold} of {settings.hold_duration} rounds: waiting to see that it lasts.",
            replace(state, hold_count=hold),
        )
    return None


def _verdict(settings: Settings, current: float, steps: tuple[Step, ...]) -> tuple[Decision, str]:
    if not steps:
        return "no-candidate", "No guest may move: rules, exclusions or a single usable node leave no allowed target."
    first, gain = steps[0].move, total_gain(steps)
    if (
        gain <= NOISE and settings.preset != "proxmox"
    ):  # Proxmox moves for a zero gain at margin 0; the product does not
        return "below-margin", (
            f"The best move, {first.leader} {first.source} → {first.target}, would change the imbalance "
            f"{_fmt(current)} by float noise only: nothing to gain."
        )
    paid = [s.move.payoff for s in steps if s.move.payoff is not None]
    cost = f"; it would {payoff.summed(paid).text()}" if paid else ""
    if len(steps) == 1:
        what = (
            f"{first.leader} {first.source} → {first.target} would take the imbalance "
            f"from {_fmt(current)} to {_fmt(first.imbalance_after)}, a gain of {gain:.1%}"
        )
        if gain < settings.margin:
            return "below-margin", f"The best move, {what}, is less than the margin {settings.margin:.0%}{cost}."
        if first.payoff is not None and not first.payoff.pays(settings.margin):
            return "below-margin", (
                f"The best move, {what}, does not pay for itself{cost}: "
                f"its benefit is under (1 + margin {settings.margin:.0%}) × its cost."
            )
        return "migrate", f"Moving {what} (margin {settings.margin:.0%}){cost}."
    what = (
        f"{len(steps)} moves, starting with {first.leader} {first.source} → {first.target}, would take the "
        f"imbalance from {_fmt(current)} to {_fmt(steps[-1].imbalance_after)}, a total gain of {gain:.1%}"
    )
    if gain < settings.margin:
        return "below-margin", f"The best plan, {what}, is less than the margin {settings.margin:.0%}{cost}."
    target = _fmt(evenness_target(settings))
    return "migrate", f"A plan of {what} (margin {settings.margin:.0%}, target {target}){cost}."


def _result(
    settings: Settings,
    loads: dict[str, float],
    current: float,
    decision: Decision,
    reason: str,
    state: RoundState,
    hold_count: int,
    candidates: int = 0,
    steps: tuple[Step, ...] = (),
) -> RoundResult:
    explanation = Explanation(
        reason,
        current,
        settings.threshold,
        hold_count,
        settings.hold_duration,
        candidates,
        settings.margin,
        settings.method,
        steps[-1].imbalance_after if steps else None,
        total_gain(steps) if steps else None,
        evenness_target(settings),
        settings.usage_period,
    )
    move = steps[0].move if steps else None
    return RoundResult(decision, current, loads, candidates, move, state, explanation, plan=steps)


def _held_back(snapshot: Snapshot, stats: list[NodeStats]) -> str:
    """Why the busiest node keeps its guests when the capacity rule (`crs.fits`) is what
    stops every move off it: no other usable node has room for even its smallest guest.
    "Nothing to gain" alone would hide the admin's answer, a higher CPU overcommit or more
    nodes."""
    limits = limits_of(snapshot.settings)
    busiest = max(stats, key=lambda s: (s.load, s.name)).name
    leaving = [g for g in snapshot.guests if g.node == busiest and g.state == "started"]
    if limits is None or not leaving:
        return ""
    usable = frozenset(usable_nodes(snapshot))
    held = carried_by(snapshot.guests, usable, usable)
    smallest_memory = min(g.memory_bytes for g in leaving)
    by_cpu, by_memory = [], []
    for node in snapshot.nodes:
        if node.name == busiest or node.name not in usable:
            continue
        carried = committed(node, held[node.name])
        left = room(node, carried, limits)
        if left.memory_bytes < smallest_memory:
            by_memory.append(node.name)
        elif left.cores < min(guest_cores(g, node) for g in leaving):
            by_cpu.append(f"{node.name} {carried.cores:g} (limit {node.cpus * limits.cpu_overcommit:g})")
        else:
            return ""  # a node has room: what stops the moves is not the capacity rule
    if not by_cpu and not by_memory:
        return ""
    cpu = (
        f" configured cores: {', '.join(by_cpu)}, at the CPU overcommit of {limits.cpu_overcommit:g} per CPU thread"
        if by_cpu
        else ""
    )
    memory = f"{';' if by_cpu else ''} memory: {', '.join(by_memory)}" if by_memory else ""
    ending = "Raise the limit, or add a node."
    return f" No guest of the busiest node, {busiest}, fits on another; full by{cpu}{memory}. {ending}"


def _fmt(value: float) -> str:
    return f"{value:.1%}"


def plan(snapshot: Snapshot, steps: int | None = None) -> RoundResult:
    """The snapshot's answer to one round as if the hold duration were already served.

    With `steps` K, also (a) `moves`: the greedy sequence of single-move rounds, each
    applied before the next, stopping at the first that would not clear the threshold and
    margin (the documented meaning of crs-plan/1's `moves`), and (b) `plan`: the product's
    planner, the one rounds use, with K as its move budget and the file's target."""
    settings = replace(snapshot.settings, hold_duration=0)
    snapshot = replace(snapshot, clock_s=None, taken_at=None)  # and the pressure moves' quiet minute passed
    if steps is None:
        return run_round(snapshot.with_settings(settings), RoundState())
    first = run_round(snapshot.with_settings(replace(settings, moves_per_round=steps)), RoundState())
    single = snapshot.with_settings(replace(settings, moves_per_round=1))
    greedy: list[Move] = []
    result, current = run_round(single, RoundState()), single
    while result.decision == "migrate" and result.move:
        greedy.append(result.move)
        if len(greedy) == steps:
            break
        current = apply_move(current, result.move)
        result = run_round(current, RoundState())
    return replace(first, moves=tuple(greedy))


def apply_move(snapshot: Snapshot, move: Move) -> Snapshot:
    """The snapshot after `move` completed (see `crs.planner.apply_move`)."""
    return _apply(snapshot, move.guests, move.source, move.target)


def stale_reason(snapshot: Snapshot, move: Move, guards: Guards = Guards()) -> str | None:
    """Why `move` must not run on this (fresh) snapshot, or None if it still may.

    A suggestion waits for a person; meanwhile guests move, nodes fail and rules change.
    Executing it on stale data is what admins fear most, so it is re-checked right
    before it starts: same guests on the same source, target usable and allowed, no
    guest in its cooldown after a recent migration, and (outside the `proxmox` preset) the
    target still has room for them (`crs.fits`).
    """
    guests = {g.sid: g for g in snapshot.guests}
    for sid in move.guests:
        guest = guests.get(sid)
        if guest is None:
            return f"{sid} no longer exists"
        if guest.node != move.source or guest.state != "started":
            return f"{sid} is no longer running on {move.source} (now {guest.state} on {guest.node})"
        if sid in guards.in_cooldown:
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
        (
            b
            for b in movable_bundles(snapshot, compile_rules(snapshot), mode, guards, locks=False)
            if b.leader == move.leader
        ),
        None,
    )
    if bundle is None or set(bundle.guests) != set(move.guests):
        return f"the rules no longer let {' + '.join(move.guests)} move together"
    allowed = bundle.targets if bundle.targets is not None else tuple(n for n in nodes if n != move.source)
    if move.target not in allowed:
        return f"the rules no longer allow {move.leader} on {move.target}"
    if refused := target_refusal(snapshot, move.guests, move.target):
        what = "configured memory" if refused == "memory" else "configured cores"
        who = " + ".join(move.guests)
        return f"{who} no longer fits on {move.target}: its {what} would exceed what the node may carry"
    return None
