"""The round fixtures' scenarios: `PYTHONPATH=.:tests python tests/round_scenarios.py` (re)writes
tests/fixtures/rounds/.

Each scenario is a small cluster (three nodes of 8 CPUs and 32 GiB, `static` mode, so every
load is configured cores and memory over the node's and can be checked by hand), what the
cluster already has in hand, and `expect`: the decisions reasoned out for it, checked here
before the files are written. expected.json then pins the whole outcome (its words too), so
a changed decision shows as a reviewed diff, as Proxmox's log.expect files do.
"""

import json
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from round_fixtures import ROOT, load, summary

import crs.balancer
import crs.round
import crs.snapshot
from crs.decision import RoundState

GIB = 2**30
NOW = "2026-11-27T12:00:00+00:00"  # a Friday
EARLIER = "2026-11-27T11:58:00+00:00"  # within the 10-minute minimum dwell
STOOD = "2026-11-27T11:49:00+00:00"  # past the minimum dwell, within the recommendation expiry
LONG_AGO = "2026-11-27T11:30:00+00:00"  # beyond the 15-minute recommendation expiry
FRIDAY_NOON = [{"days": [4], "start": "11:00", "end": "13:00"}]
WEEKEND_NIGHTS = [{"days": [5, 6], "start": "02:00", "end": "05:00"}]


def node(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "cpus": 8, "memory_bytes": 32 * GIB, **extra}


def vm(sid: str, where: str, cores: float = 2, gib: float = 4, **extra: Any) -> dict[str, Any]:
    return {"sid": sid, "node": where, "cores": cores, "memory_bytes": gib * GIB, **extra}


def cluster(guests=None, nodes=None, rules=(), **settings: Any) -> dict[str, Any]:
    """n1 carries 5 of 8 cores and 10 of 32 GiB, n2 1 core, n3 nothing: imbalance 76.4 %; moving
    vm:101 to n3 and vm:103 to n2 leaves 2 cores and 4 GiB on each, imbalance 0."""
    base = {
        "preset": "product",
        "mode": "static",
        "hold_duration": 1,
        "usage_period": 0,
        "moves_per_round": 3,
        "threshold": 0.3,
        "target_imbalance": 0.1,
        "margin": 0.1,
    }
    return {
        "format": "crs-snapshot/1",
        "settings": base | settings,
        "nodes": nodes or [node("n1"), node("n2"), node("n3")],
        "guests": guests
        if guests is not None
        else [vm("vm:101", "n1"), vm("vm:102", "n1"), vm("vm:103", "n1", 1, 2), vm("vm:104", "n2", 1, 2)],
        "rules": list(rules),
    }


EVEN = [vm("vm:101", "n1"), vm("vm:102", "n2"), vm("vm:103", "n3")]


def move(
    id,
    leader,
    source,
    target,
    *,
    plan=1,
    step=0,
    after=None,
    kind="balancing",
    state="suggested",
    gain=0.3,
    after_imbalance=0.4,
    at=EARLIER,
    guests=None,
    **extra,
):
    return {
        "id": id, "plan": plan, "step": step, "after": after, "kind": kind, "state": state, "leader": leader,
        "guests": guests or [leader], "source": source, "target": target, "imbalance_after": after_imbalance,
        "relative_gain": gain, "suggested_at": at, **extra,
    }  # fmt: skip


def stored(snapshot: dict[str, Any], first_id: int = 1, plan: int = 1, **extra: Any) -> list[dict[str, Any]]:
    """The plan a round makes on `snapshot`, as the web side stores it (ids from `first_id`)."""
    result = crs.balancer.run_round(crs.snapshot.parse(snapshot), RoundState(hold_count=99))
    return [
        move(first_id + i, s.move.leader, s.move.source, s.move.target, plan=plan, step=i, after=s.after,
             gain=s.gain, after_imbalance=s.imbalance_after, **extra)
        for i, s in enumerate(result.plan)
    ]  # fmt: skip


@dataclass
class Scenario:
    name: str
    shows: str  # the README's one line
    snapshot: dict[str, Any]
    expect: dict[str, Any]  # reasoned decisions: summary key → value, or a callable check
    inputs: dict[str, Any] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        return {"now": NOW, **self.inputs, "snapshot": self.snapshot}


def starts(text: str):
    return lambda value: value.startswith(text)


