"""HA rules and the per-guest auto-rebalance opt-out, for the page, the admin and the API.

A simulated or imported cluster's rules are the product's (HaRule rows): an edit is refused
when Proxmox would drop a rule because of it (crs.rules, the same checks and words as its
"Drop rule …" messages), and every round's snapshot carries the rows (`applied`). A Proxmox
cluster's rules are Proxmox's, read from /cluster/ha/rules by the connector: shown, never
edited here, so the two never disagree. The opt-out is the product's on every cluster: the
balancer is.
"""

import re
from dataclasses import replace

from django.core.exceptions import ValidationError
from django.db import transaction

import crs.model
import crs.rules
import crs.snapshot
from crs.errors import CrsError

from .errors import BadInput, Refused
from .models import AuditEvent, CapacitySettings, Cluster, HaRule, RebalanceOptOut, rule_id_validator

FIELDS = ("rule", "type", "resources", "nodes", "strict", "affinity")
PROXMOX_RULES = "Datacenter → HA → Rules"


def editable(cluster: Cluster) -> bool:
    """Rules are edited here unless Proxmox keeps them."""
    return not cluster.is_proxmox


def proxmox_rules_url(cluster: Cluster) -> str | None:
    """Where a Proxmox cluster's rules are edited: its web interface (then Datacenter → HA → Rules)."""
    if editable(cluster):
        return None
    config = cluster.effective_source_config()
    host = config.get("host")
    return f"https://{host}:{config.get('port', 8006)}/" if host else None


# -- the snapshot carries them ---------------------------------------------------------------------


def _auto_rebalance(guest: crs.model.Guest, value: bool) -> crs.model.Guest:
    """The guest with that `auto_rebalance`; the same object when it has it already (a copy of
    each of 20 000 frozen guests costs a 1000-node collect about 0.3 s)."""
    return guest if guest.auto_rebalance == value else replace(guest, auto_rebalance=value)


def applied(cluster: Cluster, snapshot: crs.model.Snapshot) -> crs.model.Snapshot:
    """`snapshot` with the rules, opt-outs and standby nodes the product keeps for `cluster`:
    every snapshot the dashboard builds (collect, an edit's refresh) goes through here.

    A node on the capacity settings' standby list is `standby` (powered down on purpose:
    no placement, no recovery, not in the imbalance, as the contract says) until an admin takes
    it off the list; an imported file's own `standby` stands too. A stored rule naming a guest
    or node the cluster no longer has keeps the rest, as the connector does with Proxmox's
    rules; one left with too few guests is left out."""
    opted = set(cluster.opt_outs.values_list("guest", flat=True))
    ours = editable(cluster)  # else the source's own opt-outs stand too
    guests = tuple(_auto_rebalance(g, (g.auto_rebalance or ours) and g.sid not in opted) for g in snapshot.guests)
    asleep = set(standby_list(cluster))
    nodes = tuple(replace(n, standby=n.name in asleep or (cluster.read_only and n.standby)) for n in snapshot.nodes)
    snapshot = replace(snapshot, guests=guests, nodes=nodes)
    if not editable(cluster):
        return snapshot
    return replace(snapshot, rules=tuple(_engine_rules(snapshot, [r.as_dict() for r in cluster.ha_rules.all()])))


def standby_list(cluster: Cluster) -> list[str]:
    """The capacity settings' standby nodes, first to wake first ([] until an admin sets some)."""
    return CapacitySettings.objects.filter(cluster=cluster).values_list("standby", flat=True).first() or []


def _engine_rules(snapshot: crs.model.Snapshot, rules: list[dict]) -> list[crs.model.Rule]:
    sids = {g.sid for g in snapshot.guests}
    nodes = {n.name for n in snapshot.nodes}
    out = []
    for raw in rules:
        raw = {**raw, "resources": [s for s in raw["resources"] if s in sids]}
        if "nodes" in raw:
            raw["nodes"] = [n for n in raw["nodes"] if n["node"] in nodes]
        try:
            out.append(crs.snapshot.parse_rule(raw, "rule", sids, nodes))
        except CrsError:
            continue  # too few guests or nodes left: it constrains nothing
    return out


def refresh_snapshot(cluster: Cluster) -> None:
    """Apply an edit to the stored snapshot at once (the page shows it before the next collect),
    and make the N+1 verdict due (the next round queues its refresh). Call under the cluster row's lock."""
    if cluster.snapshot is None:
        return
    snapshot = applied(cluster, crs.snapshot.parse(cluster.snapshot))
    Cluster.objects.filter(pk=cluster.pk).update(snapshot=crs.snapshot.to_dict(snapshot), n1_at=None)


