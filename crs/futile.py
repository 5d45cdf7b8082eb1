"""Futile pressure moves: where a move would only shift a stall, it is not made.

A cluster that lacked CPU or memory as a whole at its peak lacks them again at the next one,
so a guest moved between its peaks stalls on its target then, or comes back: for a week after
a shortfall no pressure move is made (`after_peak`). With the forecast on, a node that would
itself stall at its guests' next-hour peaks takes no pressure move (`short_at_peak`, `barred`).
The round says why instead (crs.balancer).
"""

from __future__ import annotations

from dataclasses import replace

from . import forecast, gating, pressure
from .decision import RoundState
from .model import Guards, Snapshot

# Business loads peak by the day and the week: a shortfall seen within a week comes back. On
# July (the month tuned on), short of CPU: a day's memory left 4.7 migrations a day, a week's 2.6,
# with fewer guest-minutes under pressure too (231 560, 229 290; bench/README.md).
PEAK_MEMORY_S = 7 * 86_400.0


def after_peak(snapshot: Snapshot, state: RoundState, short: str | None) -> tuple[str | None, RoundState]:
    """Why a pressure move is futile now though the cluster has the CPU and memory this round:
    it lacked them as a whole at its peak within the last week (`PEAK_MEMORY_S`), so at the next
    peak every target is short again and the moved guests stall there, or come back. The state
    remembers the last round short."""
    now = gating.clock(snapshot)
    if now is None:
        return None, state
    if short:
        return None, replace(state, short_s=now)
    if state.short_s is None or now - state.short_s >= PEAK_MEMORY_S or now < state.short_s:
        return None, state
    ago = (now - state.short_s) / 3600
    return (
        f"the cluster as a whole lacked CPU or memory at its peak {ago:.1f} h ago; every target would be short "
        "again at the next peak"
    ), state


def short_at_peak(snapshot: Snapshot, limits: pressure.Limits) -> frozenset[str]:
    """With the forecast on, the nodes that would themselves stall on CPU beyond the limit with
    each of their guests at its next-hour peak (`forecast.node_peaks`): no pressure move goes
    there, since it would only move the stall; where every node is such, none is made."""
    if snapshot.settings.forecast != "on":
        return frozenset()
    nodes = {n.name: n for n in snapshot.nodes}
    return frozenset(
        name
        for name, (cpu, _) in forecast.node_peaks(snapshot).items()
        if pressure.cpu_stall(cpu * nodes[name].cpus, nodes[name]) > limits.cpu
    )


def barred(guards: Guards, hurting: tuple[pressure.Hurting, ...], full: frozenset[str]) -> Guards:
    """`guards` with the nodes short at their peak barred to every hurting guest (a move there
    only shifts the stall: futile)."""
    if not full:
        return guards
    return replace(guards, barred=guards.barred | {(h.sid, n) for h in hurting for n in full if n != h.node})
