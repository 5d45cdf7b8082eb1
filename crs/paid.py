"""Whether a done migration paid: judged on the loads measured after it, never on its own prediction.

An admin trusts a balancer whose moves are seen to pay. Over the horizon its benefit was
computed for, each measurement of the cluster is read twice: as measured (the guests where
the move put them) and with the moved guests' measured use counted back on their source, as
if the move had not happened. A balancing move paid when the mean imbalance as measured is
lower than the mean with the guests left on the source: the imbalance it removed stayed
removed. A pressure move paid when the guests' node stalled in fewer measurements than their
source would have with them on it: the stall it relieved stayed relieved. A node stalls, as
the simulator and `crs.pressure` model it, when its CPU demand beyond its threads makes guests
wait more than the pressure limit, or when its memory is above the memory limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .imbalance import NOISE, imbalance
from .model import Settings
from .pressure import Limits, contention
from .usage import NodeStats

# A move's benefit is reckoned over the hour after it (crs.payoff, the setting `benefit_horizon`)
# unless its guest's forecast shortens it; a move whose own horizon is not kept is judged on this one.
HORIZON_S = Settings().benefit_horizon


@dataclass(frozen=True, slots=True)
class Measured:
    """One measurement within the horizon: every usable node's measured use and size, where the
    moved guests ran then, and what they used (cores, bytes)."""

    nodes: tuple[NodeStats, ...]
    node: str  # where the moved guests were measured (their target, unless moved on since)
    cpu: float
    mem: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """Paid or not, with the figures it was judged on (means over the measurements)."""

    paid: bool
    objective: str  # "even" (balancing) or "pressure"
    samples: int
    horizon_s: float
    imbalance: float  # as measured
    imbalance_unmoved: float  # with the guests counted on their source
    stalled: float  # share of measurements whose guests' node stalled
    stalled_unmoved: float  # share in which their source would have stalled with them on it

    def to_dict(self) -> dict[str, object]:
        return {
            "paid": self.paid,
            "objective": self.objective,
            "samples": self.samples,
            "horizon_s": self.horizon_s,
            "imbalance": self.imbalance,
            "imbalance_unmoved": self.imbalance_unmoved,
            "stalled": self.stalled,
            "stalled_unmoved": self.stalled_unmoved,
        }


def unmoved(sample: Measured, source: str) -> tuple[NodeStats, ...]:
    """The sample's nodes with the moved guests' use taken off their node and counted on `source`."""

    def shifted(n: NodeStats) -> NodeStats:
        sign = (n.name == source) - (n.name == sample.node)
        return replace(n, cpu=n.cpu + sign * sample.cpu, mem=n.mem + sign * sample.mem) if sign else n

    return tuple(shifted(n) for n in sample.nodes)


def stalls(node: NodeStats, limits: Limits) -> bool:
    """The node's guests wait beyond the pressure limit for CPU, or its memory is above the limit."""
    short_of_memory = node.maxmem > 0 and node.mem > limits.memory * node.maxmem
    return contention(node.cpu, node.maxcpu) > limits.cpu or short_of_memory


def judge(
    objective: str,
    source: str,
    samples: Sequence[Measured],
    horizon_s: float = HORIZON_S,
    scale: str = "normalized",
    limits: Limits = Limits(),
) -> Verdict | None:
    """The verdict on a move of `objective` from `source`, over the measurements of its horizon
    (the caller passes those within `horizon_s` after it finished). None without a measurement
    in which both the source and the guests' node were usable: there is nothing to judge on."""
    kept = [s for s in samples if {source, s.node} <= {n.name for n in s.nodes}]
    if not kept:
        return None
    moved_back = [unmoved(s, source) for s in kept]
    measured = [imbalance([n.load for n in s.nodes], scale) for s in kept]
    without = [imbalance([n.load for n in nodes], scale) for nodes in moved_back]
    stalled = [stalls(next(n for n in s.nodes if n.name == s.node), limits) for s in kept]
    would = [stalls(next(n for n in nodes if n.name == source), limits) for nodes in moved_back]
    mean, mean_without = sum(measured) / len(kept), sum(without) / len(kept)
    stalled_share, would_share = sum(stalled) / len(kept), sum(would) / len(kept)
    if objective == "pressure":
        paid = stalled_share < would_share
    else:
        paid = mean < mean_without * (1.0 - NOISE)
    return Verdict(paid, objective, len(kept), horizon_s, mean, mean_without, stalled_share, would_share)


def share(verdicts: Sequence[bool | None]) -> float | None:
    """The share of judged moves that paid; None while none is judged."""
    judged = [v for v in verdicts if v is not None]
    return sum(judged) / len(judged) if judged else None