def has(text: str):
    return lambda value: text in value


def auto(level: str = "automatic", **extra: Any) -> dict[str, Any]:
    return {"automation": {"level": level, **extra}}


C = cluster()
PLAN = stored(C)  # vm:101 n1 → n3, then vm:103 n1 → n2 (behind it)
NEW = ["vm:101 n1 → n3", "vm:103 n1 → n2"]
BALANCING = [{"number": 1, "kind": "balancing", "moves": NEW}]
MAINT = [node("n1"), node("n2"), node("n3", maintenance=True)]
# Steps gaining 64 % then 50 %: a 60 % automatic margin approves the first only.
C2 = cluster([vm("vm:101", "n1", 3, 6), vm("vm:102", "n1", 2, 4), vm("vm:103", "n1", 1, 2), vm("vm:104", "n2", 1, 2)],
             target_imbalance=0.0)  # fmt: skip
PLAN2 = stored(C2)
EVACUATING = cluster([*C["guests"], vm("vm:105", "n3")], nodes=MAINT)
# n1 carries 4 cores, n2 1: n3's guests go to n2 first, unless vm:106 (4 cores) is counted there.
CLAIMING = cluster(
    [vm("vm:101", "n1"), vm("vm:102", "n1"), vm("vm:104", "n2", 1, 2), vm("vm:105", "n3"), vm("vm:106", "n3", 4, 8)],
    nodes=MAINT,
)
ANTI = [{"type": "resource-affinity", "id": "apart", "affinity": "negative", "resources": ["vm:101", "vm:102"]}]

