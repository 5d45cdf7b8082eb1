"""One round of a cluster, decided as one pure function: inputs in, one outcome out.

The web side loads the inputs from its rows, calls `decide`, applies the outcome in one
transaction and pushes it; nothing here reads a clock, a database or the network. The order
is the order of precedence (crs.precedence): recommendations nobody decided on expire, owed
plans (evacuation, failback, rule fix) come first and outrank lower kinds, then the pending
balancing plan is kept or replaced, then a new plan may be made; automation approves last.
Every decision is made on the snapshot with the claims of the approved and running moves
applied (crs.claims), so no plan fills room an approved move has taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from . import claims
from .automation import Automation, held_reason, self_approved
from .balancer import run_round
from .decision import RoundResult, RoundState, Step
from .model import Guards, Snapshot
from .owed import Maintenance, reconcile
from .planned import Created, Expiry, Ledger, PlannedMove
from .precedence import MANDATORY
from .verdict import Verdict, plan_figures, remaining, verdict

BALANCING_KINDS = ("pressure", "balancing")  # the kinds a round plans itself


@dataclass(frozen=True, slots=True)
class RoundInputs:
    snapshot: Snapshot  # with the cluster's settings
    state: RoundState = RoundState()  # hold counter and pressure gate
    moves: tuple[PlannedMove, ...] = ()  # every suggested, approved or running move
    maintenances: tuple[Maintenance, ...] = ()  # open maintenance records
    powering_down: frozenset[str] = frozenset()  # nodes drained for a power-down
    at_once_nodes: frozenset[str] = frozenset()  # nodes a rolling maintenance drains at once
    proxmox_ha: bool = False  # a Proxmox cluster: its HA manager moves its HA guests itself
    guards: Guards = Guards()  # cooldowns and rejection memory
    automation: Automation = Automation()
    recommendation_expiry: timedelta = timedelta(minutes=15)
    next_plan: int = 1  # the number the round's first new plan takes
    now: datetime = datetime(1970, 1, 1)  # aware; the caller's clock


@dataclass(frozen=True, slots=True)
class Outcome:
    result: RoundResult  # the balancing round's own answer (crs.balancer)
    opened: tuple[Maintenance, ...]  # maintenances to record: nodes seen entering at the source
    closed: tuple[Maintenance, ...]  # maintenances that end: the node is back
    plans: tuple[Created, ...]  # plans to store, owed ones first, in this order
    expired: tuple[Expiry, ...]  # moves that stop waiting, and why, in this order
    approved: tuple[PlannedMove, ...]  # steps the round approves itself, in this order
    approve_details: dict[tuple[int | None, int | None, int], dict[str, object]]
    verdict: Verdict  # on the pending balancing plan
    kept_plan: int | None  # the pending plan the verdict speaks of
    waiting: str  # what keeps the round from making a new plan; "" = nothing
    held: str  # why automation left the new plan to a person; "" = it did not
    explanation: dict[str, Any] = field(default_factory=dict)  # the status the page shows

    @property
    def new_plan(self) -> Created | None:
        return next((p for p in self.plans if p.kind in BALANCING_KINDS), None)


def decide(inputs: RoundInputs) -> Outcome:
    """Decide one round of the cluster."""
    snapshot, automation = inputs.snapshot, inputs.automation
    planned_on = claims.held(snapshot, claims.against(inputs.moves))
    result = run_round(planned_on, inputs.state, guards=inputs.guards)
    ledger = Ledger(inputs.moves, inputs.next_plan)
    overdue = [m for m in ledger.alive(("suggested",)) if _overdue(m, inputs)]
    ledger.expire(overdue, f"not decided within the recommendation expiry of {_human(inputs.recommendation_expiry)}")
    owed = reconcile(
        snapshot,
        inputs.maintenances,
        ledger,
        partial(_owe, ledger, automation, snapshot.settings.method),
        powering_down=inputs.powering_down,
        at_once_nodes=inputs.at_once_nodes,
        proxmox_ha=inputs.proxmox_ha,
    )
    review, pending = _judge(inputs, result, ledger)
    kept_plan = pending[0].plan if pending else None
    held = held_reason(automation, inputs.now) if automation.level != "manual" and not automation.stopped else ""
    if review.kept and not held:
        why: dict[str, object] = {"automation": automation.level, "why": f"plan {kept_plan} still holds on fresh data"}
        _approve(ledger, automation, pending, tuple(m.move.relative_gain for m in pending), _afters(pending), why)
    waiting = waiting_reason(ledger, automation.stopped)
    new = _new_plan(result, ledger, automation, held) if result.decision == "migrate" and not waiting else None
    explanation = {
        **result.explanation.to_dict(),
        "waiting": waiting,
        "plan": new.number if new else None,
        "proxmox_fixes": list(owed.proxmox_fixes),
    }
    if review.kept:  # the status describes the plan the list shows, not the one this round computed
        explanation.update(reason=review.kept, kept_plan=kept_plan)
    figures = review.figures or (plan_figures(planned_on, (s.move for s in new.steps), new.number) if new else None)
    if figures is not None:  # the plan the page shows, as data: its "now" line and the node bars' marks
        explanation["plan_figures"] = figures.to_dict()
    return Outcome(
        result,
        owed.opened,
        owed.closed,
        tuple(ledger.created),
        tuple(ledger.expired),
        tuple(ledger.approved),
        ledger.approve_details,
        review,
        kept_plan,
        waiting,
        held if new else "",
        explanation,
    )


def _owe(
    ledger: Ledger,
    automation: Automation,
    method: str,
    kind: str,
    steps: tuple[Step, ...],
    reasons: tuple[str, ...],
    at_once: bool,
) -> None:
    """An owed plan: stored, the pending moves of lower kinds expire (they were computed without
    it), and approved by the round unless automation is manual (or it was asked for at once)."""
    if not steps:
        return
    created = ledger.create(kind, steps, reasons=reasons, method=method)
    ledger.expire(
        ledger.outranked_by(kind),
        f"replaced by {kind} plan {created.number}, which goes first: {reasons[0]}",
        {"outranked_by": created.number},
    )
    if automation.approves_owed(at_once):
        details: dict[str, object] = {"at_once": True} if at_once else {"automation": automation.level}
        ledger.approve(_of_plan(ledger, created.number), details)


def _judge(inputs: RoundInputs, result: RoundResult, ledger: Ledger) -> tuple[Verdict, list[PlannedMove]]:
    """The verdict on the pending balancing plan, and its steps still pending after it."""
    pending = ledger.alive(("suggested",), BALANCING_KINDS)
    if not pending:
        return Verdict(), []
    holding = ledger.alive(claims.HOLDING)
    running = any(m.plan == pending[0].plan for m in holding)
    snapshot = claims.held(inputs.snapshot, claims.against(holding))
    review = verdict(snapshot, pending, result, inputs.guards, running, inputs.now)
    if review.replace:
        ledger.expire(pending, review.replace)
        return review, []
    if running:  # its waiting steps drawn from the cluster as the moves under way leave it
        under_way = [m for m in holding if m.plan == pending[0].plan]
        review = replace(review, figures=remaining(snapshot, inputs.snapshot, under_way, pending, inputs.guards))
    return review, pending


def _new_plan(result: RoundResult, ledger: Ledger, automation: Automation, held: str) -> Created:
    """The round's own plan, stored, with the steps automation approves unless it is held."""
    kind = "pressure" if result.plan[0].move.objective == "pressure" else "balancing"
    e = result.explanation
    new = ledger.create(kind, result.plan, margin=e.margin, method=e.method)
    if not held:
        steps = _of_plan(ledger, new.number)
        gains, afters = tuple(s.gain for s in new.steps), tuple(s.after for s in new.steps)
        _approve(ledger, automation, steps, gains, afters, {"automation": automation.level})
    return new


