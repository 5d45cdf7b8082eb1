"""The engine's codes in the admin's words: the one table the pages say them from.

The API and the engine keep the codes (`below-margin`, `imbalance_scale: raw`); a person
reading the page gets a sentence. The live page receives DECISIONS in its page (the
`decision_words` tag, read by dashboard.js), the server-rendered pages through the
`decision_words` filter, and the settings form its choice labels and missing help here, so
neither a template nor a script holds a copy. A decision code without words fails
tests/test_web_wording.py.
"""

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
}

# Settings whose values are engine codes: each value in words, as the form's choices show it.
CHOICES: dict[str, list[tuple[str, str]]] = {
    "mode": [
        ("basic", "basic: count the guests on each node"),
        ("static", "static: the guests' configured CPU and memory"),
        ("dynamic", "dynamic: the CPU and memory the guests really use"),
    ],
    "method": [
        ("bruteforce", "bruteforce: try every move, keep the one that evens the load most"),
        ("topsis", "topsis: weigh several load criteria of every move together (TOPSIS, as Proxmox)"),
    ],
    "imbalance_scale": [
        ("normalized", "normalized: 0 % = perfectly even, 100 % = all load on one node"),
        ("raw", "raw: the plain spread of the loads (coefficient of variation), as older Proxmox"),
    ],
}

# Help for the settings whose model gives none, or one in another unit than the form's.
HELP: dict[str, str] = {
    "automation": "Who approves a recommendation: an admin, the round when the gain is large, or always the round.",
    "objective": "What a move is for: an even spread of load, relief for guests that stall, or both.",
    "method": "How the round picks among the possible moves.",
    "imbalance_scale": "How the spread of node loads is turned into the imbalance figure.",
    "memory_reserve": "Memory every node keeps free of the guests' configured memory.",
}


def decision_words(code: str) -> str:
    """A decision in words; an unknown code (a newer engine) is shown as it is rather than hidden."""
    return DECISIONS.get(code, code)