SCENARIOS = [
    # Hold counting
    Scenario(
        "hold-first-round",
        "Above the threshold for the first of 3 rounds: the round holds and counts 1.",
        cluster(hold_duration=3),
        {"decision": "holding", "hold_count": 1, "plans": []},
    ),
    Scenario(
        "hold-second-round",
        "Second round of 3 above the threshold: still holding, the counter at 2.",
        cluster(hold_duration=3),
        {"decision": "holding", "hold_count": 2, "plans": []},
        {"state": {"hold_count": 1}},
    ),
    Scenario(
        "hold-served",
        "The third round of 3 acts: a plan is made and the counter starts over.",
        cluster(hold_duration=3),
        {"decision": "migrate", "hold_count": 0, "plans": BALANCING},
        {"state": {"hold_count": 2}},
    ),
    Scenario(
        "hold-restarts-below-threshold",
        "Back at or below the threshold: the hold counter restarts at 0.",
        cluster(EVEN, hold_duration=3),
        {"decision": "below-threshold", "hold_count": 0, "plans": []},
        {"state": {"hold_count": 2}},
    ),
    Scenario(
        "hold-kept-while-moving",
        "A guest is migrating: the round waits and keeps the hold counter as it is.",
        cluster([*C["guests"][:3], vm("vm:104", "n2", 1, 2, state="migrate", target="n3")], hold_duration=3),
        {"decision": "motion-in-flight", "hold_count": 2, "plans": []},
        {"state": {"hold_count": 2}},
    ),
    # Margin on a new plan
    Scenario(
        "margin-clears",
        "A new plan whose total gain (100 %) clears the margin is recommended, waiting for a person.",
        C,
        {"decision": "migrate", "plans": BALANCING, "approved": []},
    ),
    # The pending plan on fresh data
    Scenario(
        "kept-same-plan",
        "The pending plan is what this round would plan: it is kept, no new plan.",
        C,
        {
            "plans": [],
            "expired": [],
            "verdict": {"replace": "", "kept": has("this round's plan is the same")},
            "waiting": starts("plan 1 still holds on fresh data (2 recommendations"),
        },
        {"moves": PLAN, "next_plan": 2},
    ),
    Scenario(
        "kept-not-beaten",
        "A pending plan moving vm:102 (as big as vm:101) gains as much as the new plan: kept, "
        "the new one is not better by the margin.",
        C,
        {"plans": [], "expired": [], "verdict": {"replace": "", "kept": has("not better by the margin")}},
        {"moves": [move(1, "vm:102", "n1", "n3"), move(2, "vm:103", "n1", "n2", step=1, after=0)], "next_plan": 2},
    ),
    Scenario(
        "kept-beaten-by-margin",
        "A pending plan of one small move (vm:103 n1 → n3 gains 34.5 %) is beaten by the "
        "new plan's first move by more than the margin: replaced, and the new plan recommended.",
        C,
        {
            "verdict": {"replace": starts("a new plan gains"), "kept": ""},
            "expired": lambda e: [x["move"] for x in e] == ["#1"],
            "plans": [{"number": 2, "kind": "balancing", "moves": NEW}],
        },
        {"moves": [move(1, "vm:103", "n1", "n3", at=STOOD)], "next_plan": 2},
    ),
    Scenario(
        "kept-no-plan-of-its-own",
        "Still above the threshold but holding: the pending plan is kept and the status describes it.",
        cluster(hold_duration=3),
        {
            "decision": "holding",
            "verdict": {"replace": "", "kept": has("makes no plan of its own")},
            "reason": starts("Plan 1 is kept"),
        },
        {"moves": PLAN, "next_plan": 2},
    ),
    Scenario(
        "step-illegal-guest-moved",
        "A pending step's guest is no longer on its source: the plan is replaced and a new one made.",
        cluster([vm("vm:101", "n2"), *C["guests"][1:]]),
        {
            "verdict": {"replace": starts("step #1 no longer holds: vm:101 is no longer running on n1"), "kept": ""},
            "plans": lambda p: len(p) == 1 and p[0]["number"] == 2,
        },
        {"moves": PLAN, "next_plan": 2},
    ),
    Scenario(
        "step-illegal-target-offline",
        "A pending step's target went offline: the plan is replaced.",
        cluster(nodes=[node("n1"), node("n2"), node("n3", online=False)]),
        {
            "verdict": {"replace": "step #1 no longer holds: n3 is offline, in maintenance or gone", "kept": ""},
            "expired": lambda e: [x["move"] for x in e] == ["#1", "#2"],
        },
        {"moves": PLAN, "next_plan": 2},
    ),
    Scenario(
        "step-pointless",
        "A pending step that would no longer lower the imbalance (vm:104 n2 → n3 only swaps two "
        "nodes' loads) makes the plan go.",
        C,
        {"verdict": {"replace": starts("step #1 no longer helps"), "kept": ""}},
        {"moves": [move(1, "vm:104", "n2", "n3")], "next_plan": 2},
    ),
    Scenario(
        "step-in-cooldown",
        "A pending step's guest is in its cooldown after a migration: the plan is replaced.",
        C,
        {
            "verdict": {
                "replace": "step #1 no longer holds: vm:101 is in its cooldown after a recent migration",
                "kept": "",
            }
        },
        {"moves": PLAN, "next_plan": 2, "guards": {"cooldown": ["vm:101"]}},
    ),
    Scenario(
        "kept-gain-below-margin",
        "The pending plan still helps but gains less than a 60 % margin: replaced.",
        cluster(margin=0.6),
        {"verdict": {"replace": starts("its total gain fell to"), "kept": ""}},
        {"moves": [move(1, "vm:103", "n1", "n3", at=STOOD)], "next_plan": 2},
    ),
    Scenario(
        "no-longer-warranted",
        "Back below the threshold: the pending plan is no longer recommended.",
        cluster(EVEN),
        {
            "decision": "below-threshold",
            "verdict": {"replace": starts("no longer recommended: Imbalance"), "kept": ""},
            "plans": [],
        },
        {"moves": [move(1, "vm:101", "n1", "n3")], "next_plan": 2},
    ),
    Scenario(
        "rejected-step-keeps-those-before",
        "Step 2 of plan 1 was rejected (its move barred) and the step behind it "
        "expired then; the step before it stays, kept on fresh data, and no new plan offers the rejected move.",
        C,
        {"expired": [], "plans": [], "verdict": {"replace": "", "kept": starts("Plan 1 is kept")}},
        {"moves": PLAN[:1], "next_plan": 2, "guards": {"barred": [["vm:103", "n2"]]}},
    ),
    Scenario(
        "partly-carried-out-running",
        "Step 1 runs, step 2 waits: its remaining step is kept as it is and no new plan is made until it finishes.",
        C,
        {
            "plans": [],
            "expired": [],
            "verdict": {"replace": "", "kept": ""},
            "waiting": starts("a plan is running (#1 running)"),
        },
        {"moves": [{**PLAN[0], "state": "running"}, PLAN[1]], "next_plan": 2},
    ),
    Scenario(
        "partly-carried-out-done",
        "Step 1 is done (vm:101 now on n3): the step behind it is judged alone on fresh "
        "data and kept (threshold 20 %: the cluster is still above it).",
        cluster([vm("vm:101", "n3"), *C["guests"][1:]], threshold=0.2),
        {"expired": [], "verdict": {"replace": "", "kept": starts("Plan 1 is kept: on fresh data its 1 move")}},
        {"moves": PLAN[1:], "next_plan": 2},
    ),
    Scenario(
        "overdue",
        "A recommendation nobody decided on within 15 minutes expires; the round plans afresh.",
        C,
        {
            "expired": lambda e: e[0]["reason"] == "not decided within the recommendation expiry of 15 minutes",
            "plans": [{"number": 2, "kind": "balancing", "moves": NEW}],
        },
        {"moves": [move(1, "vm:103", "n1", "n3", at=LONG_AGO)], "next_plan": 2},
    ),
    # Owed plans
    Scenario(
        "evacuation-pre-empts-balancing",
        "n3 is in maintenance: its evacuation plan goes first, the pending "
        "balancing plan is outranked, no balancing plan is made.",
        EVACUATING,
        {
            "plans": [{"number": 2, "kind": "evacuation", "moves": lambda m: len(m) == 1}],
            "expired": lambda e: (
                all(x["reason"].startswith("replaced by evacuation plan 2") for x in e) and len(e) == 2
            ),
            "waiting": starts("an evacuation goes first (plan 2"),
        },
        {"moves": PLAN, "next_plan": 2, "maintenances": [{"node": "n3", "guests": ["vm:105"]}]},
    ),
    Scenario(
        "evacuation-entered-at-source",
        "n3 shows in maintenance with no record (entered from Proxmox's command "
        "line): the round records it and plans its evacuation.",
        EVACUATING,
        {"opened": ["n3"], "plans": lambda p: p[0]["kind"] == "evacuation"},
    ),
    Scenario(
        "evacuation-covered",
        "n3's guest already has an evacuation move running: no second plan for it.",
        EVACUATING,
        {"plans": [], "waiting": starts("a plan is running (#7 running)")},
        {
            "maintenances": [{"node": "n3", "guests": ["vm:105"]}],
            "moves": [move(7, "vm:105", "n3", "n2", kind="evacuation", state="running", plan=3)],
            "next_plan": 4,
        },
    ),
    # Claims: an approved move holds its target from approval (crs.claims)
    Scenario(
        "claim-keeps-plan-off-target",
        "n3 is in maintenance; #7 (vm:106 n3 → n2) is approved and waits for its slot: its claim "
        "counts vm:106 on n2 from approval, so vm:105's evacuation is placed around it and goes to n1.",
        CLAIMING,
        {"plans": [{"number": 4, "kind": "evacuation", "moves": ["vm:105 n3 → n1"]}], "expired": []},
        {
            "maintenances": [{"node": "n3", "guests": ["vm:105", "vm:106"]}],
            "moves": [move(7, "vm:106", "n3", "n2", kind="evacuation", state="approved", plan=3)],
            "next_plan": 4,
        },
    ),
    Scenario(
        "claim-released-frees-target",
        "The same cluster once #7 expired: its claim is released, so n2 is free again and vm:105 "
        "goes there (vm:106, no longer covered, follows: n2's 3 cores are still fewer than n1's 4).",
        CLAIMING,
        {"plans": [{"number": 4, "kind": "evacuation", "moves": ["vm:105 n3 → n2", "vm:106 n3 → n2"]}]},
        {"maintenances": [{"node": "n3", "guests": ["vm:105", "vm:106"]}], "next_plan": 4},
    ),
    Scenario(
        "evacuation-automatic",
        "Under automatic automation the evacuation approves itself.",
        EVACUATING,
        {"approved": ["plan 1 step 0"], "waiting": starts("a plan is running (plan 1 step 0 approved)")},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"]}], **auto()},
    ),
    Scenario(
        "evacuation-partial",
        "Partial automation approves owed moves whatever their gain (margins do not apply).",
        EVACUATING,
        {"approved": ["plan 1 step 0"]},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"]}], **auto("partial", automatic_margin=0.99)},
    ),
    Scenario(
        "evacuation-at-once",
        "Under manual automation an evacuation asked for at once still approves itself.",
        EVACUATING,
        {"approved": ["plan 1 step 0"]},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"], "at_once": True}]},
    ),
    Scenario(
        "failback",
        "n3 is back from maintenance (seen on a later snapshot): the maintenance closes and vm:105 returns to it.",
        cluster([*EVEN, vm("vm:105", "n2")]),
        {"closed": ["n3"], "plans": lambda p: p[0] == {"number": 1, "kind": "failback", "moves": ["vm:105 n2 → n3"]}},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"]}]},
    ),
    Scenario(
        "failback-not-yet-seen",
        "A snapshot taken before the node entered maintenance cannot say it left: nothing closes.",
        cluster([*EVEN, vm("vm:105", "n2")]),
        {"closed": [], "plans": []},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"], "seen": False}]},
    ),
    Scenario(
        "failback-node-offline",
        "A node that left maintenance by failing gets nothing back.",
        cluster([vm("vm:101", "n1"), vm("vm:102", "n2")], nodes=[node("n1"), node("n2"), node("n3", online=False)]),
        {"closed": [], "plans": []},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"]}]},
    ),
    Scenario(
        "maintenance-ended-expires-evacuation",
        "n3 left maintenance before its evacuation step started: the step expires.",
        cluster(EVEN),
        {"closed": ["n3"], "expired": [{"move": "#4", "reason": "n3 left maintenance before this move started"}]},
        {
            "maintenances": [{"node": "n3", "guests": ["vm:103"]}],
            "moves": [move(4, "vm:103", "n3", "n1", kind="evacuation", plan=2)],
            "next_plan": 3,
        },
    ),
    Scenario(
        "rule-fix",
        "vm:101 and vm:102 must be apart but share n1: a rule fix is owed and goes before balancing.",
        cluster(rules=ANTI),
        {"plans": lambda p: [x["kind"] for x in p] == ["rule-fix"], "waiting": starts("a rule fix goes first (plan 1")},
    ),
    Scenario(
        "rule-fix-outranks-balancing",
        "The rule fix outranks the pending balancing plan, which expires.",
        cluster(rules=ANTI),
        {"expired": lambda e: len(e) == 2 and all("replaced by rule-fix plan 2" in x["reason"] for x in e)},
        {"moves": PLAN, "next_plan": 2},
    ),
    Scenario(
        "rule-fix-automatic",
        "Automatic automation approves the rule fix; no balancing plan while it runs.",
        cluster(rules=ANTI),
        {"approved": ["plan 1 step 0", "plan 1 step 1"], "plans": lambda p: len(p) == 1},
        auto(),
    ),
    Scenario(
        "rule-fix-left-to-proxmox",
        "On a Proxmox cluster its HA manager fixes its HA guests itself: no rule fix "
        "is planned, and its moves are listed.",
        cluster(
            [vm("vm:101", "n1", proxmox_ha=True), vm("vm:102", "n1", proxmox_ha=True), *C["guests"][2:]], rules=ANTI
        ),
        {"plans": lambda p: all(x["kind"] != "rule-fix" for x in p), "proxmox_fixes": lambda f: len(f) >= 1},
        {"proxmox_ha": True},
    ),
    Scenario(
        "power-saving-last",
        "n3 drains for a power-down: its consolidation approves itself at once and ranks below "
        "balancing, so it does not outrank the pending balancing plan; but its claim on n2 "
        "(vm:105 counted there from approval) leaves that plan's move to n2 pointless: judged "
        "with the claim, the plan is replaced.",
        EVACUATING,
        {
            "plans": [{"number": 2, "kind": "consolidation", "moves": ["vm:105 n3 → n2"]}],
            "expired": [{"move": "#1", "reason": starts("step #1 no longer helps")}],
            "approved": ["plan 2 step 0"],
        },
        {
            "maintenances": [{"node": "n3", "guests": ["vm:105"], "at_once": True}],
            "powering_down": ["n3"],
            "moves": stored(EVACUATING),
            "next_plan": 2,
        },
    ),
    Scenario(
        "evacuation-outranks-consolidation",
        "n2 drains for a power-down while n3 enters maintenance: n3's "
        "evacuation outranks the consolidation made (and approved) just before it in the same round.",
        cluster(
            [vm("vm:101", "n1"), vm("vm:104", "n2"), vm("vm:105", "n3")],
            nodes=[node("n1"), node("n2", maintenance=True), node("n3", maintenance=True)],
        ),
        {
            "plans": lambda p: [x["kind"] for x in p] == ["consolidation", "evacuation"],
            "approved": [],
            "expired": lambda e: [x["move"] for x in e] == ["plan 1 step 0"],
        },
        {
            "maintenances": [
                {"node": "n2", "guests": ["vm:104"], "at_once": True},
                {"node": "n3", "guests": ["vm:105"]},
            ],
            "powering_down": ["n2"],
        },
    ),
    # Pressure before balancing
    Scenario(
        "pressure-before-balancing",
        "Objective both: vm:101 stalls on CPU 90 % of the time; a pressure plan relieves it before any evenness move.",
        cluster(
            [
                vm("vm:101", "n1", 4, 4, cpu_usage=4, uptime_s=3600, pressure={"cpu_some": 0.9}),
                vm("vm:102", "n1", 4, 4, cpu_usage=4, uptime_s=3600),
                vm("vm:103", "n2", 1, 2, uptime_s=3600),
            ],
            objective="both",
        ),
        {"plans": [{"number": 1, "kind": "pressure", "moves": lambda m: m[0].startswith("vm:101 n1 → ")}]},
    ),
    # Automation
    Scenario(
        "automatic-approves-new-plan",
        "Automatic automation approves every step of the new plan.",
        C,
        {"plans": BALANCING, "approved": ["plan 1 step 0", "plan 1 step 1"], "held": ""},
        auto(),
    ),
    Scenario(
        "partial-approves-above-margin",
        "Partial automation with a 60 % automatic margin: the first step (gain "
        "above it) approves itself; the second, gaining less, waits for a person.",
        C2,
        {"approved": ["plan 1 step 0"]},
        auto("partial", automatic_margin=0.6),
    ),
    Scenario(
        "partial-approves-those-before",
        "A later step clearing the automatic margin approves the step it was computed behind too.",
        C,
        {"approved": ["plan 1 step 0", "plan 1 step 1"]},
        auto("partial", automatic_margin=0.99),
    ),
    Scenario(
        "change-window-holds",
        "Automatic automation outside the change windows: the plan waits for a person, and the round says until when.",
        C,
        {"approved": [], "held": "outside the change windows until Sat 02:00 (UTC)", "plans": BALANCING},
        auto(windows=WEEKEND_NIGHTS),
    ),
    Scenario(
        "change-window-open",
        "Inside a change window automatic automation approves the plan.",
        C,
        {"approved": ["plan 1 step 0", "plan 1 step 1"], "held": ""},
        auto(windows=FRIDAY_NOON),
    ),
    Scenario(
        "blackout-holds",
        "A blackout holds automatic approval, whatever the windows say.",
        C,
        {"approved": [], "held": "blackout: freeze until Fri 14:00 (UTC)"},
        auto(blackouts=[{"start": "2026-11-27T10:00:00+00:00", "end": "2026-11-27T14:00:00+00:00", "label": "freeze"}]),
    ),
    Scenario(
        "emergency-stop",
        "The emergency stop: no new plan, nothing approves itself, the status says why.",
        C,
        {"plans": [], "approved": [], "waiting": "emergency stop: automation is paused until it is lifted"},
        auto(stopped=True),
    ),
    Scenario(
        "emergency-stop-owed",
        "During the emergency stop an evacuation is still planned, but waits for a person.",
        EVACUATING,
        {"plans": lambda p: [x["kind"] for x in p] == ["evacuation"], "approved": []},
        {"maintenances": [{"node": "n3", "guests": ["vm:105"]}], **auto(stopped=True)},
    ),
    Scenario(
        "proxmox-balancer-on",
        "Proxmox's own auto-rebalance is on: automatic approval holds, so two balancers "
        "do not undo each other's moves.",
        C,
        {"approved": [], "held": starts("Proxmox's own automatic rebalancing")},
        auto(proxmox_rebalancing=True),
    ),
    Scenario(
        "kept-plan-approved-automatic",
        "Automation switched to automatic with a plan waiting: the plan still holds "
        "on fresh data, so this round approves it (what DRS does when fully automated).",
        C,
        {
            "plans": [],
            "approved": ["#1", "#2"],
            "verdict": {"replace": "", "kept": has("same")},
            "waiting": starts("a plan is running (#1 approved, #2 approved)"),
        },
        {"moves": PLAN, "next_plan": 2, **auto()},
    ),
    Scenario(
        "kept-plan-approved-partial",
        "Partial automation approves the kept plan's steps above its margin only.",
        C2,
        {"approved": ["#1"]},
        {"moves": PLAN2, "next_plan": 2, **auto("partial", automatic_margin=0.6)},
    ),
    Scenario(
        "kept-plan-held-by-window",
        "Outside the change windows a kept plan is not approved by the round.",
        C,
        {"approved": [], "verdict": {"replace": "", "kept": has("same")}},
        {"moves": PLAN, "next_plan": 2, **auto(windows=WEEKEND_NIGHTS)},
    ),
    # The cluster itself
    Scenario(
        "standby-node",
        "n3 is on standby (powered down for power saving): no target and out of the imbalance, "
        "so the plan evens n1 and n2 only.",
        cluster(nodes=[node("n1"), node("n2"), node("n3", standby=True)]),
        {"plans": lambda p: all("→ n3" not in m for m in p[0]["moves"])},
    ),
    Scenario(
        "load-floor",
        "The busiest node is below the 80 % load floor: no move, and a pending plan goes.",
        cluster(load_floor=0.8),
        {
            "decision": "below-load-floor",
            "plans": [],
            "verdict": {"replace": starts("no longer recommended: No move"), "kept": ""},
        },
        {"moves": PLAN[:1], "next_plan": 2},
    ),
    Scenario(
        "no-candidate",
        "Every guest is pinned to its node: no move is possible.",
        cluster([vm("vm:101", "n1", allowed_nodes=["n1"]), vm("vm:102", "n1", allowed_nodes=["n1"])]),
        {"decision": "no-candidate", "plans": []},
    ),
    Scenario(
        "proxmox-preset",
        "Under the proxmox preset a round plans one move, after 3 rounds above the threshold.",
        cluster(preset="proxmox", hold_duration=3, moves_per_round=1, target_imbalance=None),
        {"decision": "migrate", "plans": [{"number": 1, "kind": "balancing", "moves": ["vm:101 n1 → n3"]}]},
        {"state": {"hold_count": 2}},
    ),
    Scenario(
        "proxmox-preset-holding",
        "Under the proxmox preset the first round above the threshold holds.",
        cluster(preset="proxmox", hold_duration=3, moves_per_round=1, target_imbalance=None),
        {"decision": "holding", "hold_count": 1},
    ),
]


