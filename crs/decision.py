"""What a balancing round answers, as plain values: the decision, the move, and why.

Admins of every peer product complain that they cannot see why a balancer did or did
not act; every `RoundResult` therefore carries an `Explanation` the page can show as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .payoff import Payoff

Decision = Literal[
    "migrate",  # the plan's total gain clears the margin: suggest its moves
    "below-threshold",  # imbalance <= threshold: the hold counter resets
    "holding",  # above threshold, but not yet for hold_duration rounds
    "no-candidate",  # nothing may move (rules, pins, single node)
    "below-margin",  # the plan gains less than the margin in total; `move` and `plan` still show it
    "below-load-floor",  # the busiest node's CPU and memory are both below the load floor
    "motion-in-flight",  # a guest is migrating: wait, the hold counter freezes
    "disabled",  # Proxmox gate: auto-rebalance off or mode basic
    "no-pressure-data",  # objective pressure: the source reports no pressure (Proxmox VE 8)
    "no-pressure",  # objective pressure: no guest hurts, none that hurts has a node to go to,
    # or a move would leave its node short of CPU as a whole
    "pressure-wait",  # objective pressure: once a minute, a quiet minute after a change (crs.gating),
    # and none while the cluster as a whole lacks the CPU (crs.pressure.cluster_short)
]


@dataclass(frozen=True, slots=True)
class RoundState:
    """What one round hands to the next; the caller persists it (Proxmox keeps it in memory)."""

    hold_count: int = 0  # consecutive rounds above threshold so far
    # Pressure gating (crs.gating), in the source's clock: the last look for a pressure move,
    # the last state change, and the digest of the guests' states that tells a change.
    checked_s: float | None = None
    changed_s: float | None = None
    digest: str = ""
    # Nodes short of CPU as a whole at the last round (crs.pressure.stalled_nodes): a stall seen
    # twice is relieved step by step; a new one only by moves that end it (it may be a peak).
    stalled_nodes: tuple[str, ...] = ()
    # The source's clock when the cluster as a whole last lacked CPU or memory (crs.pressure
    # .shortfall): within a week of it, a pressure move is futile (crs.futile.PEAK_MEMORY_S).
    short_s: float | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """One suggested migration: the bundle that moves, and the imbalance after it."""

    leader: str  # "vm:103", the guest the bundle is named after
    guests: tuple[str, ...]  # the whole bundle, leader first
    source: str
    target: str
    imbalance_after: float  # same scale as RoundResult.imbalance
    relative_gain: float  # (before - after) / before; negative if it makes things worse
    objective: str = "even"  # "pressure": it relieves a guest that stalls, whatever the imbalance
    pressure_before: float | None = None  # the guest's stall share (CPU, or memory pseudo-pressure)
    relief: float | None = None  # the stall share expected to end
    payoff: Payoff | None = None  # its benefit against its cost (crs.payoff); None under `proxmox`

    def to_dict(self) -> dict[str, Any]:
        out = {
            "leader": self.leader,
            "guests": list(self.guests),
            "source": self.source,
            "target": self.target,
            "imbalance_after": self.imbalance_after,
            "relative_gain": self.relative_gain,
        }
        if self.objective == "pressure":
            out |= {"objective": "pressure", "pressure_before": self.pressure_before, "relief": self.relief}
        if self.payoff is not None:
            out |= self.payoff.to_dict() | {"payoff": self.payoff.text()}
        return out


@dataclass(frozen=True, slots=True)
class Step:
    """One move of a plan, computed on the snapshot with the plan's earlier moves applied."""

    move: Move
    imbalance_before: float
    imbalance_after: float  # recomputed on the moved snapshot, as a fresh round would see it
    gain: float  # this step's relative gain
    alternatives: tuple[str, ...]  # next-best targets for the same guests, best first
    after: int | None  # index of the step it was computed behind; None = on the snapshot as it is

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.move.to_dict(),
            "imbalance_before": self.imbalance_before,
            "alternatives": list(self.alternatives),
            "after": self.after,
        }


def total_gain(steps: tuple[Step, ...] | list[Step]) -> float:
    """The plan's relative gain: 1 − Π(1 − step gain), i.e. (first before − last after) ÷ first before."""
    kept = 1.0
    for step in steps:
        kept *= 1.0 - step.gain
    return 1.0 - kept if steps else 0.0


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why the round decided what it did, in numbers the page shows."""

    reason: str  # one sentence for the admin
    imbalance: float
    threshold: float
    hold_count: int  # rounds above threshold counted so far (after this round)
    hold_duration: int
    candidates: int
    margin: float
    method: str
    imbalance_after: float | None = None  # after the whole plan
    relative_gain: float | None = None  # the plan's total gain, compared to the margin
    target_imbalance: float | None = None
    usage_period: float | None = None  # seconds the usage figures are a mean of; 0 = the latest values
    forecast: dict[str, Any] | None = None  # with the forecast on: its figures (crs.forecast.figures)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class RoundResult:
    decision: Decision
    imbalance: float
    node_loads: dict[str, float]
    candidates: int
    move: Move | None
    state: RoundState
    explanation: Explanation
    moves: tuple[Move, ...] = field(default=())  # `crs plan --steps`' greedy sequence only
    plan: tuple[Step, ...] = field(default=())  # the round's plan; `move` is its first step

    def to_plan_dict(self, steps: bool = False) -> dict[str, Any]:
        """The crs-plan/1 JSON form (reference/snapshot-format.md)."""
        out = {
            "format": "crs-plan/1",
            "imbalance": self.imbalance,
            "node_loads": dict(self.node_loads),
            "candidates": self.candidates,
            "decision": self.decision,
            "move": self.move.to_dict() if self.move else None,
        }
        if steps:
            out["moves"] = [m.to_dict() for m in self.moves]
        out["plan"] = {
            "moves": [step.to_dict() for step in self.plan],
            "gain": total_gain(self.plan),
            "imbalance_after": self.plan[-1].imbalance_after if self.plan else self.imbalance,
        }
        out["explanation"] = self.explanation.to_dict()
        return out
