"""How long a stall is expected to last: the horizon a pressure move's benefit is reckoned over.

Most CPU stalls on the Bitbrains weeks are peaks of a round: a node's guests want more cores
than its threads for one five-minute sample and are back under them at the next. A move that
answers such a stall relieves nothing the stall's own end would not: about half the pressure
moves on August and September did not pay (crs.paid); waiting a round for a stall to show it
lasts took August's from 9 of 19 paid to 15 of 16 (bench/notes/45). A stall the node
showed at the round before too has lasted, and a stall that has lasted is expected to last on
(the longer a stall has run, the longer it runs on): there the move's benefit runs over the
guest's own horizon (crs.payoff.horizon). A new one is expected to end before the move
could pay: its horizon is none, so its move does not pass the cost-benefit gate. A stall the
forecast foresees counts as lasting where its guests' peak came at that hour every past day.

Only core contention is judged so: a node whose guests want more cores than its threads is a
peak that passes on its own. A stall that core counts do not explain (a node with idle threads
that still reports one) and memory above the limit do not pass with the next sample.
"""

from __future__ import annotations

from collections.abc import Iterable

from .forecast import Stall
from .gating import clock
from .model import Snapshot
from .pressure import Limits, Relief, contended


def fresh(snapshot: Snapshot, found: Relief, lasting: frozenset[str], limits: Limits) -> bool:
    """True when `found` answers a CPU stall its node did not show at the round before
    (`lasting`: the nodes short of CPU as a whole then) and core contention explains: a peak,
    expected to end before a move off it pays. A snapshot without a clock (a file for `crs
    plan`) has no round before: its stalls count as lasting, as nothing waits there (crs.gating)."""
    g = found.guest
    if clock(snapshot) is None or g.memory_pressure > 0.0 or g.cpu_pressure <= limits.cpu or g.node in lasting:
        return False
    return contended(snapshot, g.node)


def horizon(default_s: float, snapshot: Snapshot, found: Relief, lasting: frozenset[str], limits: Limits) -> float:
    """How long the stall `found` answers is expected to last: none for a new peak (`fresh`),
    else the guest's own horizon `default_s`."""
    return 0.0 if fresh(snapshot, found, lasting, limits) else default_s


def foreseen(due: Iterable[Stall]) -> frozenset[str]:
    """The nodes whose foreseen stall counts as lasting: its guests' peak came at that hour on
    every past day tried. A peak foreseen on most days only may pass like a new one, and a move
    ahead of it waits as a move at a new peak does (on July, the month tuned on, and checked on
    August and September: bench/notes/47)."""
    return frozenset(s.node for s in due if s.seen == s.days)
