"""The round fixtures of automation (written with the others by
`PYTHONPATH=.:tests python tests/round_scenarios.py`): what approves itself under automatic and
partial automation, and what holds it back (change windows, blackouts, the emergency stops,
Proxmox's own balancer), for a new plan and for a kept one.
"""

from round_scenarios import (
    BALANCING,
    EVACUATING,
    FRIDAY_NOON,
    PLAN,
    WEEKEND_NIGHTS,
    C,
    Scenario,
    auto,
    cluster,
    has,
    starts,
    stored,
    vm,
)

# Steps gaining 64 % then 50 %: a 60 % automatic margin approves the first only.
C2 = cluster([vm("vm:101", "n1", 3, 6), vm("vm:102", "n1", 2, 4), vm("vm:103", "n1", 1, 2), vm("vm:104", "n2", 1, 2)],
             target_imbalance=0.0)  # fmt: skip
PLAN2 = stored(C2)

SCENARIOS = [
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
]
