"""A recommended step's priority, as vSphere DRS grades its recommendations: 1 mandatory … 5 slight gain.

The page sorts and the API filters by it; the engine grades, so a replay grades as the live side does.
"""

from __future__ import annotations

MANDATORY = 1  # owed moves (evacuation, failback, rule fix): never given for balancing
GRADES = ((2, 0.25), (3, 0.15), (4, 0.05))  # grade, the least step gain (fraction) that earns it


def priority(step_gain: float, owed: bool = False) -> int:
    """1 for an owed move; else from its own step gain: 2 ≥ 25 %, 3 ≥ 15 %, 4 ≥ 5 %, 5 below."""
    if owed:
        return MANDATORY
    return next((grade for grade, floor in GRADES if step_gain >= floor), 5)