def file_rules(data: dict) -> tuple[list[dict], list[str]]:
    """An imported file's rules as HaRule fields, and its opted-out guests. A negative node
    affinity stays negative as written ("off these nodes"), so a node added later is allowed
    as Proxmox allows it; the engine rewrites it over the nodes of each snapshot."""
    snapshot = crs.snapshot.parse(data)
    rules = []
    for rule in snapshot.rules:
        row: dict[str, object] = {
            "rule": rule.id,
            "type": rule.type,
            "resources": list(rule.resources),
            "affinity": rule.affinity,
        }
        if isinstance(rule, crs.model.NodeAffinityRule):
            row |= {"nodes": [{"node": n, "priority": p} for n, p in rule.nodes], "strict": rule.strict}
        rules.append(row)
    return rules, [g.sid for g in snapshot.guests if not g.auto_rebalance]


def adopt_file(cluster: Cluster, data: dict) -> None:
    """An imported cluster keeps its file's rules and opt-outs as rows, editable from then on."""
    rules, opted = file_rules(data)
    for row in rules:
        HaRule.objects.get_or_create(cluster=cluster, rule=row.pop("rule"), defaults=row)
    for sid in opted:
        RebalanceOptOut.objects.get_or_create(cluster=cluster, guest=sid)


# -- editing ---------------------------------------------------------------------------------------


def _shape(data: dict) -> dict:
    """The rule's fields with their types checked, each refusal naming the field and what is allowed."""
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(data) - set(FIELDS) - {"id", "cluster", "dropped"})
    if unknown:
        errors["non_field_errors"] = [f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}"]
    rule = data.get("rule")
    try:
        if not isinstance(rule, str):
            raise ValidationError("rule is required: the rule's id, e.g. keep-db-apart")
        rule_id_validator(rule)
    except ValidationError as exc:
        errors["rule"] = list(exc.messages)
    kind = data.get("type")
    if kind not in HaRule.TYPES:
        errors["type"] = [f"type must be one of: {', '.join(HaRule.TYPES)}"]
    resources = data.get("resources")
    if not isinstance(resources, list) or not all(isinstance(s, str) for s in resources):
        errors["resources"] = ['resources must be a list of guest sids, e.g. ["vm:101", "ct:102"]']
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list):
        errors["nodes"] = ['nodes must be a list of {"node": name, "priority": n} or "name:n" entries']
    if not isinstance(data.get("strict", False), bool):
        errors["strict"] = ["strict must be true or false"]
    affinity = data.get("affinity", "positive")
    if affinity not in HaRule.AFFINITIES:
        errors["affinity"] = [f"affinity must be one of: {', '.join(HaRule.AFFINITIES)}"]
    if errors:
        raise BadInput(errors)
    shaped = {"id": rule, "type": kind, "resources": resources, "affinity": affinity}
    if kind == "node-affinity":  # negative: "keep off these nodes", priorities refused by parse_rule
        return shaped | {"nodes": nodes, "strict": data.get("strict", False)}
    return shaped


_PATH = re.compile(r"\Arule\.(\w+)")


def validated(cluster: Cluster, data: dict, instance: HaRule | None) -> dict:
    """HaRule field values for `data`, or Refused: bad input naming the field (400), or the rule
    set after the edit would make Proxmox drop a rule (400, "Drop rule 'x', because …" for every
    rule the edit takes down), or the cluster's rules are not the product's (409)."""
    if not editable(cluster):
        raise Refused(
            {"cluster": [f"{cluster.name} is a Proxmox cluster: its HA rules are edited in Proxmox ({PROXMOX_RULES})"]},
        )
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        raise Refused({"cluster": [f"{cluster.name} has no snapshot yet: rules are checked against its guests"]})
    raw = _shape(data)
    mine = getattr(instance, "pk", None)  # None: a new rule, which excludes nothing
    if cluster.ha_rules.exclude(pk=mine).filter(rule=raw["id"]).exists():  # type: ignore[misc]
        raise BadInput({"rule": [f"rule: {cluster.name} already has a rule called {raw['id']!r}"]})
    sids = {g.sid for g in snapshot.guests}
    nodes = {n.name for n in snapshot.nodes}
    try:
        candidate = crs.snapshot.parse_rule(raw, "rule", sids, nodes)
    except CrsError as exc:
        match = _PATH.match(str(exc))
        raise BadInput({match.group(1) if match else "non_field_errors": [str(exc)]}) from None
    others = [r.as_dict() for r in cluster.ha_rules.exclude(pk=mine)]  # type: ignore[misc]
    before = {rule_id for rule_id, _ in _compiled(snapshot, [r.as_dict() for r in cluster.ha_rules.all()]).dropped}
    after = _compiled(snapshot, others, candidate).dropped
    taken_down = [(rule_id, why) for rule_id, why in after if rule_id == candidate.id or rule_id not in before]
    if taken_down:
        raise BadInput({"non_field_errors": [f"Drop rule '{rule_id}', because {why}." for rule_id, why in taken_down]})
    values = {
        "rule": candidate.id,
        "type": candidate.type,
        "resources": list(candidate.resources),
        "affinity": candidate.affinity,
    }
    if isinstance(candidate, crs.model.NodeAffinityRule):
        return values | {"nodes": [{"node": n, "priority": p} for n, p in candidate.nodes], "strict": candidate.strict}
    return values | {"nodes": [], "strict": False}


