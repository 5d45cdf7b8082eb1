"""The round fixtures of owed plans (written with the others by
`PYTHONPATH=.:tests python tests/round_scenarios.py`): a node in maintenance evacuated, the
claims an approved move holds on its target, failback, rule fixes, power saving and pressure,
each against the balancing plan it outranks or yields to.
"""

from round_scenarios import EVACUATING, EVEN, MAINT, PLAN, C, Scenario, auto, cluster, move, node, starts, stored, vm

# n1 carries 4 cores, n2 1: n3's guests go to n2 first, unless vm:106 (4 cores) is counted there.
CLAIMING = cluster(
    [vm("vm:101", "n1"), vm("vm:102", "n1"), vm("vm:104", "n2", 1, 2), vm("vm:105", "n3"), vm("vm:106", "n3", 4, 8)],
    nodes=MAINT,
)
ANTI = [{"type": "resource-affinity", "id": "apart", "affinity": "negative", "resources": ["vm:101", "vm:102"]}]

SCENARIOS = [
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
]
