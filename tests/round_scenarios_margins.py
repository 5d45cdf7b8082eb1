"""The round fixtures on both sides of each margin comparison (written with the others by
`PYTHONPATH=.:tests python tests/round_scenarios.py`).

The margin is compared four times: a new plan of one move and a new plan of several against
it (crs.balancer), the kept plan's own gain against it, and the new plan's gain over the kept
one's against it (crs.verdict). Each pair sits within a percentage point of the figure
compared, so a rule loosened to "better at all" or tightened by a point fails one of them. The
minimum dwell holds back both verdicts until the kept plan has stood it; `proxmox` has none.
"""

from round_scenarios import STOOD, Scenario, cluster, has, move, starts, vm

# One move: vm:101 n1 → n3 takes the imbalance from 76.4 % to 28.9 %, a gain of 62.2 %.
ONE_MOVE = {"moves_per_round": 1}
# Four guests on n1 (1, 1, 3 and 3 cores): two moves take the imbalance from 100 % to 12.5 %, 87.5 %.
ALL_ON_N1 = [vm("vm:101", "n1", 1, 2), vm("vm:102", "n1", 1, 2), vm("vm:103", "n1", 3, 6), vm("vm:104", "n1", 3, 6)]
# A kept plan of one small move (vm:103 n1 → n3 still gains 34.5 %) against the new plan's
# first move (vm:101 n1 → n3, 62.2 %): better by 27.7 %.
SMALL = [move(1, "vm:103", "n1", "n3", at=STOOD)]
YOUNG = [move(1, "vm:103", "n1", "n3")]  # suggested 2 minutes ago, within the 10-minute dwell
NEW = [{"number": 2, "kind": "balancing", "moves": ["vm:101 n1 → n3", "vm:103 n1 → n2"]}]

SCENARIOS = [
    Scenario(
        "margin-move-clears",
        "One move gaining 62.2 % clears a 62 % margin: recommended.",
        cluster(margin=0.62, **ONE_MOVE),
        {"decision": "migrate", "plans": [{"number": 1, "kind": "balancing", "moves": ["vm:101 n1 → n3"]}]},
    ),
    Scenario(
        "margin-move-not-cleared",
        "One move gaining 62.2 % does not clear a 63 % margin: no plan.",
        cluster(margin=0.63, **ONE_MOVE),
        {"decision": "below-margin", "plans": [], "reason": has("is less than the margin 63%")},
    ),
    Scenario(
        "margin-plan-clears",
        "A plan of two moves gaining 87.5 % in total clears an 87 % margin: recommended.",
        cluster(ALL_ON_N1, margin=0.87, target_imbalance=0.0),
        {"decision": "migrate", "plans": lambda p: len(p) == 1 and len(p[0]["moves"]) == 2},
    ),
    Scenario(
        "margin-plan-not-cleared",
        "A plan of two moves gaining 87.5 % in total does not clear an 88 % margin: no plan.",
        cluster(ALL_ON_N1, margin=0.88, target_imbalance=0.0),
        {"decision": "below-margin", "plans": [], "reason": has("a total gain of 87.5%, is less than the margin 88%")},
    ),
    Scenario(
        "margin-not-cleared",
        "n1 carries every guest: the best plan, two moves, gains 87.5 %, less than a 90 % margin, so no plan is made.",
        cluster(ALL_ON_N1, margin=0.9, target_imbalance=0.0),
        {"decision": "below-margin", "plans": [], "reason": starts("The best plan, 2 moves")},
    ),
    Scenario(
        "kept-beaten-by-more-than-margin",
        "The new plan's first move beats the kept plan by 27.7 %, more than a 27 % margin, and the kept plan has "
        "stood the minimum dwell: replaced, and the new plan recommended.",
        cluster(margin=0.27),
        {"verdict": {"replace": starts("a new plan gains 62.2%"), "kept": ""}, "plans": NEW},
        {"moves": SMALL, "next_plan": 2},
    ),
    Scenario(
        "kept-beaten-by-less-than-margin",
        "The new plan's first move beats the kept plan by 27.7 %, less than a 28 % margin: kept, no new plan.",
        cluster(margin=0.28),
        {"verdict": {"replace": "", "kept": has("not better by the margin 28%")}, "plans": [], "expired": []},
        {"moves": SMALL, "next_plan": 2},
    ),
    Scenario(
        "kept-beaten-within-dwell",
        "The new plan beats the kept plan by more than the margin, but the kept plan was suggested 2 minutes ago: "
        "it stays until it has stood the 10-minute minimum dwell.",
        cluster(),
        {"verdict": {"replace": "", "kept": has("better by the margin 10%, but it stays")}, "plans": []},
        {"moves": YOUNG, "next_plan": 2},
    ),
    Scenario(
        "kept-beaten-proxmox-no-dwell",
        "Under the proxmox preset (no minimum dwell) a kept plan suggested 2 minutes ago goes as soon as a new "
        "move beats it by the margin.",
        cluster(preset="proxmox", hold_duration=1, moves_per_round=1, target_imbalance=None),
        {"verdict": {"replace": starts("a new plan gains 62.2%"), "kept": ""}},
        {"moves": YOUNG, "next_plan": 2},
    ),
    Scenario(
        "kept-gain-at-margin",
        "The kept plan still gains 34.5 %, above a 34 % margin: kept (the new plan is not better by the margin).",
        cluster(margin=0.34),
        {"verdict": {"replace": "", "kept": has("not better by the margin 34%")}, "expired": []},
        {"moves": SMALL, "next_plan": 2},
    ),
    Scenario(
        "kept-gain-just-below-margin",
        "The kept plan still gains 34.5 %, below a 35 % margin, and has stood the minimum dwell: replaced.",
        cluster(margin=0.35),
        {"verdict": {"replace": "its total gain fell to 34.5%, below the margin 35%", "kept": ""}},
        {"moves": SMALL, "next_plan": 2},
    ),
    Scenario(
        "kept-gain-below-margin-within-dwell",
        "The kept plan gains less than a 60 % margin but was suggested 2 minutes ago: it waits out the minimum dwell.",
        cluster(margin=0.6),
        {"verdict": {"replace": "", "kept": has("below the margin 60%; it stays until")}, "expired": []},
        {"moves": YOUNG, "next_plan": 2},
    ),
]