def _approve(
    ledger: Ledger,
    automation: Automation,
    steps: list[PlannedMove],
    gains: tuple[float, ...],
    afters: tuple[int | None, ...],
    details: dict[str, object],
) -> None:
    """The steps of a balancing plan automation approves (none under manual or the emergency stop)."""
    if automation.level == "manual" or automation.stopped:
        return
    ledger.approve([steps[i] for i in self_approved(automation, gains, afters)], details)


def waiting_reason(ledger: Ledger, stopped: bool) -> str:
    """What keeps this round from recommending a new plan, as the page, the API and the trail say it; "" = nothing."""
    if stopped:
        return "emergency stop: automation is paused until it is lifted"
    if owed := ledger.alive(("suggested",), MANDATORY):
        first = owed[0]
        what = "an evacuation" if first.kind in ("evacuation", "failback") else "a rule fix"
        return f"{what} goes first (plan {first.plan}, waiting for a decision): no balancing plan until it is done"
    if busy := ledger.alive(("approved", "running")):
        listed = ", ".join(f"{m.name} {m.state}" for m in busy)
        # An approved step held by the windows says what it waits for.
        why = next((f"; {m.reason}" for m in busy if m.state == "approved" and m.reason), "")
        return f"a plan is running ({listed}): no new balancing plan until it finishes{why}"
    if pending := ledger.alive(("suggested",), BALANCING_KINDS):
        return (
            f"plan {pending[0].plan} still holds on fresh data ({len(pending)} recommendations waiting for a decision)"
        )
    return ""


def _of_plan(ledger: Ledger, number: int) -> list[PlannedMove]:
    return [m for m in ledger.alive(("suggested",)) if m.plan == number]


def _afters(steps: list[PlannedMove]) -> tuple[int | None, ...]:
    """Each step's `after` as an index into `steps` (None when it was computed on the snapshot
    as it was, or behind a step no longer pending)."""
    index = {m.step: i for i, m in enumerate(steps)}
    return tuple(index.get(m.after) if m.after is not None else None for m in steps)


def _overdue(move: PlannedMove, inputs: RoundInputs) -> bool:
    return move.suggested_at is not None and move.suggested_at < inputs.now - inputs.recommendation_expiry


def _human(duration: timedelta) -> str:
    minutes = duration.total_seconds() / 60
    return f"{minutes:g} minutes" if minutes != 1 else "1 minute"