def _compiled(
    snapshot: crs.model.Snapshot, rules: list[dict], extra: crs.model.Rule | None = None
) -> crs.rules.CompiledRules:
    engine = _engine_rules(snapshot, rules) + ([extra] if extra else [])
    return crs.rules.compile_rules(replace(snapshot, rules=tuple(engine)))


def save_rule(cluster_id: int, data: dict, instance: HaRule | None, actor) -> HaRule:
    """Create or change a rule, checked and audited. Edits of one cluster are serialised on its
    row, so two concurrent edits cannot both pass the feasibility check against the old set."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update(of=("self",)).select_related("policy").get(pk=cluster_id)
        if instance is not None:
            instance = HaRule.objects.filter(pk=instance.pk, cluster=cluster).first()
            if instance is None:
                raise Refused({"rule": ["rule: it was deleted meanwhile"]})
        values = validated(cluster, data, instance)
        before = instance.as_dict() if instance else None
        if instance is None:
            instance = HaRule.objects.create(cluster=cluster, **values)
        else:
            for name, value in values.items():
                setattr(instance, name, value)
            instance.save()
        AuditEvent.objects.create(
            actor=actor,
            action="rule-changed" if before else "rule-created",
            cluster=cluster,
            details={"rule": instance.rule, "before": before, "after": instance.as_dict()},
        )
        refresh_snapshot(cluster)
    return instance


def delete_rule(rule: HaRule, actor) -> None:
    """Remove a rule (removing one never makes another infeasible); audited; safe to repeat."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(pk=rule.cluster_id)
        if HaRule.objects.filter(pk=rule.pk).delete()[0]:
            AuditEvent.objects.create(
                actor=actor,
                action="rule-deleted",
                cluster=cluster,
                details={"rule": rule.rule, "before": rule.as_dict()},
            )
            refresh_snapshot(cluster)


def check_guest(cluster: Cluster, sid) -> None:
    """Refused unless `sid` is a guest of the cluster's latest snapshot."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        raise Refused({"cluster": [f"{cluster.name} has no snapshot yet"]})
    if not isinstance(sid, str) or sid not in {g.sid for g in snapshot.guests}:
        raise BadInput({"guest": [f"guest: {sid!r} is not a guest of {cluster.name} (a sid like vm:101)"]})


def set_opt_out(cluster_id: int, sid: str, opted_out: bool, actor) -> bool:
    """Opt a guest out of (or back into) automatic rebalancing; True if that changed anything.
    Audited when it does; repeating it is harmless."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update(of=("self",)).select_related("policy").get(pk=cluster_id)
        if opted_out:
            check_guest(cluster, sid)  # opting back in works for a guest that is gone too
            changed = RebalanceOptOut.objects.get_or_create(cluster=cluster, guest=sid)[1]
        else:
            changed = RebalanceOptOut.objects.filter(cluster=cluster, guest=sid).delete()[0] > 0
        if changed:
            action = "rebalance-opt-out" if opted_out else "rebalance-opt-in"
            AuditEvent.objects.create(actor=actor, action=action, cluster=cluster, details={"guest": sid})
            refresh_snapshot(cluster)
    return changed


# -- what the page and the API show ----------------------------------------------------------------


def rules_state(cluster: Cluster) -> dict:
    """The cluster's rules as they apply now: each with why Proxmox drops it (empty: it holds)."""
    snapshot = cluster.latest_snapshot()
    if editable(cluster):
        rows = list(cluster.ha_rules.all())
        rules = [{"pk": r.pk, **r.as_dict()} for r in rows]
    else:
        rules = [{"pk": None, **r} for r in (crs.snapshot.to_dict(snapshot)["rules"] if snapshot else [])]
    dropped: dict[str, list[str]] = {}
    if snapshot is not None:
        compiled = _compiled(snapshot, [{k: v for k, v in r.items() if k != "pk"} for r in rules])
        for rule_id, why in compiled.dropped:
            dropped.setdefault(rule_id, []).append(why)
    return {
        "editable": editable(cluster),
        "edit_url": proxmox_rules_url(cluster),
        "rules": [{**r, "dropped": dropped.get(r["id"], [])} for r in rules],
        "opt_outs": list(cluster.opt_outs.values_list("guest", flat=True)),
    }
