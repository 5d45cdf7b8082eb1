"""Power in a replay: hsqueeze's suggestion applied at every round (`crs replay --power`).

The question an admin asks before letting nodes sleep at night: how many node-hours would
have been powered down over a real day, and how many migrations does it cost? At each round
the suggestion of `crs.power.squeeze` is applied at once: the nodes it would power down go
into maintenance (no balancing move targets them) while its migrations empty them, and
count as powered down once empty; when room drops below the minimum, powered-down nodes
are woken, the longest asleep first, and so is one when the measured load outgrows the
`wake_load` below. A node is only emptied while the nodes left on keep
the guests' measured CPU use under `sleep_load` of their CPUs, and one wakes when it passes
`wake_load`, so sleeping never starves the load that configured sizes (what `crs.fits`
counts) do not show.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from .capacity import Size
from .fits import Limits
from .model import Snapshot
from .power import squeeze

# Shares of the CPUs on that the measured load may use: a node sleeps only while the load stays
# under SLEEP_LOAD of the CPUs left, one wakes once it exceeds WAKE_LOAD (apart, so the answer does
# not flap, as hsqueeze's minimal and target).
SLEEP_LOAD = 0.6
WAKE_LOAD = 0.8


class Switchable(Protocol):
    """What power needs of a replayed cluster: putting a node in or out of maintenance."""

    def maintenance(self, node: str, on: bool, now: float) -> None: ...


@dataclass
class Power:
    """hsqueeze's policy over a replay; the state is which nodes are being emptied and asleep."""

    size: Size
    limits: Limits = Limits()
    minimal: float = 2.0
    target: float = 2.0
    sleep_load: float = SLEEP_LOAD
    wake_load: float = WAKE_LOAD
    draining: set[str] = field(default_factory=set)
    asleep: list[str] = field(default_factory=list)  # powered down, longest asleep first
    wakeups: int = 0
    power_downs: int = 0

    def step(self, world: Switchable, snap: Snapshot, now: float) -> list[tuple[str, str]]:
        """The (guest, target) migrations this round's power decision starts; nodes are put to
        sleep or woken on `world` as it goes. One wave at a time: nothing new while a node drains."""
        for name in sorted(self.draining):
            on_node = [g for g in snap.guests if g.node == name]
            if not on_node:
                self.draining.discard(name)
                self.asleep.append(name)
                self.power_downs += 1
            elif not any(g.target for g in on_node):  # a power move failed: the node stays on
                self.draining.discard(name)
                world.maintenance(name, False, now)
        if self.draining:
            return []
        asleep = set(self.asleep)  # the world holds them in maintenance; hsqueeze sees them as standby
        view = replace(
            snap,
            nodes=tuple(replace(n, standby=True, maintenance=False) if n.name in asleep else n for n in snap.nodes),
        )
        plan = squeeze(
            view, self.size, self.limits, minimal=self.minimal, target=self.target, standby=tuple(self.asleep)
        )
        wake = list(plan.power_on)
        if not wake and self.asleep and self._load(view) > self.wake_load * self._cpus(view, set()):
            wake = self.asleep[:1]  # room is there by configured sizes, but the measured load needs CPUs
        for name in wake:
            world.maintenance(name, False, now)
            self.asleep.remove(name)
            self.wakeups += 1
        if wake:
            return []
        chosen = self._within_load(view, plan.power_off)
        moves = [(sid, target) for sid, source, target in plan.moves if source in chosen]
        moving = {g.sid for g in snap.guests if g.target}
        if any(sid in moving for sid, _ in moves):
            return []
        for name in chosen:
            world.maintenance(name, True, now)
            self.draining.add(name)
        return moves

    def _within_load(self, snap: Snapshot, power_off: tuple[str, ...]) -> set[str]:
        """The prefix of `power_off` whose sleep leaves the measured CPU use within `sleep_load`."""
        chosen: set[str] = set()
        for name in power_off:
            if self._load(snap) > self.sleep_load * self._cpus(snap, chosen | {name}):
                break
            chosen.add(name)
        return chosen

    @staticmethod
    def _load(snap: Snapshot) -> float:
        return sum(g.cpu_usage for g in snap.guests)

    @staticmethod
    def _cpus(snap: Snapshot, leaving: set[str]) -> float:
        """The CPUs of the nodes on, less those of `leaving`."""
        return sum(n.cpus for n in snap.nodes if n.usable and n.name not in leaving)
