"""Guest happiness, as vSphere DRS 2.0's VM score: how much of the time a guest got to run.

Per guest, the share of time it was not stalled: 1 − the largest of its CPU, memory and
IO stall shares (the stalls may overlap, so the largest is what it surely lost). A guest
is happy while no stall share is above the pressure policy's limit; the cluster's figure
is the share of happy guests among the running ones that report pressure. It is the
number the pressure objective moves, and the one `crs replay` counts in guest-minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Guest, Snapshot
from .pressure import Limits

LIMIT = Limits().cpu  # the same limit the policy relieves


def score(guest: Guest) -> float | None:
    """The share of time `guest` was not stalled; None without pressure data."""
    p = guest.pressure
    if p is None:
        return None
    return 1.0 - max(p.cpu_some, p.memory_some, p.io_some)


def is_stalled(guest: Guest, limit: float = LIMIT) -> bool:
    p = guest.pressure
    return p is not None and (p.cpu_some > limit or p.memory_some > limit)


def stalled(snapshot: Snapshot, limit: float = LIMIT) -> tuple[Guest, ...]:
    """Running guests whose CPU or memory pressure is above `limit`."""
    return tuple(g for g in _measured(snapshot) if is_stalled(g, limit))


@dataclass(frozen=True, slots=True)
class Happiness:
    happy: int
    guests: int  # running guests that report pressure

    @property
    def share(self) -> float | None:
        return self.happy / self.guests if self.guests else None


def of_cluster(snapshot: Snapshot, limit: float = LIMIT) -> Happiness:
    measured = _measured(snapshot)
    return Happiness(sum(not is_stalled(g, limit) for g in measured), len(measured))


def _measured(snapshot: Snapshot) -> tuple[Guest, ...]:
    return tuple(g for g in snapshot.guests if g.state == "started" and g.running and g.pressure is not None)
