"""Test a Proxmox VE connection before trusting it: reach, TLS, token, version, cluster, HA,
Proxmox's own balancer, and the privileges the token lacks, each as a finding an admin reads.

`crs check proxmox` prints it; the web side's "Test connection" is meant to show the same
report. The token is sent only after the TLS verdict passed, so a changed or untrusted
certificate never receives the secret. TLS is one explicit choice: the system's CAs, a CA
bundle, a pinned SHA-256 certificate fingerprint (as Proxmox's own tools pin a self-signed
cluster certificate), or "insecure", which the report always labels. Everything but the
network calls is a pure function over the answers, so it can be tested without a server.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from ..coexistence import parse_crs
from .config import ConfigError
from .proxmox import ProxmoxConfig
from .tls import MODES as TLS_MODES
from .tls import fingerprint


@dataclass(frozen=True)
class Privilege:
    """One row of the README's least-privilege table: what the token needs, where, and what
    stops working without it."""

    name: str
    path: str
    without: str
    optional: bool = False


PRIVILEGES = (
    Privilege(
        "Sys.Audit",
        "/",
        "HA resources, HA rules, the HA manager's status and the datacenter's crs option are not read: "
        "HA guests, rules and node maintenance go unseen, and Proxmox's own auto-rebalance is not detected",
    ),
    Privilege(
        "Sys.Audit",
        "/nodes",
        "nodes are missing from the cluster's resources, node pressure is not read, and a migration "
        "the HA manager starts cannot be followed",
    ),
    Privilege("VM.Audit", "/vms", "no guest is seen, so there is nothing to balance; no guest pressure"),
    Privilege("VM.Migrate", "/vms", "no migration can start, and where a VM may migrate to is not known"),
    Privilege(
        "Sys.Modify", "/nodes", "the emergency stop cannot abort a migration the HA manager started", optional=True
    ),
    Privilege("Sys.PowerMgmt", "/nodes", "power management cannot shut down an emptied node", optional=True),
)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str  # the token's owner, "crs@pve"
    token_name: str
    token_value: str = field(repr=False)  # a secret: in the Authorization header only
    tls: str = "system"  # one of TLS_MODES
    ca_bundle: str = ""
    fingerprint: str = ""  # pinned, as fingerprint() writes it
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.tls not in TLS_MODES:
            raise ConfigError(f"tls {self.tls!r}: not one of {', '.join(TLS_MODES)}")
        if (self.tls == "fingerprint") != bool(self.fingerprint) or (self.tls == "ca-bundle") != bool(self.ca_bundle):
            raise ConfigError(f"tls {self.tls!r} goes with a fingerprint or a CA bundle of its own, and only it")

    @property
    def token_id(self) -> str:
        return f"{self.user}!{self.token_name}"


@dataclass(frozen=True)
class Finding:
    topic: str  # reach, tls, token, version, cluster, ha, crs, privileges
    ok: bool
    text: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    host: str
    port: int
    findings: tuple[Finding, ...]
    fingerprint: str | None  # the server certificate's SHA-256, when a handshake got that far

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "host": self.host,
            "port": self.port,
            "fingerprint": self.fingerprint,
            "findings": [asdict(f) for f in self.findings],
        }


def target(config: ProxmoxConfig) -> Target:
    """The check's view of a connector config, with the same TLS choice (ProxmoxConfig.tls)."""
    return Target(
        host=config.host,
        port=config.port,
        user=config.user,
        token_name=config.token_name,
        token_value=config.token_value,
        tls=config.tls,
        ca_bundle=config.verify_ssl if isinstance(config.verify_ssl, str) else "",
        fingerprint=config.fingerprint,
        timeout_s=config.timeout_s,
    )


def check(target: Target) -> Report:
    """The whole check; network failures become findings, never exceptions."""
    findings: list[Finding] = []
    connection = _Connection(target)
    reach, tls = connection.handshake()
    findings += [reach] + ([tls] if tls else [])
    if not reach.ok or tls is None or not tls.ok:
        return Report(target.host, target.port, tuple(findings), connection.seen)
    status, version = connection.get("version")
    if status == 401:
        findings.append(Finding("token", False, f"token {target.token_id} refused (401): wrong id or secret"))
        return Report(target.host, target.port, tuple(findings), connection.seen)
    findings.append(Finding("token", status == 200, f"token {target.token_id} " + _answered(status, "accepted")))
    if status == 200:
        findings.append(version_finding(version))
    findings.append(privileges_finding(*connection.get("access/permissions")))
    findings.append(cluster_finding(*connection.get("cluster/resources")))
    findings.append(ha_finding(*connection.get("cluster/ha/status/current")))
    findings.append(crs_finding(*connection.get("cluster/options")))
    return Report(target.host, target.port, tuple(findings), connection.seen)


