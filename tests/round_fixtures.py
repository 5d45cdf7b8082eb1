"""Round fixtures (tests/fixtures/rounds/<name>/): the engine's round inputs and outcome as JSON.

`load` reads a scenario's input.json into crs.round.RoundInputs; `summary` writes the
decisions of an Outcome a reviewer reads and a test compares: the balancing decision, the
hold counter, the verdict on the pending plan, the plans made, the moves expired and
approved (by id, or "plan N step K" for a step the round creates), the status words.
"""

from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any

import crs.snapshot
from crs.automation import Automation
from crs.decision import Move, RoundState
from crs.model import Guards
from crs.owed import Maintenance
from crs.planned import PlannedMove
from crs.round import Outcome, RoundInputs
from crs.windows import Blackout, Window

ROOT = Path(__file__).parent / "fixtures" / "rounds"


def load(data: dict[str, Any]) -> RoundInputs:
    guards = data.get("guards", {})
    return RoundInputs(
        snapshot=crs.snapshot.parse(data["snapshot"]),
        state=RoundState(
            **{**data.get("state", {}), "stalled_nodes": tuple(data.get("state", {}).get("stalled_nodes", ()))}
        ),
        moves=tuple(_move(m) for m in data.get("moves", [])),
        maintenances=tuple(Maintenance(**{**m, "guests": tuple(m["guests"])}) for m in data.get("maintenances", [])),
        powering_down=frozenset(data.get("powering_down", [])),
        at_once_nodes=frozenset(data.get("at_once_nodes", [])),
        proxmox_ha=data.get("proxmox_ha", False),
        guards=Guards(frozenset(guards.get("cooldown", [])), frozenset(tuple(b) for b in guards.get("barred", []))),
        automation=_automation(data.get("automation", {})),
        recommendation_expiry=timedelta(seconds=data.get("recommendation_expiry_s", 900)),
        next_plan=data.get("next_plan", 1),
        now=datetime.fromisoformat(data["now"]),
    )


def _move(m: dict[str, Any]) -> PlannedMove:
    move = Move(m["leader"], tuple(m["guests"]), m["source"], m["target"], m["imbalance_after"], m["relative_gain"])
    at = m.get("suggested_at")
    return PlannedMove(
        m["id"],
        m["plan"],
        m["step"],
        m.get("after"),
        m["kind"],
        m["state"],
        move,
        datetime.fromisoformat(at) if at else None,
        m.get("automatic", False),
        m.get("reason", ""),
    )


def _automation(a: dict[str, Any]) -> Automation:
    windows = tuple(
        Window(frozenset(w["days"]), time.fromisoformat(w["start"]), time.fromisoformat(w["end"]))
        for w in a.get("windows", [])
    )
    blackouts = tuple(
        Blackout(datetime.fromisoformat(b["start"]), datetime.fromisoformat(b["end"]), b.get("label", ""))
        for b in a.get("blackouts", [])
    )
    return Automation(
        level=a.get("level", "manual"),
        automatic_margin=a.get("automatic_margin", 0.25),
        stopped=a.get("stopped", False),
        time_zone=a.get("time_zone", "UTC"),
        windows=windows,
        blackouts=blackouts,
        proxmox_rebalancing=a.get("proxmox_rebalancing", False),
    )


def summary(outcome: Outcome) -> dict[str, Any]:
    """The decisions of a round, as the expected.json files hold them."""
    result = outcome.result
    return {
        "decision": result.decision,
        "hold_count": result.state.hold_count,
        "imbalance": round(result.imbalance, 6),
        "opened": [m.node for m in outcome.opened],
        "closed": [m.node for m in outcome.closed],
        "plans": [
            {"number": p.number, "kind": p.kind, "moves": [_words(s.move) for s in p.steps]} for p in outcome.plans
        ],
        "expired": [{"move": e.move.name, "reason": e.reason} for e in outcome.expired],
        "approved": [m.name for m in outcome.approved],
        "verdict": {"replace": outcome.verdict.replace, "kept": outcome.verdict.kept},
        "waiting": outcome.waiting,
        "held": outcome.held,
        "reason": outcome.explanation["reason"],
        "proxmox_fixes": [
            f"{f['guest']} {f['source']} → {f['target']} ({f['kind']})" for f in outcome.explanation["proxmox_fixes"]
        ],
    }


def _words(move: Move) -> str:
    return f"{' + '.join(move.guests)} {move.source} → {move.target}"
