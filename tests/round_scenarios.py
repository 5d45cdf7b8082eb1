"""The round fixtures' scenarios: `PYTHONPATH=.:tests python tests/round_scenarios.py` (re)writes
tests/fixtures/rounds/.

Each scenario is a small cluster (three nodes of 8 CPUs and 32 GiB, `static` mode, so every
load is configured cores and memory over the node's and can be checked by hand), what the
cluster already has in hand, and `expect`: the decisions reasoned out for it, checked here
before the files are written. expected.json then pins the whole outcome (its words too), so
a changed decision shows as a reviewed diff, as Proxmox's log.expect files do.

This module holds the helpers and the scenarios of the round's own plan (hold counting, the
margin, the pending plan on fresh data, the cluster itself); its siblings hold the owed plans
(round_scenarios_owed.py), automation (round_scenarios_automation.py) and the margins' edges
(round_scenarios_margins.py).
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
EVACUATING = cluster([*C["guests"], vm("vm:105", "n3")], nodes=MAINT)

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
    # The other groups build on this module's helpers, so they are imported once it has run.
    from round_scenarios_automation import SCENARIOS as AUTOMATION
    from round_scenarios_margins import SCENARIOS as MARGINS
    from round_scenarios_owed import SCENARIOS as OWED

    main(SCENARIOS + OWED + AUTOMATION + MARGINS)
