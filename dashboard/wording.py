"""The engine's codes in the admin's words: the one table the pages say them from.

The API and the engine keep the codes (`below-margin`, `imbalance_scale: raw`); a person
reading the page gets a sentence. The live page receives DECISIONS and KINDS in its page (the
`decision_table` tag, read by dashboard.js), the server-rendered pages through the
`decision_words` filter, and the settings form its choice labels and missing help here, so
neither a template nor a script holds a copy. A decision code without words fails
tests/test_web_wording.py.
"""

import re

DECISIONS: dict[str, str] = {
    "migrate": "Move recommended: the plan gains more than the margin",
    "below-threshold": "Balanced enough: the imbalance is at or below the threshold",
    "holding": "Above the threshold, waiting for the hold duration before recommending",
    "no-candidate": "Nothing can move: rules, pinned guests or a single usable node leave no target",
    "below-margin": "No move gains enough: the best plan gains less than the margin",
    "below-load-floor": "Load too low to matter: every node is below the load floor",
    "motion-in-flight": "Waiting: a migration is running, the hold counter is kept",
    "disabled": "Balancing is off: automation is not automatic, or the mode is basic",
    "no-pressure-data": "No pressure figures: the source does not report them (Proxmox VE 8)",
    "no-pressure": "No guest is short of CPU or memory, or none that is has a node to go to",
    "pressure-wait": (
        "Waiting: pressure moves come at most once a minute, a minute after the cluster last changed, "
        "and not while the whole cluster lacks the CPU"
    ),
}

# What a recommendation is for (crs.precedence.KINDS, highest precedence first), as the
# recommendation list and the plan summary name it.
KINDS: dict[str, str] = {
    "evacuation": "Maintenance",
    "failback": "Back from maintenance",
    "rule-fix": "Rule fix",
    "pressure": "Pressure relief",
    "balancing": "Balancing",
    "consolidation": "Power saving",
}

# Settings whose values are codes: each value in a few words (a select shows one line), the
# help below the field says the rest. The values stay the codes the API and the engine take.
CHOICES: dict[str, list[tuple[str, str]]] = {
    "mode": [
        ("basic", "basic: guest count"),
        ("static", "static: configured size"),
        ("dynamic", "dynamic: measured usage"),
    ],
    "automation": [
        ("manual", "manual: an admin approves each"),
        ("partial", "partial: large gains approve themselves"),
        ("automatic", "automatic: rounds approve all"),
    ],
    "objective": [
        ("even", "even: spread the load"),
        ("pressure", "pressure: relieve stalling guests"),
        ("both", "both: pressure first, then even"),
    ],
    "method": [("bruteforce", "bruteforce: try every move"), ("topsis", "topsis: weigh several criteria")],
    "imbalance_scale": [("normalized", "normalized: 0–100 %"), ("raw", "raw: coefficient of variation")],
    "containers": [("never", "never: leave them where they are"), ("restart", "restart: move them, with downtime")],
    "forecast": [("off", "off: the usage measured now"), ("on", "on: also the next hour's forecast peaks")],
}

# Help for the settings whose model gives none, or one in another unit than the form's.
HELP: dict[str, str] = {
    "automation": "Who approves a recommendation: always an admin; the round itself when the gain reaches the "
    "automatic margin, and for evacuations and rule fixes, which ignore margins; or always the round (Proxmox's "
    "auto-rebalance).",
    "objective": "What a move is for: an even spread of load; relief for guests that stall for CPU or memory "
    "(needs pressure figures from the source); or relief first, then evenness.",
    "method": "How a round picks its move: bruteforce tries every guest on every node and keeps the one that "
    "evens the load most; topsis ranks the moves on several load criteria at once (TOPSIS, as Proxmox).",
    "imbalance_scale": "How the spread of the node loads becomes the imbalance: normalized runs from 0 % (even) to "
    "100 % (all load on one node); raw is the plain coefficient of variation (older Proxmox), which can exceed 100 %.",
    "memory_reserve": "Memory every node keeps free of the guests' configured memory.",
    "forecast": "Each guest's peak in the next hour, forecast from the same hour of up to 28 past days of its "
    "stored history (a guest with less than a day has none): plans move no guest onto a node predicted to stall "
    "within the hour, and relieve a stall that repeats daily before it comes. The node bars mark the forecast peak.",
    "containers": "A container cannot live-migrate: moving it is a stop, a copy and a start on the target, with "
    "downtime (estimated on each recommendation). Never: automatic and recommended moves leave containers alone.",
}


def decision_words(code: str) -> str:
    """A decision in words; an unknown code (a newer engine) is shown as it is rather than hidden."""
    return DECISIONS.get(code, code)


def natural(name: str) -> tuple:
    """The order a person expects of names with numbers in them: node2 before node10, vm:104
    before vm:200. Every table of nodes and guests is in this order, as its header says."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", name))