def version_finding(answer: Any) -> Finding:
    text = f"Proxmox VE {answer.get('version')} (release {answer.get('release')}, repoid {answer.get('repoid')})"
    return Finding("version", True, text, {k: answer.get(k) for k in ("version", "release", "repoid")})


def missing_privileges(permissions: dict[str, dict[str, Any]]) -> list[Privilege]:
    """The table's rows the token's effective permissions lack. GET /access/permissions works
    out the effective privileges (inherited ones included) of /, /nodes, /vms and every ACL
    path, and leaves out a path where there are none (pve-access-control's
    get_effective_permissions): a table path missing from the answer holds nothing."""
    return [p for p in PRIVILEGES if p.name not in (permissions.get(p.path) or {})]


def privileges_finding(status: int, answer: Any) -> Finding:
    if status != 200 or not isinstance(answer, dict):
        return Finding("privileges", False, "GET /access/permissions " + _answered(status, "no permission map"))
    missing = missing_privileges(answer)
    required = [p for p in missing if not p.optional]
    lines = [f"{p.name} on {p.path}{' (optional)' if p.optional else ''}: without it {p.without}" for p in missing]
    text = "missing " + "; ".join(lines) if missing else "the token has every privilege the scheduler uses"
    details = {"missing": [{"privilege": p.name, "path": p.path, "optional": p.optional} for p in missing]}
    return Finding("privileges", not required, text, details)


def cluster_finding(status: int, answer: Any) -> Finding:
    if status != 200 or not isinstance(answer, list):
        return Finding("cluster", False, "GET /cluster/resources " + _answered(status, "no list"))
    nodes = [e for e in answer if e.get("type") == "node"]
    online = sum(1 for e in nodes if e.get("status") == "online")
    guests = [e for e in answer if e.get("type") in ("qemu", "lxc") and not _flag(e.get("template"))]
    vms = sum(1 for e in guests if e.get("type") == "qemu")
    text = (
        f"{_count(len(nodes), 'node')} ({online} online), {_count(len(guests), 'guest')} "
        f"({_count(vms, 'VM')}, {_count(len(guests) - vms, 'container')})"
    )
    if not nodes:
        text += ": no node visible (see privileges)"
    details = {"nodes": len(nodes), "online": online, "guests": len(guests), "vms": vms}
    return Finding("cluster", bool(nodes), text, details)


def ha_finding(status: int, answer: Any) -> Finding:
    """From the entries `ha-manager status` prints: quorum, master, one lrm per node, services."""
    if status != 200 or not isinstance(answer, list):
        return Finding("ha", False, "GET /cluster/ha/status/current " + _answered(status, "no list"))
    by_type: dict[str, list[dict[str, Any]]] = {}
    for entry in answer:
        by_type.setdefault(str(entry.get("type")), []).append(entry)
    quorate = any(_flag(e.get("quorate")) for e in by_type.get("quorum", []))
    master = next(iter(by_type.get("master", [])), None)
    manager = f"manager {master.get('status')}" if master else "no HA manager elected (no HA resources yet)"
    maintenance = sorted(str(e.get("node")) for e in by_type.get("lrm", []) if "maintenance" in str(e.get("status")))
    services = len(by_type.get("service", []))
    text = f"{'quorate' if quorate else 'NOT quorate'}; {manager}; {_count(services, 'HA resource')}"
    if maintenance:
        text += f"; in maintenance: {', '.join(maintenance)}"
    details = {"quorate": quorate, "master": master.get("node") if master else None, "resources": services}
    return Finding("ha", quorate, text, details | {"maintenance": maintenance})


def crs_finding(status: int, answer: Any) -> Finding:
    if status != 200 or not isinstance(answer, dict):
        return Finding("crs", False, "GET /cluster/options " + _answered(status, "no options"))
    balancer = parse_crs(answer.get("crs"))
    shown = balancer.raw or "not set (Proxmox's defaults: ha=basic)"
    if balancer.rebalancing:
        verdict = (
            "Proxmox's own auto-rebalance is ON: this product recommends but migrates nothing by itself "
            "while it is (two balancers would undo each other's moves)"
        )
    else:
        verdict = "Proxmox's own auto-rebalance is off"
    return Finding("crs", True, f"crs {shown}; {verdict}", {"crs": balancer.raw, "rebalancing": balancer.rebalancing})