def check(scenario: Scenario, got: dict[str, Any]) -> None:
    for key, want in scenario.expect.items():
        value = got[key]
        if isinstance(want, dict):
            for sub, w in want.items():
                ok = w(value[sub]) if callable(w) else value[sub] == w
                assert ok, f"{scenario.name}: {key}.{sub} = {value[sub]!r}"
        elif (
            isinstance(want, list) and want and isinstance(want[0], dict) and any(callable(v) for v in want[0].values())
        ):
            assert len(value) == len(want), f"{scenario.name}: {key} = {value!r}"
            for w, v in zip(want, value):
                for sub, x in w.items():
                    assert x(v[sub]) if callable(x) else v[sub] == x, f"{scenario.name}: {key} = {value!r}"
        else:
            ok = want(value) if callable(want) else value == want
            assert ok, f"{scenario.name}: {key} = {value!r}"


def main(scenarios: list[Scenario]) -> None:
    if ROOT.exists():
        shutil.rmtree(ROOT)
    failed = []
    for scenario in scenarios:
        document = scenario.document()
        got = summary(crs.round.decide(load(document)))
        try:
            check(scenario, got)
        except AssertionError as exc:
            failed.append(str(exc))
            continue
        folder = ROOT / scenario.name
        folder.mkdir(parents=True)
        (folder / "README").write_text(scenario.shows + "\n")
        (folder / "input.json").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        (folder / "expected.json").write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(scenarios) - len(failed)} round fixtures written to {ROOT}")
    if failed:
        sys.exit("not as reasoned:\n" + "\n".join(failed))


if __name__ == "__main__":
    from round_scenarios_margins import SCENARIOS as MARGINS  # they build on this module's helpers

    main(SCENARIOS + MARGINS)
