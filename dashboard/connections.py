"""Adding, changing and archiving clusters, as the API and the page do it, audited; and a
Proxmox cluster's connection as the admin sees it (host, port, token id, TLS choice).

The connection is kept in the cluster's source config as the connector reads it
(crs.sources.proxmox), and the token secret encrypted beside it (crypt.py). The audit trail
names every changed field but shows a secret only as "***".
"""

import re
from typing import Any

from django.db import transaction

from crs.sources import tls

from .models import AuditEvent, Cluster

# source_config keys whose values the trail never shows nor stores (token, token_value, password, ...);
# a token's id (user, token_name) is no secret.
SECRET_KEY = re.compile(r"^token(_value)?$|password|secret", re.IGNORECASE)
AUDITED_FIELDS = ["name", "source_kind", "source_config", "token_secret", "archived"]
# The source config keys the connection form writes; the others (guests, cluster, timeout_s,
# usage_period) are the connector's further options.
CONNECTION_KEYS = {"host", "port", "user", "token_name", "verify_ssl", "fingerprint"}


def audited(cluster: Cluster | None) -> dict:
    """A cluster's editable fields as the audit trail shows them, secrets as "***";
    all None for no cluster (before a creation, after a deletion)."""
    if cluster is None:
        return dict.fromkeys(AUDITED_FIELDS)
    config = {key: "***" if SECRET_KEY.search(key) else value for key, value in cluster.source_config.items()}
    return {
        "name": cluster.name,
        "source_kind": cluster.source_kind,
        "source_config": config,
        "token_secret": "***" if cluster.token_secret else "",
        "archived": cluster.archived,
    }


def record(actor, before: Cluster | None, after: Cluster) -> None:
    """The trail's event for a creation or a change, naming the fields that changed (compared
    as stored: a new token secret shows as a changed token_secret); none when nothing did."""
    changed = [f for f in AUDITED_FIELDS if before is None or getattr(before, f) != getattr(after, f)]
    if changed:
        old, new = audited(before), audited(after)
        AuditEvent.objects.create(
            actor=actor,
            action="cluster-created" if before is None else "cluster-changed",
            cluster=after,
            details={"changes": {f: [old[f], new[f]] for f in changed}},
        )


def save(cluster: Cluster, actor, **fields: Any) -> Cluster:
    """Create (no pk yet) or change the cluster with these fields, and audit it, in one transaction."""
    with transaction.atomic():
        before = Cluster.objects.get(pk=cluster.pk) if cluster.pk else None
        for name, value in fields.items():
            setattr(cluster, name, value)
        cluster.save()
        record(actor, before, cluster)
    return cluster


def connection(cluster: Cluster) -> dict | None:
    """A Proxmox cluster's connection as the form shows it; the secret only as set or not."""
    if not cluster.is_proxmox:
        return None
    config = cluster.source_config
    verify = config.get("verify_ssl", True)
    user, name = config.get("user"), config.get("token_name")
    return {
        "host": config.get("host", ""),
        "port": config.get("port", 8006),
        "token_id": f"{user}!{name}" if user and name else "",
        "token_secret_set": bool(cluster.token_secret),
        "tls": tls.mode(verify, config.get("fingerprint", "")),
        "ca_bundle": verify if isinstance(verify, str) else "",
        "fingerprint": config.get("fingerprint", ""),
    }


def source_config(data: dict, options: dict) -> dict:
    """The connector's source config for a connection as the form gives it (token_id
    USER@REALM!TOKENID, tls one of tls.MODES), over the connector's further options."""
    user, _, name = data["token_id"].partition("!")
    verify: bool | str = {"system": True, "fingerprint": True, "insecure": False}.get(data["tls"], data["ca_bundle"])
    pin = {"fingerprint": data["fingerprint"]} if data["tls"] == "fingerprint" else {}
    kept = {k: v for k, v in options.items() if k not in CONNECTION_KEYS}
    own = {"host": data["host"], "port": data["port"], "user": user, "token_name": name, "verify_ssl": verify}
    return kept | own | pin
