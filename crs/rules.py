"""HA rules: node affinity and resource affinity, compiled as Proxmox compiles them.

Compiling drops infeasible rules (with the reason, for the page) and applies Proxmox's
transforms: connected positive rules merge, members of a positive group are kept apart
from whatever an explicit negative rule keeps one of them from, and share node affinity
(reference/proxmox-crs.md §5.1–5.2).
The runtime questions ("where may this guest go?", "which partners pull or push?")
are answered from the compiled form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from .model import Guest, NodeAffinityRule, ResourceAffinityRule, Snapshot
from .usage import counted_nodes


@dataclass(frozen=True, slots=True)
class CompiledRules:
    node_affinity: dict[str, NodeAffinityRule] = field(default_factory=dict)  # sid → its rule
    positive: dict[str, frozenset[str]] = field(default_factory=dict)  # sid → partners kept together
    negative: dict[str, frozenset[str]] = field(default_factory=dict)  # sid → partners kept apart
    dropped: tuple[tuple[str, str], ...] = ()  # (rule id, why), Proxmox's "Drop rule '<id>', because <why>."


def compile_rules(snapshot: Snapshot) -> CompiledRules:
    node_rules = [r for r in snapshot.rules if isinstance(r, NodeAffinityRule)]
    affinity_rules = [r for r in snapshot.rules if isinstance(r, ResourceAffinityRule)]
    dropped: list[tuple[str, str]] = []
    node_rules = _as_positive(node_rules, [n.name for n in snapshot.nodes], dropped)
    errors = _infeasible(node_rules, affinity_rules, len(snapshot.nodes))
    dropped += [(rule_id, why) for rule_id in sorted(errors) for why in errors[rule_id]]
    node_rules = [r for r in node_rules if r.id not in errors]
    affinity_rules = [r for r in affinity_rules if r.id not in errors]
    groups = _merged_groups(r for r in affinity_rules if r.affinity == "positive")
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


def _as_positive(
    rules: list[NodeAffinityRule], cluster_nodes: list[str], dropped: list[tuple[str, str]]
) -> list[NodeAffinityRule]:
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
            dropped.append((rule.id, "rule keeps its guests off every node of the cluster"))
        else:
            out.append(replace(rule, nodes=rest, affinity="positive"))
    return out


def _infeasible(
    node_rules: list[NodeAffinityRule], affinity_rules: list[ResourceAffinityRule], node_count: int
) -> dict[str, list[str]]:
    """Rule id → why Proxmox drops it (its `check_feasibility`, in its words).

    Every check looks at all rules as written, and every rule any check refuses is dropped
    afterwards, so one bad rule also takes down the rules it conflicts with (§5.2).
    """
    errors: dict[str, list[str]] = {}

    def drop(rule_id: str, why: str) -> None:
        errors.setdefault(rule_id, []).append(why)

    users: dict[str, list[str]] = {}
    for node_rule in node_rules:
        for sid in node_rule.resources:
            users.setdefault(sid, []).append(node_rule.id)
    for sid, rule_ids in users.items():
        if len(rule_ids) > 1:
            for rule_id in rule_ids:
                drop(rule_id, f"resource '{sid}' is already used in another node affinity rule")
    positive = [r for r in affinity_rules if r.affinity == "positive"]
    negative = [r for r in affinity_rules if r.affinity == "negative"]
    for rule in negative:
        if len(rule.resources) > node_count:
            drop(rule.id, "rule defines more resources than available nodes")
    groups = [(group, [r for r in positive if set(r.resources) <= group]) for group in _merged_groups(positive)]
    for group, members in groups:  # together and apart at once (over merged groups, as Proxmox checks)
        for neg in negative:
            if len(group & set(neg.resources)) >= 2:
                drop(neg.id, "rule shares two or more resources with a positive resource affinity rule")
                for rule in members:
                    drop(rule.id, "rule shares two or more resources with a negative resource affinity rule")

    def paired(resources: Iterable[str]) -> list[NodeAffinityRule]:
        return [r for r in node_rules if set(r.resources) & set(resources)]

    for rule in affinity_rules:  # the highest priority class would depend on which nodes are online
        pairs = paired(rule.resources)
        if any(len({priority for _, priority in r.nodes}) > 1 for r in pairs):
            drop(rule.id, "resources are in node affinity rules with multiple priorities")
            for r in pairs:
                drop(
                    r.id,
                    "resources are in a resource affinity rule and cannot be in a node affinity rule"
                    " with multiple priorities",
                )
    for group, members in groups:  # a group follows one node-affinity rule
        pairs = paired(group)
        if len(pairs) > 1:
            for rule in members:
                drop(rule.id, "resources are in multiple node affinity rules")
            for r in pairs:
                drop(
                    r.id,
                    "at least one resource is in a positive resource affinity rule and there are other resources"
                    " in at least one other node affinity rule already",
                )
    for rule in negative:  # enough nodes to keep the pinned members apart
        pairs = paired(rule.resources)
        pinned = set().union(*(set(rule.resources) & set(r.resources) for r in pairs))
        nodes = {name for r in pairs for name, _ in r.nodes}
        if len(nodes) < len(pinned):
            drop(rule.id, "two or more resources are restricted to less nodes than available to the resources")
            for r in pairs:
                drop(
                    r.id,
                    "at least one resource is in a negative resource affinity rule and this rule would restrict"
                    " these to less nodes than available to the resources",
                )
    return errors


def _merged_groups(rules: Iterable[ResourceAffinityRule]) -> list[frozenset[str]]:
    """Connected positive rules become one group (Proxmox's `_merged-…` rules)."""
    groups: list[set[str]] = []
    for rule in rules:
        merged = set(rule.resources)
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
    rules: CompiledRules, sid: str, guests: Mapping[str, Guest], online: Iterable[str]
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
            nodes = (guest.target,)
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
    rules: CompiledRules, sid: str, target: str, guests: Mapping[str, Guest]
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
