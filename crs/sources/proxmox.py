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
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import requests
from proxmoxer import ProxmoxAPI, ResourceException
from proxmoxer.tools import Tasks

from ..coexistence import ProxmoxBalancer
from ..snapshot import MAX_USAGE_PERIOD_S
from . import config as cfg
from . import pve_metrics, tls
from .base import SourceError, TaskStatus
from .pve_collect import PARALLEL, Collects
from .pve_reads import SLOW_READS_S, Cadence
from .pve_resources import guest_refs

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
    "slow_reads_s",
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
    slow_reads_s: float = SLOW_READS_S  # pressure lists, HA state, options: read at most this often

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
        slow_reads_s=cfg.number(config, "slow_reads_s", WHERE, SLOW_READS_S, low=0.0),
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


class Proxmox(Collects):
    """The `Source` for a Proxmox VE cluster. Its state is the migrations it started and what
    its collects keep between them (usage means, slow reads, migrate pre-checks)."""

    def __init__(self, config: ProxmoxConfig, state: dict[str, Any] | None = None):
        self.config = config
        state = state or {}
        tasks = state.get("tasks", {})
        if not isinstance(tasks, dict):
            raise cfg.ConfigError(f"{WHERE} state.tasks: expected an object of tasks")
        self._tasks: dict[str, dict[str, Any]] = copy.deepcopy(tasks)
        self._checked: dict[str, dict[str, Any]] = copy.deepcopy(state.get("preconditions", {}))
        self._means: dict[str, dict[str, Any]] = copy.deepcopy(state.get("usage", {}))  # rrddata's, no export
        self._metrics: pve_metrics.Means = copy.deepcopy(state.get("metrics", {}))  # the export's
        self._cadence = Cadence(state.get("reads"))
        # Proxmox's own balancer as the last collect read it (crs.coexistence); None before one.
        self.proxmox_balancer: ProxmoxBalancer | None = None
        self.calls = 0  # requests this source made: the tests and bench/pve_collect.py count them
        self._counting = threading.Lock()
        self._api = ProxmoxAPI(
            config.host,
            port=config.port,
            user=config.user,
            token_name=config.token_name,
            token_value=config.token_value,
            verify_ssl=False if config.fingerprint else config.verify_ssl,
            timeout=config.timeout_s,
        )
        # One kept-alive connection per request under way, shared by the collect's threads.
        adapter = (
            tls.PinnedAdapter(config.fingerprint, pool_maxsize=PARALLEL)
            if config.fingerprint
            else requests.adapters.HTTPAdapter(pool_maxsize=PARALLEL)
        )
        self._api._store["session"].mount(f"https://{config.host}:{config.port}/", adapter)

    def migrate(self, sid: str, target: str, now: float) -> str:
        """Live migration for a running VM, restart migration for a running container."""
        kind, _, vmid = sid.partition(":")
        if kind not in ("vm", "ct") or not vmid.isdigit():
            raise SourceError(f"migrate: {sid!r} is not 'vm:<id>' or 'ct:<id>'")
        listed = self._get("cluster/resources", type="vm")
        if not isinstance(listed, list):
            raise SourceError(f"GET /cluster/resources: expected a list, got {type(listed).__name__}")
        ref = next((r for r in guest_refs(listed) if r.sid == f"{kind}:{int(vmid)}"), None)
        if ref is None:
            raise SourceError(f"migrate: {sid} is not a guest of this cluster")
        options = {"online": int(ref.running)} if kind == "vm" else ({"restart": 1} if ref.running else {})
        upid: str = self._call(
            f"migrate {sid} to {target}",
            lambda: self._api(f"nodes/{ref.node}/{ref.kind}/{ref.vmid}/migrate").post(target=target, **options),
        )
        self._tasks[upid] = {"sid": sid, "source": ref.node, "target": target, "started_at": now}
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
            "metrics": copy.deepcopy(self._metrics),
            "reads": copy.deepcopy(self._cadence.state),
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

    def _get(self, path: str, *, optional: bool = False, **params: Any) -> Any:
        return self._call(f"GET /{path}", lambda: self._api(path).get(**params), optional)

    def _call(self, what: str, request: Callable[[], Any], optional: bool = False) -> Any:
        """Every failure becomes a SourceError saying what was asked and what went wrong."""
        where = f"{self.config.host}:{self.config.port}"
        with self._counting:
            self.calls += 1
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
        except requests.exceptions.Timeout:
            raise SourceError(f"{what}: {where} did not answer within {self.config.timeout_s:g} s") from None
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


def _decode(upid: str) -> dict[str, Any]:
    try:
        return cast(dict[str, Any], Tasks.decode_upid(upid))
    except (AssertionError, ValueError):
        raise SourceError(f"task {upid!r}: not a Proxmox UPID") from None
