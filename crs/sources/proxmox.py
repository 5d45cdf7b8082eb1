"""A Proxmox VE cluster as a source: collect through its API, migrate, follow the tasks.

It talks to the API with proxmoxer and an API token (a token can be limited to
exactly the rights the scheduler needs and revoked alone). TLS is one explicit choice
(crs.sources.tls): the system's CAs, a CA bundle, a pinned certificate fingerprint, or off. Converting the answers is
`pve_resources`' job; this module does the HTTP, the migrations and the UPID tasks.
An HA-managed guest answers a migrate request with an `hamigrate` task that only
asks the HA manager; the real `qmigrate`/`vzmigrate` starts later, so it is looked
up and followed to its end (as ProxLB does).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import requests
from proxmoxer import ProxmoxAPI, ResourceException
from proxmoxer.tools import Tasks

from ..coexistence import ProxmoxBalancer, parse_crs
from ..model import Snapshot
from ..snapshot import MAX_USAGE_PERIOD_S
from . import config as cfg
from . import tls
from .base import SourceError, TaskStatus
from .pve_resources import HaView, number, preconditions, pressure, rrd_pressure, rrd_usage, to_snapshot

WHERE = "proxmox"
KEYS = {
    "host",
    "port",
    "user",
    "token_name",
    "token_value",
    "token",
    "verify_ssl",
    "fingerprint",
    "timeout_s",
    "cluster",
    "guests",
    "usage_period",
}
TOKEN = re.compile(r"^(?P<user>[^!\s]+@[^!\s]+)!(?P<name>[^=\s]+)=(?P<value>\S+)$")
TOKEN_ID = r"^[^!\s]+@[^!\s]+![^=\s]+$"  # the token as Proxmox lists it, without its secret
ENVIRONMENT = {
    "CRS_PVE_HOST": "host",
    "CRS_PVE_PORT": "port",
    "CRS_PVE_TOKEN": "token",
    "CRS_PVE_VERIFY_SSL": "verify_ssl",
}
HA_PICKUP_S = 120.0  # an HA manager round is ~10 s; this long without a qmigrate means it was refused
MIGRATION_TYPES = ("qmigrate", "vzmigrate")
FINISHED_TASKS_KEPT = 50
TRANSFER = re.compile(r"transferred ([\d.]+) ?([KMGT]iB|B) of ([\d.]+) ?([KMGT]iB|B)")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
PRESSURE_PERIOD_S = 300.0  # node pressure: the mean of the RRD's 1-minute rows over 5 minutes, as DRS averages
PRECONDITIONS_TTL_S = 600.0
PRECONDITIONS_PER_ROUND = 10
RRD_STEP_S = 60.0  # the RRD's finest rows: a guest's mean is asked again at most this often
GUEST_RRD_PER_ROUND = 20  # guests' rrddata calls per collection; the rest keep their last mean


@dataclass(frozen=True)
class ProxmoxConfig:
    host: str
    port: int
    user: str  # "root@pam": the token's owner
    token_name: str
    token_value: str = field(repr=False)  # a secret: never in logs or error messages
    verify_ssl: bool | str = True  # or the path of a CA bundle for a self-signed cluster CA
    fingerprint: str = ""  # a pinned certificate (tls.pinned's form): replaces verify_ssl
    timeout_s: float = 10.0
    cluster: str = "proxmox"
    guests: str = "all"  # "all" guests may be moved, or only "ha" resources (Proxmox's own CRS)
    usage_period: float = 0.0  # seconds over which usage is averaged from rrddata; 0 = the latest value

    @property
    def tls(self) -> str:
        """Which of tls.MODES the connection uses."""
        return tls.mode(self.verify_ssl, self.fingerprint)


def parse_config(config: dict[str, Any]) -> ProxmoxConfig:
    """Either `token` as PVE shows it ("user@realm!name=secret") or user, token_name and token_value."""
    config = cfg.refuse_unknown(config, KEYS, WHERE)
    if "token" in config:
        if {"user", "token_name", "token_value"} & set(config):
            raise cfg.ConfigError(f"{WHERE}.token: give either token or user/token_name/token_value, not both")
        match = TOKEN.match(cfg.text(config, "token", WHERE))
        if not match:
            raise cfg.ConfigError(f"{WHERE}.token: not of the form USER@REALM!TOKENID=SECRET")
        user, name, value = match["user"], match["name"], match["value"]
    else:
        user, name, value = (cfg.text(config, k, WHERE) for k in ("user", "token_name", "token_value"))
    verify = config.get("verify_ssl", True)
    if not isinstance(verify, bool) and not (isinstance(verify, str) and verify.strip()):
        raise cfg.ConfigError(f"{WHERE}.verify_ssl: {verify!r} is not true, false or a CA bundle path")
    pin = tls.pinned(cfg.text(config, "fingerprint", WHERE)) if config.get("fingerprint") else ""
    if pin and verify is not True:
        raise cfg.ConfigError(f"{WHERE}.fingerprint: a pinned certificate replaces verify_ssl; leave verify_ssl out")
    return ProxmoxConfig(
        host=cfg.text(config, "host", WHERE),
        port=cfg.integer(config, "port", WHERE, 8006, low=1, high=65535),
        user=user,
        token_name=name,
        token_value=value,
        verify_ssl=verify,
        fingerprint=pin,
        timeout_s=cfg.number(config, "timeout_s", WHERE, 10.0, low=0.0, exclusive_low=True),
        cluster=cfg.text(config, "cluster", WHERE, "proxmox"),
        guests=cfg.choice(config, "guests", WHERE, ("all", "ha"), "all"),
        usage_period=cfg.number(config, "usage_period", WHERE, 0.0, low=0.0, high=MAX_USAGE_PERIOD_S),
    )


def config_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """Connection settings from CRS_PVE_HOST, CRS_PVE_PORT, CRS_PVE_TOKEN and CRS_PVE_VERIFY_SSL.

    The edges (the command line, Django's settings) pass their environment in and
    merge the result under a cluster's own settings; the engine reads none itself.
    """
    out: dict[str, Any] = {}
    for variable, key in ENVIRONMENT.items():
        value = environ.get(variable, "").strip()
        if not value:
            continue
        if key == "port":
            if not value.isdigit():
                raise cfg.ConfigError(f"{variable}={value!r}: not a port number")
            out[key] = int(value)
        elif key == "verify_ssl":
            out[key] = {"1": True, "true": True, "0": False, "false": False}.get(value.lower(), value)
        else:
            out[key] = value
    return out


class Proxmox:
    """The `Source` for a Proxmox VE cluster. Its state is the migrations it started."""

    def __init__(self, config: ProxmoxConfig, state: dict[str, Any] | None = None):
        self.config = config
        tasks = (state or {}).get("tasks", {})
        if not isinstance(tasks, dict):
            raise cfg.ConfigError(f"{WHERE} state.tasks: expected an object of tasks")
        self._tasks: dict[str, dict[str, Any]] = copy.deepcopy(tasks)
        self._checked: dict[str, dict[str, Any]] = copy.deepcopy((state or {}).get("preconditions", {}))
        self._means: dict[str, dict[str, Any]] = copy.deepcopy((state or {}).get("usage", {}))
        # Proxmox's own balancer as the last collect read it (crs.coexistence); None before one.
        self.proxmox_balancer: ProxmoxBalancer | None = None
        self._api = ProxmoxAPI(
            config.host,
            port=config.port,
            user=config.user,
            token_name=config.token_name,
            token_value=config.token_value,
            verify_ssl=False if config.fingerprint else config.verify_ssl,
            timeout=config.timeout_s,
        )
        if config.fingerprint:
            self._api._store["session"].mount(
                f"https://{config.host}:{config.port}/", tls.PinnedAdapter(config.fingerprint)
            )

    def collect(self, now: float) -> Snapshot:
        resources = self._get("cluster/resources")
        moving = {t["sid"]: t["target"] for t in self._tasks.values() if not t.get("finished")}
        online = sorted(
            str(e.get("node")) for e in resources if e.get("type") == "node" and e.get("status") == "online"
        )
        # Sys.Audit on /; a PVE without the endpoint (or the option) runs no balancer of its own.
        options = self._get("cluster/options", optional=True) or {}
        self.proxmox_balancer = parse_crs(options.get("crs") if isinstance(options, dict) else None)
        return to_snapshot(
            resources,
            self._ha_view(),
            moving,
            cluster=self.config.cluster,
            taken_at=datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            manage=self.config.guests,
            details=_merged(
                self._pressure(online, now), self._preconditions(resources, online, now), self._usage(resources, now)
            ),
        )

    def _pressure(self, online: list[str], now: float) -> dict[str, dict[str, Any]]:
        """Guests' pressure from each node's guest lists, nodes' from their RRD over the last
        PRESSURE_PERIOD_S (the only place Proxmox VE 9 keeps node PSI); nothing on PVE 8."""
        out: dict[str, dict[str, Any]] = {}
        for node in online:
            for kind, prefix in (("qemu", "vm"), ("lxc", "ct")):
                for e in self._get(f"nodes/{node}/{kind}", optional=True) or []:
                    where = f"nodes/{node}/{kind} {e.get('vmid')}"
                    if (p := pressure(e, where)) is not None:
                        out[f"{prefix}:{int(number(e, 'vmid', where))}"] = {"pressure": p}
            rows = self._get(f"nodes/{node}/rrddata", optional=True, timeframe="hour", cf="AVERAGE") or []
            if (p := rrd_pressure(rows, now - PRESSURE_PERIOD_S, f"nodes/{node}/rrddata")) is not None:
                out[node] = {"pressure": p}
            period = self.config.usage_period
            if period > 0 and (u := rrd_usage(rows, now - period, f"nodes/{node}/rrddata", "memused")) is not None:
                out[node] = out.get(node, {}) | u
        return out

    def _usage(self, resources: list[dict[str, Any]], now: float) -> dict[str, dict[str, Any]]:
        """Running guests' CPU and memory as the mean over `usage_period` of their RRD rows, not
        the instant `/cluster/resources` shows (a 10-second spike must not move a guest). One
        call per guest: at most GUEST_RRD_PER_ROUND per collection, the longest-unasked first,
        none asked twice within an RRD step; a guest not asked yet keeps its instant figures."""
        period = self.config.usage_period
        if period <= 0:
            return {}
        running = {
            f"{'vm' if e.get('type') == 'qemu' else 'ct'}:{e.get('vmid')}": e
            for e in resources
            if e.get("type") in ("qemu", "lxc") and e.get("status") == "running"
        }
        self._means = {sid: m for sid, m in self._means.items() if sid in running}
        due = sorted(
            (sid for sid in running if now - self._means.get(sid, {}).get("at", -RRD_STEP_S) >= RRD_STEP_S),
            key=lambda sid: (self._means.get(sid, {}).get("at", -1.0), sid),
        )
        for sid in due[:GUEST_RRD_PER_ROUND]:
            e = running[sid]
            path = f"nodes/{e['node']}/{e['type']}/{e['vmid']}/rrddata"
            rows = self._get(path, optional=True, timeframe="hour", cf="AVERAGE") or []
            self._means[sid] = {"at": now, "mean": rrd_usage(rows, now - period, path, "mem")}
        return {sid: m["mean"] for sid, m in self._means.items() if m.get("mean")}

    def _preconditions(
        self, resources: list[dict[str, Any]], online: list[str], now: float
    ) -> dict[str, dict[str, Any]]:
        """Where each running VM may migrate, from Proxmox's own precondition check. It changes
        only with storage or hardware, so each answer is kept PRECONDITIONS_TTL_S and at most
        PRECONDITIONS_PER_ROUND are asked per collection (a 1000-guest cluster fills in over rounds)."""
        known = set(online)
        running = [e for e in resources if e.get("type") == "qemu" and e.get("status") == "running"]
        stale = sorted(running, key=lambda e: self._checked.get(f"vm:{e.get('vmid')}", {}).get("at", -1.0))
        for e in stale[:PRECONDITIONS_PER_ROUND]:
            sid = f"vm:{e.get('vmid')}"
            if now - self._checked.get(sid, {}).get("at", -PRECONDITIONS_TTL_S) < PRECONDITIONS_TTL_S:
                break
            path = f"nodes/{e['node']}/qemu/{e['vmid']}/migrate"
            answer = self._get(path, optional=True)  # None: a PVE without the check; asked again after the TTL
            self._checked[sid] = {"at": now, "keys": {} if answer is None else preconditions(answer, path)}
        out = {}
        for e in running:
            sid = f"vm:{e.get('vmid')}"
            keys = dict(self._checked.get(sid, {}).get("keys", {}))
            if "allowed_nodes" in keys:  # Proxmox lists the targets; the node it is on is allowed too
                keys["allowed_nodes"] = sorted({*keys["allowed_nodes"], str(e.get("node"))} & known)
            if keys:
                out[sid] = keys
        return out

    def migrate(self, sid: str, target: str, now: float) -> str:
        """Live migration for a running VM, restart migration for a running container."""
        kind, _, vmid = sid.partition(":")
        if kind not in ("vm", "ct") or not vmid.isdigit():
            raise SourceError(f"migrate: {sid!r} is not 'vm:<id>' or 'ct:<id>'")
        pve_type = "qemu" if kind == "vm" else "lxc"
        entry = next(
            (
                e
                for e in self._get("cluster/resources", type="vm")
                if e.get("type") == pve_type and str(e.get("vmid")) == vmid
            ),
            None,
        )
        if entry is None:
            raise SourceError(f"migrate: {sid} is not a guest of this cluster")
        running = entry.get("status") == "running"
        options = {"online": int(running)} if kind == "vm" else ({"restart": 1} if running else {})
        upid: str = self._call(
            f"migrate {sid} to {target}",
            lambda: self._api(f"nodes/{entry['node']}/{pve_type}/{vmid}/migrate").post(target=target, **options),
        )
        self._tasks[upid] = {"sid": sid, "source": entry["node"], "target": target, "started_at": now}
        return upid

    def task_status(self, task_id: str, now: float) -> TaskStatus:
        task = self._tasks.setdefault(task_id, {})
        followed = task.get("follow", task_id)
        info = _decode(followed)
        status = self._get(f"nodes/{info['node']}/tasks/{followed}/status")
        if status.get("status") != "stopped":
            return TaskStatus("running", self._progress(task, info["node"], followed))
        exit_status = str(status.get("exitstatus", ""))
        if exit_status != "OK" and not exit_status.startswith("WARNINGS"):
            self._finish(task)
            return TaskStatus("failed", task.get("progress", 0.0), exit_status or "task stopped without a status")
        if info["type"] == "hamigrate":
            return self._after_ha_request(task_id, task, info, now)
        self._finish(task)
        return TaskStatus("done", 1.0)

    def abort(self, task_id: str, now: float) -> None:
        """Stop the task (DELETE /nodes/{node}/tasks/{upid}), or the migration the HA manager started for it."""
        upid = self._tasks.get(task_id, {}).get("follow", task_id)
        node = _decode(upid)["node"]
        self._call(f"stop task {upid}", lambda: self._api(f"nodes/{node}/tasks/{upid}").delete())

    def maintenance(self, node: str, on: bool, now: float) -> None:
        """pve-ha-manager has no API for it (`node-maintenance-set` is in its CLI only)."""
        raise SourceError(f"Proxmox takes node maintenance from its command line only: run `{command(node, on)}`")

    def shutdown(self, node: str, now: float) -> None:
        """`POST /nodes/{node}/status` with `command=shutdown` (Sys.PowerMgmt on /nodes/{node})."""
        self._call(f"shutdown {node}", lambda: self._api(f"nodes/{node}/status").post(command="shutdown"))

    def state(self) -> dict[str, Any]:
        return {
            "tasks": copy.deepcopy(self._tasks),
            "preconditions": copy.deepcopy(self._checked),
            "usage": copy.deepcopy(self._means),
        }

    def _after_ha_request(self, task_id: str, task: dict[str, Any], info: dict[str, Any], now: float) -> TaskStatus:
        """The HA manager accepted the request; find the migration its LRM started, or keep waiting."""
        source = task.get("source", info["node"])
        found = self._get(f"nodes/{source}/tasks", vmid=int(info["id"]), since=info["starttime"], source="all")
        runs = [
            t for t in found if t.get("type") in MIGRATION_TYPES and int(t.get("starttime", 0)) >= info["starttime"]
        ]
        if runs:
            task["follow"] = max(runs, key=lambda t: (int(t["starttime"]), t["upid"]))["upid"]
            return self.task_status(task_id, now)
        waiting_since = task.setdefault("ha_accepted_at", now)
        if now - waiting_since > HA_PICKUP_S:
            self._finish(task)
            return TaskStatus("failed", 0.0, f"the HA manager started no migration within {HA_PICKUP_S:.0f} s")
        return TaskStatus("running", 0.0)

    def _progress(self, task: dict[str, Any], node: str, upid: str) -> float:
        """From the task log's "transferred X of Y" lines, read incrementally; 0 until there is one."""
        lines = self._get(f"nodes/{node}/tasks/{upid}/log", start=task.get("log_lines", 0), limit=500)
        task["log_lines"] = task.get("log_lines", 0) + len(lines)
        for line in lines:
            if m := TRANSFER.search(str(line.get("t", ""))):
                total = float(m[3]) * UNITS[m[4]]
                task["progress"] = min(0.99, float(m[1]) * UNITS[m[2]] / total) if total else 0.0
        return cast(float, task.get("progress", 0.0))

    def _finish(self, task: dict[str, Any]) -> None:
        task["finished"] = True
        finished = [k for k, t in self._tasks.items() if t.get("finished")]
        for key in finished[:-FINISHED_TASKS_KEPT]:
            del self._tasks[key]

    def _ha_view(self) -> HaView:
        """HA resources, manager status and PVE 9 rules, each only where the cluster has it.

        A node is in maintenance when the manager's node status says so or when its LRM
        reports "maintenance mode" in `GET /cluster/ha/status/current` (what `ha-manager
        status` prints), whichever shows first."""
        resources = self._get("cluster/ha/resources", optional=True) or []
        status = (self._get("cluster/ha/status/manager_status", optional=True) or {}).get("manager_status", {})
        rules = self._get("cluster/ha/rules", optional=True) or []
        current = self._get("cluster/ha/status/current", optional=True) or []
        node_status = dict(status.get("node_status", {}))
        for entry in current:
            if entry.get("type") == "lrm" and "maintenance mode" in str(entry.get("status", "")):
                node_status[str(entry.get("node"))] = "maintenance"
        return HaView(
            {r["sid"]: r for r in resources if "sid" in r},
            status.get("service_status", {}),
            node_status,
            tuple(rules),
        )

    def _get(self, path: str, *, optional: bool = False, **params: Any) -> Any:
        return self._call(f"GET /{path}", lambda: self._api(path).get(**params), optional)

    def _call(self, what: str, request: Callable[[], Any], optional: bool = False) -> Any:
        """Every failure becomes a SourceError saying what was asked and what went wrong."""
        where = f"{self.config.host}:{self.config.port}"
        try:
            return request()
        except ResourceException as exc:
            if optional and exc.status_code in (404, 501):
                return None  # an older PVE without this endpoint
            raise SourceError(
                f"{what}: Proxmox answered {exc.status_code} {exc.status_message}: {exc.content}"
            ) from None
        except requests.exceptions.SSLError:
            raise SourceError(f"{what}: {self._refused_certificate()}") from None
        except requests.exceptions.RequestException as exc:
            raise SourceError(f"{what}: cannot reach {where} ({type(exc).__name__})") from None

    def _refused_certificate(self) -> str:
        """Why the handshake failed, naming the certificates when one was pinned."""
        c = self.config
        where = f"{c.host}:{c.port}"
        if c.fingerprint:
            seen = tls.presented(c.host, c.port, c.timeout_s)
            return (
                f"the certificate of {where} changed: pinned {c.fingerprint}, the server presents "
                f"{seen or 'none'}; refused, the token was not sent"
            )
        return (
            f"TLS verification of {where} failed; pin the cluster's certificate (fingerprint), "
            "or set verify_ssl to its CA bundle (or false on a trusted network only)"
        )


def command(node: str, on: bool) -> str:
    """The command an admin runs on any node of the cluster to put `node` into maintenance or take it out."""
    return f"ha-manager crm-command node-maintenance {'enable' if on else 'disable'} {node}"


def _merged(*parts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per guest or node, the snapshot keys every endpoint answered."""
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for key, values in part.items():
            out[key] = out.get(key, {}) | values
    return out


def _decode(upid: str) -> dict[str, Any]:
    try:
        return cast(dict[str, Any], Tasks.decode_upid(upid))
    except (AssertionError, ValueError):
        raise SourceError(f"task {upid!r}: not a Proxmox UPID") from None
