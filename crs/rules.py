"""HA rules: node affinity and resource affinity, compiled as Proxmox compiles them.

Compiling drops infeasible rules (with the reason, for the page) and applies Proxmox's
transforms: connected positive rules merge, members of a positive group are kept apart
from whatever an explicit negative rule keeps one of them from, and share node affinity
(reference/proxmox-crs.md §5.1–5.2).
The runtime questions ("where may this guest go?", "which partners pull or push?")
are answered from the compiled form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from .model import Guest, NodeAffinityRule, ResourceAffinityRule, Snapshot
from .usage import counted_nodes


@dataclass(frozen=True, slots=True)
class CompiledRules:
    node_affinity: dict[str, NodeAffinityRule] = field(default_factory=dict)  # sid → its rule
    positive: dict[str, frozenset[str]] = field(default_factory=dict)  # sid → partners kept together
    negative: dict[str, frozenset[str]] = field(default_factory=dict)  # sid → partners kept apart
    dropped: tuple[tuple[str, str], ...] = ()  # (rule id, why it was dropped)


def compile_rules(snapshot: Snapshot) -> CompiledRules:
    node_rules = [r for r in snapshot.rules if isinstance(r, NodeAffinityRule)]
    affinity_rules = [r for r in snapshot.rules if isinstance(r, ResourceAffinityRule)]
    dropped: list[tuple[str, str]] = []
    node_rules = _one_node_rule_per_guest(_as_positive(node_rules, [n.name for n in snapshot.nodes], dropped), dropped)
    affinity_rules = _feasible_affinity(affinity_rules, len(snapshot.nodes), dropped)
    groups = _merged_groups([r.resources for r in affinity_rules if r.affinity == "positive"])
    positive = {sid: group - {sid} for group in groups for sid in group}
    explicit = [set(r.resources) for r in affinity_rules if r.affinity == "negative"]
    negative: dict[str, set[str]] = {}
    for members in explicit + _implicit_negative(groups, explicit):
        for sid in members:
            negative.setdefault(sid, set()).update(members - {sid})
    by_guest = {sid: rule for rule in node_rules for sid in rule.resources}
    for group in groups:  # a positive group follows the node affinity of any member
        rule = next((by_guest[sid] for sid in sorted(group) if sid in by_guest), None)
        if rule is not None:
            by_guest.update(dict.fromkeys(group, rule))
    return CompiledRules(by_guest, positive, {sid: frozenset(p) for sid, p in negative.items()}, tuple(dropped))


def _implicit_negative(groups: list[frozenset[str]], explicit: list[set[str]]) -> list[set[str]]:
    """The pairs Proxmox infers (`_implicit-negative-…` rules): every member of a positive
    group is kept apart from each resource that an *explicit* negative rule names together
    with some member of that group. Only explicit rules are read, so what is inferred for
    one group never spreads through another group (reference/proxmox-crs.md §5.2)."""
    pairs = []
    for group in groups:
        apart = {csid for members in explicit for sid in members & group for csid in members - {sid}}
        pairs += [{sid, csid} for csid in sorted(apart) for sid in sorted(group) if sid != csid]
    return pairs


def _as_positive(rules: list[NodeAffinityRule], cluster_nodes: list[str], dropped: list) -> list[NodeAffinityRule]:
    """Negative node affinity ("keep off these nodes") is the positive rule over the other
    nodes, as newer Proxmox rewrites it; one that forbids every node is dropped."""
    out = []
    for rule in rules:
        if rule.affinity == "positive":
            out.append(rule)
            continue
        banned = {n for n, _ in rule.nodes}
        rest = tuple((n, 0) for n in cluster_nodes if n not in banned)
        if not rest:
            dropped.append((rule.id, "keeps its guests off every node of the cluster"))
        else:
            out.append(replace(rule, nodes=rest, affinity="positive"))
    return out


def _one_node_rule_per_guest(rules: list[NodeAffinityRule], dropped: list) -> list[NodeAffinityRule]:
    seen: dict[str, int] = {}
    for rule in rules:
        for sid in rule.resources:
            seen[sid] = seen.get(sid, 0) + 1
    kept = []
    for rule in rules:
        shared = sorted(sid for sid in rule.resources if seen[sid] > 1)
        if shared:
            dropped.append((rule.id, f"{shared[0]} is in more than one node-affinity rule"))
        else:
            kept.append(rule)
    return kept


def _feasible_affinity(rules: list[ResourceAffinityRule], node_count: int, dropped: list) -> list:
    bad: set[str] = set()
    for rule in rules:
        if rule.affinity == "negative" and len(rule.resources) > node_count:
            bad.add(rule.id)
            dropped.append((rule.id, f"keeps {len(rule.resources)} guests apart on {node_count} nodes"))
    for pos in (r for r in rules if r.affinity == "positive"):
        for neg in (r for r in rules if r.affinity == "negative"):
            common = set(pos.resources) & set(neg.resources)
            if len(common) >= 2:
                for rule in (pos, neg):
                    if rule.id not in bad:
                        bad.add(rule.id)
                        dropped.append((rule.id, f"{', '.join(sorted(common))} must be both together and apart"))
    return [r for r in rules if r.id not in bad]


def _merged_groups(member_lists: Iterable[tuple[str, ...]]) -> list[frozenset[str]]:
    """Connected positive rules become one group (Proxmox's `_merged-…` rules)."""
    groups: list[set[str]] = []
    for members in member_lists:
        merged = set(members)
        for group in [g for g in groups if g & merged]:
            merged |= group
            groups.remove(group)
        groups.append(merged)
    return [frozenset(g) for g in groups]


def node_affinity(rules: CompiledRules, sid: str, online: Iterable[str]) -> tuple[set[str], set[str]]:
    """(allowed, preferred) online nodes for `sid`.

    Preferred is the highest priority class present among the allowed nodes. A non-strict
    rule admits every other node at priority −1; a strict one only its own nodes, so when
    none is online the guest cannot be placed at all.
    """
    online = set(online)
    rule = rules.node_affinity.get(sid)
    if rule is None:
        return online, set(online)
    priority = dict(rule.nodes)
    allowed = {n for n in online if n in priority or not rule.strict}
    if not allowed:
        return set(), set()
    top = max(priority.get(n, -1) for n in allowed)
    return allowed, {n for n in allowed if priority.get(n, -1) == top}


def resource_affinity(
    rules: CompiledRules, sid: str, guests: dict[str, Guest], online: Iterable[str]
) -> tuple[dict[str, int], set[str]]:
    """(together, separate) for `sid`: partner counts per node, and nodes to avoid.

    A moving positive partner pulls only towards its target (Proxmox bug #6801); a
    negative partner pushes away from both its current node and its target.
    """
    usable = frozenset(online)
    together: dict[str, int] = {}
    for partner in rules.positive.get(sid, ()):
        guest = guests.get(partner)
        if guest is None:
            continue
        nodes = counted_nodes(guest, usable)
        if guest.moving and guest.target in nodes:
            nodes = (guest.target,)  # type: ignore[assignment]
        for node in nodes:
            together[node] = together.get(node, 0) + 1
    separate: set[str] = set()
    for partner in rules.negative.get(sid, ()):
        guest = guests.get(partner)
        if guest is not None:
            separate.update(counted_nodes(guest, usable))
    return together, separate


def majority_node(together: dict[str, int], candidates: set[str]) -> str | None:
    """The node most positive partners are on, among `candidates`; ties by name."""
    present = sorted(n for n in together if n in candidates)
    if not present:
        return None
    return sorted(present, key=lambda n: -together[n])[0]  # stable: equal counts keep name order


def command_motion(
    rules: CompiledRules, sid: str, target: str, guests: dict[str, Guest]
) -> tuple[str | None, list[str]]:
    """An admin's migration of `sid` to `target`, taken as Proxmox's manager takes it
    (`queue_resource_motion`): (the negative partner that refuses it, []) when one is on
    `target` and not leaving it, else (None, the positive partners that move along)."""
    for partner in sorted(rules.negative.get(sid, ())):
        guest = guests.get(partner)
        if guest is not None and guest.node == target and guest.target in (None, target):
            return partner, []
    along = [
        partner
        for partner in sorted(rules.positive.get(sid, ()))
        if partner in guests and target not in (guests[partner].node, guests[partner].target)
    ]
    return None, along