def _answered(status: int, ok_text: str) -> str:
    if status == 200:
        return ok_text
    if status == 403:
        return "refused (403): the token lacks the privilege for it"
    return f"answered {status}" if status else "got no answer"


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true")


class _Connection:
    """HTTPS to the API with the target's TLS choice; every request checks the pin again."""

    def __init__(self, target: Target):
        self.target = target
        self.seen: str | None = None  # the fingerprint the server presented

    def handshake(self) -> tuple[Finding, Finding | None]:
        """Reach the port and judge the certificate, before any secret is sent."""
        t = self.target
        started = time.monotonic()
        try:
            sock = self._socket(verify=t.tls in ("system", "ca-bundle"))
        except ssl.SSLCertVerificationError as exc:
            reach = Finding("reach", True, f"{t.host}:{t.port} answers")
            try:
                self._socket(verify=False).close()  # only to name the certificate in the verdict
            except (OSError, ssl.SSLError):
                pass
            return reach, self._untrusted(exc.verify_message or str(exc))
        except (OSError, ssl.SSLError, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode
            return Finding("reach", False, f"{t.host}:{t.port} unreachable: {_why(exc, t.timeout_s)}"), None
        sock.close()
        ms = (time.monotonic() - started) * 1000
        reach = Finding("reach", True, f"{t.host}:{t.port} answers (TCP and TLS in {ms:.0f} ms)")
        if t.tls == "fingerprint" and self.seen != t.fingerprint:
            text = (
                f"certificate changed: pinned {t.fingerprint}, the server presents {self.seen}; "
                "refused, the token was not sent"
            )
            return reach, Finding("tls", False, text, {"pinned": t.fingerprint, "presented": self.seen})
        verdicts = {
            "system": "verified against the system's CAs",
            "ca-bundle": f"verified against the CA bundle {t.ca_bundle}",
            "fingerprint": "matches the pinned fingerprint",
            "insecure": "NOT verified (insecure, chosen explicitly): anyone on the path could read the token",
        }
        return reach, Finding("tls", True, f"{verdicts[t.tls]}; SHA-256 {self.seen}", {"mode": t.tls})

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        """(status, data) of GET /api2/json/<path>; status 0 when the request failed on the way."""
        t = self.target
        try:
            sock = self._socket(verify=t.tls in ("system", "ca-bundle"))
            if t.tls == "fingerprint" and self.seen != t.fingerprint:
                sock.close()
                return 0, None
            connection = http.client.HTTPSConnection(t.host, t.port, timeout=t.timeout_s)
            connection.sock = sock
            url = f"/api2/json/{quote(path)}" + (f"?{urlencode(params)}" if params else "")
            auth = f"PVEAPIToken={t.token_id}={t.token_value}"
            connection.request("GET", url, headers={"Authorization": auth, "Accept": "application/json"})
            response = connection.getresponse()
            body = response.read()
            connection.close()
        except (OSError, ssl.SSLError, http.client.HTTPException):
            return 0, None
        try:
            data = json.loads(body).get("data") if body else None
        except (ValueError, AttributeError):
            data = None
        return response.status, data

    def _socket(self, verify: bool) -> ssl.SSLSocket:
        t = self.target
        if verify:
            context = ssl.create_default_context(cafile=t.ca_bundle or None)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        raw = socket.create_connection((t.host, t.port), timeout=t.timeout_s)
        try:
            sock = context.wrap_socket(raw, server_hostname=t.host)
        except BaseException:
            raw.close()
            raise
        der = sock.getpeercert(binary_form=True)
        self.seen = fingerprint(der) if der else None
        return sock

    def _untrusted(self, why: str) -> Finding:
        t = self.target
        where = "the system's CAs" if t.tls == "system" else f"the CA bundle {t.ca_bundle}"
        text = f"certificate not trusted by {where} ({why}); the token was not sent"
        if self.seen:
            text += (
                f". Its SHA-256 fingerprint is {self.seen}: if it is the one the node shows "
                "(`pvenode cert info`), pin it"
            )
        return Finding("tls", False, text, {"mode": t.tls, "presented": self.seen})


def _why(exc: OSError | UnicodeError, timeout_s: float) -> str:
    if isinstance(exc, (socket.gaierror, UnicodeError)):
        return "host name not found"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed ({exc.reason or exc})"
    return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
