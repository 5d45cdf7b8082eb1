"""Which nodes can sleep, and which standby nodes to wake first (Ganeti's hsqueeze).

Room is counted in multiples of a standard guest, as hsqueeze does: a node "has room"
for k standard guests when k more of them fit under `crs.fits`. When every online node
keeps room for `minimal` of them, nodes are emptied greedily — fewest guests first — as
long as their guests fit elsewhere and every remaining node still has room for `target`
of them (target ≥ minimal, so the answer does not flap). When some node has less room than
`minimal`, standby nodes are woken, in the order given, until the room is back. Suggestions
only: a plan of migrations and the nodes to power down or up; wake-on-LAN is the source's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .capacity import Size
from .fits import Commitment, Limits, committed, fits
from .machine import Change, Machine
from .model import Guest, Node, Snapshot

# An admin's power-down of a node (dashboard/power.py): it drains through its maintenance, then
# the source shuts it down (Proxmox) or the admin powers it off by hand and marks it standby.
POWER_DOWN = Machine(
    "power-down",
    {
        "draining": "draining: its guests are moved off",
        "emptied": "empty: power it off by hand, then mark it standby",
        "standby": "standby (powered down)",
        "cancelled": "cancelled: it left maintenance before it was empty",
    },
    frozenset({("draining", "emptied"), ("draining", "standby"), ("draining", "cancelled"), ("emptied", "standby")}),
)
BY_HAND = (
    "{node} is empty. This cluster's source cannot power a node off: power it off by hand, then mark it "
    "standby (or add it to the standby list)."
)
SHUT_DOWN = "{node} is empty and Proxmox was asked to shut it down (POST /nodes/{node}/status, command=shutdown)."


@dataclass(frozen=True, slots=True)
class Squeeze:
    power_off: tuple[str, ...] = ()
    power_on: tuple[str, ...] = ()
    moves: tuple[tuple[str, str, str], ...] = ()  # (guest, from, to), to empty the power_off nodes

    def watts_saved(self, idle_watts: dict[str, float], default: float) -> float:
        return sum(idle_watts.get(n, default) for n in self.power_off)


def room(node: Node, held: Commitment, size: Size, limits: Limits) -> int:
    """How many more standard guests fit on `node` (bounded: only "at least k" is asked)."""
    probe = Guest("vm:standard", node.name, cores=size.cores, memory_bytes=size.memory_bytes)
    n = 0
    while n < 1024 and fits(node, held, probe, limits) is None:
        held, n = held.plus(probe, node), n + 1
    return n


def squeeze(
    snapshot: Snapshot,
    size: Size,
    limits: Limits = Limits(),
    *,
    minimal: float = 2.0,
    target: float = 2.0,
    standby: tuple[str, ...] = (),
) -> Squeeze:
    """hsqueeze's two directions on one snapshot. `standby`: powered-down nodes that could be
    woken, first to wake first; they carry no guests and are not in `snapshot.nodes`' usable set."""
    online = [n for n in snapshot.nodes if n.usable and n.name not in standby]
    held = {n.name: committed(n, (g for g in snapshot.guests if g.node == n.name)) for n in snapshot.nodes}
    if any(room(n, held[n.name], size, limits) < minimal for n in online):
        return Squeeze(power_on=_wake(snapshot, size, limits, minimal, standby, online, held))
    placement = {g.sid: g.node for g in snapshot.guests}
    guests = {g.sid: g for g in snapshot.guests}
    off: list[str] = []
    for node in sorted(online, key=lambda n: (sum(g.node == n.name for g in snapshot.guests), n.name)):
        rest = [n for n in online if n.name not in off and n.name != node.name]
        on_node = [guests[sid] for sid, where in placement.items() if where == node.name]
        placed = _evacuate(on_node, rest, dict(held), limits)
        if placed is None or not rest:
            continue
        new_held, targets = placed
        if all(room(n, new_held[n.name], size, limits) >= target for n in rest):
            off.append(node.name)
            placement |= targets
            held = new_held | {node.name: Commitment()}
    moves = tuple((g.sid, g.node, placement[g.sid]) for g in snapshot.guests if placement[g.sid] != g.node)
    return Squeeze(power_off=tuple(off), moves=moves)


def _evacuate(
    on_node: list[Guest], rest: list[Node], held: dict[str, Commitment], limits: Limits
) -> tuple[dict[str, Commitment], dict[str, str]] | None:
    """Place a node's guests on `rest`, biggest first, each where the most memory stays free;
    None when one of them fits nowhere."""
    targets = {}
    for guest in sorted(on_node, key=lambda g: (-g.memory_bytes, g.sid)):
        candidates = [n for n in rest if fits(n, held[n.name], guest, limits) is None]
        if not candidates:
            return None
        best = max(candidates, key=lambda n: (n.memory_bytes - held[n.name].memory_bytes, n.name))
        held[best.name] = held[best.name].plus(guest, best)
        targets[guest.sid] = best.name
    return held, targets


def _wake(
    snapshot: Snapshot,
    size: Size,
    limits: Limits,
    minimal: float,
    standby: tuple[str, ...],
    online: list[Node],
    held: dict[str, Commitment],
) -> tuple[str, ...]:
    """The shortest prefix of `standby` whose room, added to the cluster's, covers the nodes
    short of `minimal` after balancing (free room counted in standard guests, cluster-wide)."""
    short = sum(max(0.0, minimal - room(n, held[n.name], size, limits)) for n in online)
    woken: list[str] = []
    for name in standby:
        if short <= 0:
            break
        node = replace(snapshot.node(name), online=True)
        woken.append(name)
        short -= room(node, Commitment(), size, limits) - minimal
    return tuple(woken)


@dataclass(frozen=True, slots=True)
class PowerDown:
    """An open power-down as stored, with what the latest look says of its node: it left
    maintenance since the power-down began (`left`), or it is empty in maintenance (`drained`)."""

    node: str
    state: str  # draining or emptied
    left: bool = False
    drained: bool = False


def next_steps(downs: tuple[PowerDown, ...], standby: tuple[str, ...], proxmox: bool) -> tuple[Change, ...]:
    """The step each open power-down takes now: an emptied node on the standby list (`standby`)
    is standby; a draining node that left maintenance is cancelled; one drained is shut down
    (Proxmox: action power-down-shutdown, the caller asks the source and lists it standby) or
    waits to be powered off by hand."""
    changes = []
    for down in downs:
        if down.state == "emptied":
            if down.node in standby:  # marked on the capacity settings
                changes.append(
                    POWER_DOWN.change(
                        down.node, "emptied", "standby", "power-down-standby", {"standby": list(standby)}, {"note": ""}
                    )
                )
        elif down.left:
            why = {"why": "it left maintenance"}
            changes.append(
                POWER_DOWN.change(down.node, "draining", "cancelled", "power-down-cancelled", why, {"note": ""})
            )
        elif down.drained and proxmox:
            note = {"note": SHUT_DOWN.format(node=down.node)}
            changes.append(POWER_DOWN.change(down.node, "draining", "standby", "power-down-shutdown", {}, note))
        elif down.drained:
            by_hand = ({"next": "power it off by hand"}, {"note": BY_HAND.format(node=down.node)})
            changes.append(POWER_DOWN.change(down.node, "draining", "emptied", "power-down-emptied", *by_hand))
    return tuple(changes)
