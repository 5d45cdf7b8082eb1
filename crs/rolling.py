"""The order of a rolling maintenance: which nodes to take down, and which together (hroller).

Nodes go fewest and smallest guests first: the first evacuations are quick and show early
whether the cluster copes. With a group size above one, nodes share a step only when none
of them is where another's guests would be recovered, so a step never evacuates a node
onto a node that is about to go down with it (Ganeti's hroller grouping).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

from . import maintenance, n1_batch
from .balancer import apply_move
from .fits import Limits
from .machine import Change, Machine
from .model import Snapshot
from .placement import select_node

# The rolling maintenance as a whole: an admin pauses, resumes or cancels it; its last step ends it.
RUN = Machine(
    "rolling maintenance",
    {"running": "running", "paused": "paused", "cancelled": "cancelled", "done": "done"},
    frozenset(
        {
            ("running", "paused"),
            ("paused", "running"),
            ("running", "cancelled"),
            ("paused", "cancelled"),
            ("running", "done"),
        }
    ),
)
# One node of its queue: waiting → draining (entered maintenance) → waiting-admin (empty) →
# returning (left maintenance) → done; waiting → flagged when its group breaks N+1.
QUEUE = Machine(
    "rolling node",
    {
        "waiting": "waiting",
        "flagged": "flagged: would break N+1",
        "draining": "draining",
        "waiting-admin": "waiting for admin",
        "returning": "back, guests returning",
        "done": "done",
    },
    frozenset(
        {
            ("waiting", "flagged"),
            ("waiting", "draining"),
            ("flagged", "draining"),
            ("draining", "waiting-admin"),
            ("waiting-admin", "returning"),
            ("returning", "done"),
        }
    ),
)


def order(snapshot: Snapshot, nodes: tuple[str, ...] | None = None) -> list[str]:
    """`nodes` (default: every usable node) by (guest count, configured guest memory, name)."""
    chosen = nodes if nodes is not None else tuple(n.name for n in snapshot.nodes if n.usable)
    weight = {name: (0, 0.0) for name in chosen}
    for g in snapshot.guests:
        if g.node in weight:
            count, memory = weight[g.node]
            weight[g.node] = (count + 1, memory + g.memory_bytes)
    return sorted(chosen, key=lambda name: (*weight[name], name))


def recovery_targets(snapshot: Snapshot, node: str) -> set[str]:
    """Where `node`'s guests would go if it failed now (Proxmox's recovery placement)."""
    failed = replace(snapshot, nodes=tuple(replace(n, online=False) if n.name == node else n for n in snapshot.nodes))
    targets = set()
    for guest in snapshot.guests:
        if guest.node == node:
            target = select_node(failed, guest.sid, "best-score")
            if target is not None:
                targets.add(target)
    return targets


def groups(snapshot: Snapshot, nodes: tuple[str, ...] | None = None, size: int = 1) -> list[list[str]]:
    """The steps of the rolling maintenance, in order; each step at most `size` nodes, none of
    them a recovery target of another in the same step."""
    pending = order(snapshot, nodes)
    targets = {name: recovery_targets(snapshot, name) for name in pending} if size > 1 else {}
    steps: list[list[str]] = []
    while pending:
        step = [pending.pop(0)]
        for name in list(pending):
            if len(step) >= size:
                break
            if all(name not in targets[s] and s not in targets[name] for s in step):
                step.append(name)
                pending.remove(name)
        steps.append(step)
    return steps


def breaks_n1(snapshot: Snapshot, nodes: list[str], limits: Limits = Limits()) -> str:
    """Why taking `nodes` down, emptied as their evacuations leave them (Proxmox's placement),
    breaks N+1: it holds now and would not, or it fails now and more nodes' losses would fail
    then ("" = neither). The question a rolling maintenance asks before each step. The verdict
    now is needed only when the one after fails, so a step that keeps N+1 costs one verdict."""
    after = snapshot
    for node in nodes:
        plan = maintenance.evacuate(after, node)
        after = maintenance.in_maintenance(after, node)
        for step in plan.steps:
            after = apply_move(after, step.move)
    report = n1_batch.verdict(after, limits)  # the same verdict as crs.n1.n1, a loss at a time only where it fails
    if report.survives:
        return ""
    failing = sum(not loss.survived for loss in report.losses)
    if failing <= sum(not loss.survived for loss in n1_batch.verdict(snapshot, limits).losses):
        return ""
    return f"with {', '.join(nodes)} in maintenance, N+1 fails: {report.verdict}"


def n1_question(snapshot: Snapshot | None, limits: Limits) -> Callable[[list[str]], str]:
    """The N+1 question next_steps asks of a group, on the latest snapshot (none yet: nothing to
    flag). Bound here, not by the caller, so the step's whole decision stays in the engine."""
    if snapshot is None:
        return lambda nodes: ""
    return partial(breaks_n1, snapshot, limits=limits)


# -- its next step (dashboard/rolling.py loads, calls this, applies the changes) ----------------------


@dataclass(frozen=True, slots=True)
class Queued:
    """A node of the queue as stored: its group, its step, whether an admin chose to go on
    despite N+1, and its uptime when it began waiting for the admin."""

    node: str
    group: int
    step: str
    go_on: bool = False
    uptime_s: float | None = None


@dataclass(frozen=True, slots=True)
class Seen:
    """What the latest look says of a queued node: empty in maintenance (`drained`), out of it
    with its failback settled (`returned`), and as the snapshot shows it (absent: offline, no uptime)."""

    drained: bool = False
    returned: bool = False
    online: bool = False
    uptime_s: float | None = None


@dataclass(frozen=True, slots=True)
class Next:
    """The steps to take now, in order, and whether the whole rolling maintenance is done."""

    changes: tuple[Change, ...] = ()
    done: bool = False

    @property
    def entering(self) -> tuple[str, ...]:
        """The nodes this step takes into maintenance."""
        return tuple(c.subject for c in self.changes if c.after == "draining")


def next_steps(
    queue: tuple[Queued, ...], seen: Mapping[str, Seen], proxmox: bool, breaks: Callable[[list[str]], str]
) -> Next:
    """Every step the state allows now, group after group: a drained node waits for the admin, one
    seen rebooted (Proxmox) or back returns, one back with its failback settled is done; the first
    group not done starts, unless `breaks` (the N+1 question, asked only then) flags it and an
    admin has not chosen to go on. With every group done, the rolling maintenance is done."""
    changes: list[Change] = []

    def take(entry: Queued, after: str, action: str = "rolling-step", **more: object) -> Queued:
        fields = {k: v for k, v in more.items() if k in ("uptime_s", "warning")}
        details = {"step": after} | {k: v for k, v in more.items() if k != "uptime_s" and v is not None}
        changes.append(QUEUE.change(entry.node, entry.step, after, action, details, fields))
        return replace(entry, step=after)

    for group in sorted({e.group for e in queue}):
        entries = []
        for e in (e for e in queue if e.group == group):
            look = seen.get(e.node, Seen())
            if e.step == "draining" and look.drained:
                e = take(e, "waiting-admin", uptime_s=look.uptime_s)
            elif e.step == "waiting-admin" and proxmox and (why := rebooted(e, look)):
                e = take(e, "returning", reason=why)
            elif e.step == "returning" and look.returned:
                e = take(e, "done")
            entries.append(e)
        if all(e.step == "done" for e in entries):
            continue  # the next group's turn
        if any(e.step == "waiting" for e in entries):
            if warning := breaks([e.node for e in entries if e.step in ("waiting", "flagged")]):
                entries = [
                    take(e, "flagged", "rolling-flagged", warning=warning) if e.step == "waiting" else e
                    for e in entries
                ]
        if not any(e.step == "flagged" and not e.go_on for e in entries):  # else the group waits for the admin
            for e in entries:
                if e.step in ("waiting", "flagged"):
                    take(e, "draining")
        return Next(tuple(changes))
    return Next(tuple(changes), done=True)


def rebooted(entry: Queued, look: Seen) -> str:
    """Why a node waiting for the admin is back without the admin's word: online again with a
    smaller uptime than when it began waiting ("" = not seen rebooted)."""
    if not look.online or look.uptime_s is None or entry.uptime_s is None:
        return ""
    return f"node rebooted: uptime {look.uptime_s:.0f} s" if look.uptime_s < entry.uptime_s else ""
