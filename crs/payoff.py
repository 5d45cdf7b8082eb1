"""Whether a move pays for itself: its benefit against its cost, each in its objective's unit.

The anchor is vSphere DRS's cost-benefit analysis: a migration is recommended only when the
gain it brings over the time the load is expected to stay outweighs what the migration itself
costs (the memory copied at the migration speed, the switchover, the load on both hosts).

- Balancing: the benefit is the imbalance removed × the horizon it is expected to stay removed;
  the cost is the imbalance the move leaves in place while its memory is copied and switched
  over: the gain not yet made, and more where the guest counted on both nodes (as claims count
  it) makes the cluster worse than before. So a move pays when its gain lasts longer than it
  takes to make, by the margin.
- Pressure: the benefit is the stall guest-seconds the move relieves over the horizon; the cost
  is the guest-seconds the move itself stalls: the copy's own CPU on both nodes' guests, and
  the moved guest paused at the switchover.

A move passes when benefit ≥ (1 + margin) × cost. The `proxmox` preset has no gate: Proxmox
weighs no cost. Every figure is O(1) per move; callers gate the moves they are about to plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .model import Guest, Settings

SWITCHOVER_S = 1.0  # the guest paused while its last dirty pages move and it resumes on the target
MIGRATION_CORES = 1.0  # what the copy itself takes on each end, in cores
MIB = 2**20
GIB = 2**30

Unit = Literal["imbalance-seconds", "guest-seconds"]


@dataclass(frozen=True, slots=True)
class Payoff:
    """A move's expected benefit and cost, in `unit`, and what they were computed from."""

    benefit: float
    cost: float
    unit: Unit
    horizon_s: float  # how long the benefit is expected to last
    copy_bytes: float  # the memory the migration copies
    speed: float  # the migration speed, bytes per second

    def pays(self, margin: float) -> bool:
        return self.benefit >= (1.0 + margin) * self.cost

    @property
    def copy_s(self) -> float:
        return self.copy_bytes / self.speed

    def text(self) -> str:
        """ "gain 4.2 %·h over ~1 h against a cost of 0.01 %·h to copy 8 GiB at 1024 MiB/s"."""
        copying = f"to copy {self.copy_bytes / GIB:.3g} GiB at {self.speed / MIB:.4g} MiB/s and switch over"
        horizon = _duration(self.horizon_s)
        if self.unit == "imbalance-seconds":
            return (
                f"gain {self.benefit / 36:.3g} %·h of imbalance over ~{horizon} "
                f"against a cost of {self.cost / 36:.2g} %·h {copying}"
            )
        if self.horizon_s <= 0.0:  # crs.lasting: a stall new this round, expected to pass first
            return (
                "relieve no stall: it is new this round, a peak expected to end before the move does, "
                f"against a cost of {self.cost:.2g} guest-seconds {copying}"
            )
        return (
            f"relieve {self.benefit:.4g} guest-seconds of stall over ~{horizon} "
            f"against a cost of {self.cost:.2g} guest-seconds {copying}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The step's structured figures (the page reads these, not the sentence)."""
        return {
            "benefit": self.benefit,
            "cost": self.cost,
            "payoff_unit": self.unit,
            "horizon_s": self.horizon_s,
            "copy_bytes": self.copy_bytes,
            "migration_speed": self.speed,
        }


def gated(settings: Settings) -> bool:
    """True where moves must pay: everywhere but the `proxmox` preset (Proxmox's decisions)."""
    return settings.preset != "proxmox"


def speed(settings: Settings) -> float:
    """The cluster's migration speed in bytes per second."""
    return settings.migration_mib_s * MIB


def horizon(guest: Guest, settings: Settings) -> float:
    """How long the load that motivates moving `guest` is expected to last. Its own history
    says it where the snapshot carries a forecast: the next hour's peak, as a share of what
    the guest uses now, scales the default (a spike above its usual peak fades within the
    hour, a load its history repeats stays); elsewhere the default `benefit_horizon`."""
    default = settings.benefit_horizon
    f = guest.forecast
    if f is None or guest.cpu_usage <= 0.0:
        return default
    return default * min(1.0, f.cpu / guest.cpu_usage)


def balancing(before: float, after: float, both: float, memory_bytes: float, horizon_s: float, s: Settings) -> Payoff:
    """A balancing move from imbalance `before` to `after`; `both`: the imbalance while the guest
    is counted on its source and its target (the copy and the switchover), no better than
    `before` since the source still carries the guest."""
    rate = speed(s)
    busy_s = memory_bytes / rate + SWITCHOVER_S
    cost = (max(both, before) - after) * busy_s
    return Payoff((before - after) * horizon_s, cost, "imbalance-seconds", horizon_s, memory_bytes, rate)


def pressure(relieved: float, extra_stall: float, memory_bytes: float, horizon_s: float, s: Settings) -> Payoff:
    """A pressure move relieving `relieved` guest-shares of stall (the moved guest's and its
    neighbours', net of what its target's guests gain); `extra_stall`: the guest-shares of stall
    the copy's own CPU adds on both nodes while it runs."""
    rate = speed(s)
    cost = extra_stall * memory_bytes / rate + SWITCHOVER_S
    return Payoff(max(0.0, relieved) * horizon_s, cost, "guest-seconds", horizon_s, memory_bytes, rate)


def summed(payoffs: list[Payoff]) -> Payoff:
    """A plan's payoff: its steps' benefits and costs summed, over the longest horizon."""
    first = payoffs[0]
    return Payoff(
        sum(p.benefit for p in payoffs),
        sum(p.cost for p in payoffs),
        first.unit,
        max(p.horizon_s for p in payoffs),
        sum(p.copy_bytes for p in payoffs),
        first.speed,
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2g} h"
    return f"{max(1.0, seconds / 60):.0f} min"
