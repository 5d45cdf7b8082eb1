"""A Proxmox collect: a few concurrent requests, what changes slowly read when it is due.

Mixed into `proxmox.Proxmox`, which owns the HTTP (`_get`, counted in `calls`) and the state.
Each collect reads `/cluster/resources` and, with a usage period, the metrics export
(pve_metrics); the rest when pve_reads says it is due. The requests of one collect run at most
PARALLEL at once on the source's kept-alive session; what must wait for `/cluster/resources`
(per node, per guest) is asked as soon as it has answered.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from ..coexistence import ProxmoxBalancer, parse_crs
from ..model import Snapshot
from . import pve_metrics
from .base import SourceError
from .pve_reads import EXPORT_RETRY_S, Cadence
from .pve_resources import (
    GuestRef,
    HaView,
    guest_refs,
    number,
    preconditions,
    pressure,
    rrd_pressure,
    rrd_usage,
    to_snapshot,
)

PARALLEL = 8  # requests under way at once per cluster (a bound on what one collect asks of pveproxy)
PRESSURE_PERIOD_S = 300.0  # node pressure: the mean of the RRD's 1-minute rows over 5 minutes, as DRS averages
PRECONDITIONS_TTL_S = 3600.0  # a VM's migrate pre-check changes only with storage or hardware
PRECONDITIONS_PER_ROUND = 10
RRD_STEP_S = 60.0  # the RRD's finest rows: a guest's mean is asked again at most this often
GUEST_RRD_PER_ROUND = 20  # guests' rrddata calls per collection (no metrics export); the rest keep their last mean
HA_PATHS = ("resources", "status/manager_status", "rules", "status/current")


class Collects:
    """The collect of `proxmox.Proxmox` (see the module's docstring)."""

    config: Any  # proxmox.ProxmoxConfig
    proxmox_balancer: ProxmoxBalancer | None
    _tasks: dict[str, dict[str, Any]]
    _checked: dict[str, dict[str, Any]]
    _means: dict[str, dict[str, Any]]
    _metrics: pve_metrics.Means
    _cadence: Cadence

    def _get(self, path: str, *, optional: bool = False, **params: Any) -> Any:
        raise NotImplementedError

    def collect(self, now: float) -> Snapshot:
        """The cluster in a few concurrent requests (at most PARALLEL at once): what changes
        every round each time, what changes slowly when it is due (pve_reads)."""
        with ThreadPoolExecutor(PARALLEL, thread_name_prefix="pve") as pool:
            resources = pool.submit(self._get, "cluster/resources")
            export = pool.submit(self._export, now) if self._wants_export(now) else None
            ha = self._ha_read(pool) if self._cadence.due("ha", now) else None
            options = (
                pool.submit(self._get, "cluster/options", optional=True) if self._cadence.due("options", now) else None
            )
            entries = resources.result()
            if not isinstance(entries, list):
                raise SourceError(f"GET /cluster/resources: expected a list, got {type(entries).__name__}")
            refs = guest_refs(entries)
            online = sorted(
                str(e.get("node")) for e in entries if e.get("type") == "node" and e.get("status") == "online"
            )
            if ha is None and self._ha_moving_unknown(entries):
                ha = self._ha_read(pool)
            nodes = {n: self._node_read(pool, n) for n in self._cadence.nodes_due(online, now)}
            checks = self._submit_checks(pool, refs, now)
            live = set(online) | {r.sid for r in refs if r.running}  # a stopped guest's mean is no usage
            usage = {k: u for k, u in self._usage(pool, refs, export, now).items() if k in live}
            self._keep(ha, options, nodes, checks, now)
        moving = {t["sid"]: t["target"] for t in self._tasks.values() if not t.get("finished")}
        self.proxmox_balancer = parse_crs(self._cadence.kept("options"))
        slow = {k: v for node in self._cadence.nodes().values() for k, v in node.items()}
        return to_snapshot(
            entries,
            _ha_view(self._cadence.kept("ha", {})),
            moving,
            cluster=self.config.cluster,
            taken_at=datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            manage=self.config.guests,
            details=_merged(slow, self._preconditions(refs, online), usage),
        )

    def _keep(
        self,
        ha: dict[str, Future[Any]] | None,
        options: Future[Any] | None,
        nodes: dict[str, dict[str, Future[Any]]],
        checks: dict[str, Future[dict[str, Any]]],
        now: float,
    ) -> None:
        """Store what the slow reads answered, once all of them did (a failure stores nothing)."""
        answered = {
            n: self._node_details(n, {p: f.result() for p, f in paths.items()}, now) for n, paths in nodes.items()
        }
        checked = {sid: f.result() for sid, f in checks.items()}
        if ha is not None:
            self._cadence.keep("ha", _ha_kept({p: f.result() for p, f in ha.items()}), now + self.config.slow_reads_s)
        if options is not None:
            crs = (options.result() or {}).get("crs") if isinstance(options.result(), dict) else None
            self._cadence.keep("options", crs, now + self.config.slow_reads_s)
        self._cadence.keep_nodes(answered, now, self.config.slow_reads_s)
        self._checked.update({sid: {"at": now, "keys": keys} for sid, keys in checked.items()})

    def _node_read(self, pool: ThreadPoolExecutor, node: str) -> dict[str, Future[Any]]:
        """A node's guest lists and RRD, asked at once (each only where the cluster has it)."""
        return {
            "qemu": pool.submit(self._get, f"nodes/{node}/qemu", optional=True),
            "lxc": pool.submit(self._get, f"nodes/{node}/lxc", optional=True),
            "rrddata": pool.submit(self._get, f"nodes/{node}/rrddata", optional=True, timeframe="hour", cf="AVERAGE"),
        }

    def _node_details(self, node: str, answers: dict[str, Any], now: float) -> dict[str, dict[str, Any]]:
        """A node's guests' pressure from its guest lists, its own from its RRD over the last
        PRESSURE_PERIOD_S (the only place Proxmox VE 9 keeps node PSI); nothing on PVE 8. Without
        the metrics export, the node's usage over `usage_period` from the same RRD."""
        out: dict[str, dict[str, Any]] = {}
        for kind, prefix in (("qemu", "vm"), ("lxc", "ct")):
            answer = answers[kind] or []
            for e in answer if isinstance(answer, list) else []:
                where = f"GET /nodes/{node}/{kind} {e.get('vmid') if isinstance(e, dict) else e!r}"
                if not isinstance(e, dict):
                    raise SourceError(f"{where}: expected an object")
                if (p := pressure(e, where)) is not None:
                    out[f"{prefix}:{int(number(e, 'vmid', where))}"] = {"pressure": p}
        rows = answers["rrddata"] or []
        where = f"GET /nodes/{node}/rrddata"
        if (p := rrd_pressure(rows, now - PRESSURE_PERIOD_S, where)) is not None:
            out[node] = {"pressure": p}
        period = self.config.usage_period
        if period > 0 and not self._metrics and (u := rrd_usage(rows, now - period, where, "memused")) is not None:
            out[node] = out.get(node, {}) | u
        return out

    def _wants_export(self, now: float) -> bool:
        return self.config.usage_period > 0 and self._cadence.due("export", now)

    def _export(self, now: float) -> dict[str, list[tuple[float, float, float]]] | None:
        """The points since the last one folded in (at most `usage_period` back); None where the
        cluster has no export (before Proxmox VE 8.3): asked again after EXPORT_RETRY_S."""
        period = self.config.usage_period
        start = max(pve_metrics.through(self._metrics) or 0.0, now - period)
        answer = self._get("cluster/metrics/export", optional=True, history=1, **{"start-time": int(start)})
        return None if answer is None else pve_metrics.samples(answer)

    def _usage(
        self, pool: ThreadPoolExecutor, refs: list[GuestRef], export: Future[Any] | None, now: float
    ) -> dict[str, dict[str, Any]]:
        """Running guests' and nodes' CPU and memory as their mean over `usage_period`, not the
        instant `/cluster/resources` shows (a 10-second spike must not move a guest): from the
        metrics export where the cluster has it, else from each guest's `rrddata`."""
        period = self.config.usage_period
        if period <= 0:
            return {}
        if export is not None:
            if (points := export.result()) is not None:
                self._metrics = pve_metrics.fold(self._metrics, points, period, now)
                self._means = {}
                return pve_metrics.usage(self._metrics, now, period)
            self._metrics = {}
            self._cadence.keep("export", None, now + EXPORT_RETRY_S)
        elif self._metrics:
            return pve_metrics.usage(self._metrics, now, period)
        return self._rrd_usage(pool, refs, now)

    def _rrd_usage(self, pool: ThreadPoolExecutor, refs: list[GuestRef], now: float) -> dict[str, dict[str, Any]]:
        """One `rrddata` call per guest: at most GUEST_RRD_PER_ROUND per collection, the
        longest-unasked first, none asked twice within an RRD step; a guest not asked yet keeps
        its instant figures."""
        period = self.config.usage_period
        running = {r.sid: r for r in refs if r.running}
        self._means = {sid: m for sid, m in self._means.items() if sid in running}
        due = sorted(
            (sid for sid in running if now - self._means.get(sid, {}).get("at", -RRD_STEP_S) >= RRD_STEP_S),
            key=lambda sid: (self._means.get(sid, {}).get("at", -1.0), sid),
        )
        asked = {}
        for sid in due[:GUEST_RRD_PER_ROUND]:
            r = running[sid]
            path = f"nodes/{r.node}/{r.kind}/{r.vmid}/rrddata"
            asked[sid] = (path, pool.submit(self._get, path, optional=True, timeframe="hour", cf="AVERAGE"))
        for sid, (path, rows) in asked.items():
            self._means[sid] = {"at": now, "mean": rrd_usage(rows.result() or [], now - period, path, "mem")}
        return {sid: m["mean"] for sid, m in self._means.items() if m.get("mean")}

    def _submit_checks(
        self, pool: ThreadPoolExecutor, refs: list[GuestRef], now: float
    ) -> dict[str, Future[dict[str, Any]]]:
        """Where each running VM may migrate, from Proxmox's own precondition check. It changes
        only with storage or hardware, so each answer is kept PRECONDITIONS_TTL_S and at most
        PRECONDITIONS_PER_ROUND are asked per collection (a 1000-guest cluster fills in over rounds)."""
        running = [r for r in refs if r.kind == "qemu" and r.running]
        self._checked = {r.sid: self._checked[r.sid] for r in running if r.sid in self._checked}
        stale = sorted(
            (
                r
                for r in running
                if now - self._checked.get(r.sid, {}).get("at", -PRECONDITIONS_TTL_S) >= PRECONDITIONS_TTL_S
            ),
            key=lambda r: (self._checked.get(r.sid, {}).get("at", -1.0), r.sid),
        )
        return {r.sid: pool.submit(self._check, r) for r in stale[:PRECONDITIONS_PER_ROUND]}

    def _check(self, ref: GuestRef) -> dict[str, Any]:
        path = f"nodes/{ref.node}/qemu/{ref.vmid}/migrate"
        answer = self._get(path, optional=True)  # None: a PVE without the check; asked again after the TTL
        return {} if answer is None else preconditions(answer, f"GET /{path}")

    def _preconditions(self, refs: list[GuestRef], online: list[str]) -> dict[str, dict[str, Any]]:
        """The kept pre-checks as snapshot keys; the node a VM is on is allowed too."""
        out = {}
        for r in refs:
            keys = dict(self._checked.get(r.sid, {}).get("keys", {})) if r.kind == "qemu" and r.running else {}
            if "allowed_nodes" in keys:  # Proxmox lists the targets; the node it is on is allowed too
                keys["allowed_nodes"] = sorted({*keys["allowed_nodes"], r.node} & set(online))
            if keys:
                out[r.sid] = keys
        return out

    def _ha_read(self, pool: ThreadPoolExecutor) -> dict[str, Future[Any]]:
        """The HA manager's four endpoints, asked at once; each only where the cluster has it."""
        return {p: pool.submit(self._get, f"cluster/ha/{p}", optional=True) for p in HA_PATHS}

    def _ha_moving_unknown(self, entries: list[dict[str, Any]]) -> bool:
        """An HA guest moving to a target the kept HA state does not know yet: read it now."""
        services = self._cadence.kept("ha", {}).get("services", {})
        return any(
            e.get("hastate") in ("migrate", "relocate")
            and f"{'vm' if e.get('type') == 'qemu' else 'ct'}:{e.get('vmid')}" not in services
            for e in entries
        )


def _ha_kept(answers: dict[str, Any]) -> dict[str, Any]:
    """What the collects use of the HA manager's answers, small enough to keep between them.

    A node is in maintenance when the manager's node status says so or when its LRM reports
    "maintenance mode" in `GET /cluster/ha/status/current` (what `ha-manager status` prints),
    whichever shows first."""
    resources, rules, current = (_listed(answers, p) for p in ("resources", "rules", "status/current"))
    status = answers.get("status/manager_status") or {}
    manager = status.get("manager_status", {}) if isinstance(status, dict) else None
    if not isinstance(manager, dict):
        raise SourceError("GET /cluster/ha/status/manager_status: expected an object with `manager_status`")
    node_status = {str(k): str(v) for k, v in dict(manager.get("node_status") or {}).items()}
    for entry in current:
        if entry.get("type") == "lrm" and "maintenance mode" in str(entry.get("status", "")):
            node_status[str(entry.get("node"))] = "maintenance"
    services = {
        str(sid): {"target": str(s["target"])}
        for sid, s in dict(manager.get("service_status") or {}).items()
        if isinstance(s, dict) and s.get("target")
    }
    return {
        "resources": sorted(str(r["sid"]) for r in resources if "sid" in r),
        "services": services,
        "node_status": node_status,
        "rules": rules,
    }


def _listed(answers: dict[str, Any], path: str) -> list[dict[str, Any]]:
    found = answers.get(path) or []
    if not isinstance(found, list) or not all(isinstance(e, dict) for e in found):
        raise SourceError(f"GET /cluster/ha/{path}: expected a list of objects")
    return found


def _ha_view(kept: dict[str, Any]) -> HaView:
    return HaView(
        {sid: {} for sid in kept.get("resources", [])},
        kept.get("services", {}),
        kept.get("node_status", {}),
        tuple(kept.get("rules", [])),
    )


def _merged(*parts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per guest or node, the snapshot keys every endpoint answered."""
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for key, values in part.items():
            out[key] = out.get(key, {}) | values
    return out
