"""Who approves a round's plans: the automation level, and what holds it back now.

`manual` leaves every plan to a person; `partial` approves the steps whose own gain clears
the automatic margin; `automatic` approves every step. Owed plans (evacuation, failback,
rule fix) ignore margins, so only `manual` waits for a person there. The emergency stop,
a closed change window or a blackout, and Proxmox's own balancer (two balancers would undo
each other's moves) hold balancing plans for a person instead: they are not lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from .precedence import MANDATORY
from .windows import Blackout, Gate, Window, gate, next_occurrence

Level = Literal["manual", "partial", "automatic"]


@dataclass(frozen=True, slots=True)
class Automation:
    """The cluster's automation state at the round's moment."""

    level: Level = "manual"
    automatic_margin: float = 0.25  # partial: a step gaining at least this (fraction) approves itself
    stopped: bool = False  # the emergency stop: nothing approves itself
    time_zone: str = "UTC"  # the zone the change windows are written in
    windows: tuple[Window, ...] = ()  # none: any time
    blackouts: tuple[Blackout, ...] = ()
    proxmox_rebalancing: bool = False  # Proxmox's own auto-rebalance is on

    def approves_itself(self, relative_gain: float) -> bool:
        """Whether a balancing step with this gain is approved by the round, not a person."""
        if self.level == "automatic":
            return True
        return self.level == "partial" and relative_gain >= self.automatic_margin

    def approves_owed(self, at_once: bool = False) -> bool:
        """Whether the round approves an owed plan itself (or one an admin asked for at once)."""
        return not self.stopped and (self.level != "manual" or at_once)


def held(automation: Automation, now: datetime) -> Gate | None:
    """What holds automation now (None = nothing): Proxmox's own balancer (a closed gate of
    reason "proxmox"), or the change windows' gate when it is closed. One place for the plans'
    hold (`held_reason`) and the starts' (`start_wait`)."""
    if automation.proxmox_rebalancing:
        return Gate(False, None, "proxmox")
    state = gate(now, ZoneInfo(automation.time_zone), automation.windows, automation.blackouts)
    return None if state.open else state


def held_reason(automation: Automation, now: datetime) -> str:
    """Why automation may not approve a balancing plan now, in the admin's words; "" = it may."""
    if (state := held(automation, now)) is None:
        return ""
    if state.reason == "proxmox":
        return (
            "Proxmox's own automatic rebalancing (ha-auto-rebalance) is on: two balancers would undo each other's moves"
        )
    zone = ZoneInfo(automation.time_zone)
    until = f" until {state.until.astimezone(zone):%a %H:%M} ({automation.time_zone})" if state.until else ""
    if state.reason == "blackout":
        return f"blackout{': ' + state.label if state.label else ''}{until}"
    return f"outside the change windows{until}"


def start_wait(automation: Automation, automatic: bool, kind: str, now: datetime) -> str:
    """Why an approved move may not start now, naming what it waits for ("waiting for the window
    Sat 02:00–05:00 (Europe/Berlin)"); "" = it may start. Only a move the round approved
    (`automatic`) and not owed (evacuations and rule fixes are never held) waits: a plan approved
    inside a window whose steps get their turn after it closed would otherwise move guests at a
    time the admins ruled out; a person's approval is not held."""
    if not automatic or kind in MANDATORY or (state := held(automation, now)) is None:
        return ""
    if state.reason == "proxmox":
        return "waiting: Proxmox's own automatic rebalancing (ha-auto-rebalance) is on"
    zone, named = ZoneInfo(automation.time_zone), automation.time_zone
    if state.reason == "blackout":
        until = f" {state.until.astimezone(zone):%a %H:%M}" if state.until else ""
        return f"waiting for the blackout{' ' + state.label if state.label else ''} to end{until} ({named})"
    runs = [run for w in automation.windows if (run := next_occurrence(w, now, zone))]
    start, end = min(runs)  # outside every window: each run found is a coming one
    return f"waiting for the window {start.astimezone(zone):%a %H:%M}–{end.astimezone(zone):%H:%M} ({named})"


def self_approved(automation: Automation, gains: tuple[float, ...], after: tuple[int | None, ...]) -> tuple[int, ...]:
    """The steps of a balancing plan automation approves, in plan order: each step whose gain
    clears the level, with the steps it was computed behind (its math holds only with them)."""
    chosen: set[int] = set()
    for index, gain in enumerate(gains):
        if not automation.approves_itself(gain):
            continue
        at: int | None = index
        while at is not None and at not in chosen:
            chosen.add(at)
            at = after[at]
    return tuple(sorted(chosen))
