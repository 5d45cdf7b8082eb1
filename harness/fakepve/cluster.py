"""The fake Proxmox VE cluster's state and API: the recorded responses plus what they lack.

It serves the responses recorded from real clusters (tests/fixtures/pve-api/responses)
plus the entries the recordings lack, built from reference/pve-api.md: an HA-managed
VM, a container with string numbers, HA status and rules. Migrations change its state
the way PVE does (tasks.py). A guest whose entry has a `lock` (a test sets it, as a
backup does) is refused as Proxmox refuses it: "VM is locked (backup)".
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from http.server import ThreadingHTTPServer
from pathlib import Path

from . import metrics, server
from .tasks import GIB, Tasks

RESPONSES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "pve-api" / "responses"
TOKEN = server.TOKEN
# What PVE checks before answering (the schema's `permissions`): 403 without it. /cluster/resources
# refuses nothing but leaves out the entries the token may not see.
NEEDS = {
    ("GET", path): ("/", "Sys.Audit")
    for path in (
        "cluster/options",
        "cluster/ha/resources",
        "cluster/ha/rules",
        "cluster/ha/status/current",
        "cluster/ha/status/manager_status",
        "cluster/metrics/export",
    )
}
VISIBLE = {"node": ("/nodes", "Sys.Audit"), "qemu": ("/vms", "VM.Audit"), "lxc": ("/vms", "VM.Audit")}


def recorded(name: str):
    return json.loads((RESPONSES / name).read_text())["data"]


class FakePve(Tasks):
    """State of the fake cluster; tests, benchmarks and the fault soak read and change it directly.

    Its network, as options (stable names: the fault soak sets them):
    - `latency_s`: added to every answer (a network's round trip; a bench sets 0.05);
    - `slow_s`: also added to every answer: a cluster that answers slowly (the soak's fault: 2.0);
    - `silent`: connections are accepted and requests read, but never answered (a cluster that
      stops answering: the client's timeout fires). `stop()` frees them.
    Requests are served concurrently (a thread per connection, kept alive);
    `gate.peak` is the most that were under way at once.
    """

    def __init__(self, cert_dir: Path):
        self.resources = recorded("cluster-resources.pve-go-proxmox.json")
        ha_vm = copy.deepcopy(self.entry("qemu/100"))  # the recorded shape, as an HA resource on node3
        ha_vm.update(id="qemu/104", vmid=104, name="db1", node="node3", hastate="started", cpu=0.5, maxcpu=2)
        container = {
            "id": "lxc/300",
            "type": "lxc",
            "vmid": 300,
            "name": "web1",
            "node": "node4",
            "status": "running",
            "template": 0,
            "cpu": "0.0150",
            "maxcpu": 2,
            "mem": "268435456",
            "maxmem": 1073741824,
            "disk": 0,
            "maxdisk": 8 * GIB,
            "uptime": 1200,
        }
        self.resources += [ha_vm, container]
        self.ha_resources = [
            {
                "sid": "vm:104",
                "type": "vm",
                "state": "started",
                "max_restart": 1,
                "max_relocate": 1,
                "failback": 1,
                "digest": "5e1f0c",
            }
        ]
        self.services = {"vm:104": {"node": "node3", "state": "started", "uid": "ZkV5bq0bW1F0a0HR3tE8Bw"}}
        self.node_status = {f"node{i}": "online" for i in range(1, 5)}
        # LRM mode per node ("active", "maintenance"), as `ha-manager crm-command node-maintenance
        # enable <node>` leaves it; GET /cluster/ha/status/current words it "maintenance mode".
        self.lrm_mode = {f"node{i}": "active" for i in range(1, 5)}
        self.rules: list[dict] | None = [
            {
                "rule": "db-prefers-node3",
                "type": "node-affinity",
                "resources": "vm:104",
                "nodes": "node3:2,node1:1",
                "strict": 0,
                "digest": "a1b2",
            },
        ]
        # Proxmox VE 9's extras, empty = a PVE 8 cluster: PSI fields per guest id ("qemu/100") as the
        # guest lists send them, node RRD rows, and migrate preconditions per guest id.
        self.guest_psi: dict[str, dict] = {}
        self.node_rrd: dict[str, list[dict]] = {}
        self.guest_rrd: dict[str, list[dict]] = {}  # per guest id; absent = the recorded stopped-VM rows
        self.preconditions: dict[str, dict] = {}
        # GET /cluster/metrics/export (PVE 8.3+, metrics.py): False = an older PVE answering 501.
        # Its latest generation is stamped `metrics_time` (None: the real clock).
        self.metrics_export = True
        self.metrics_time: float | None = None
        # datacenter.cfg as GET /cluster/options returns it; `crs` absent = Proxmox's defaults
        # (basic mode, no auto-rebalance). None = a PVE answering 501 (tests of old versions).
        self.options: dict | None = {"keyboard": "en-us"}
        self.version = {"version": "9.0.3", "release": "9.0", "repoid": "025864202ebb6109"}
        # The token's effective privileges as GET /access/permissions answers (path → privilege →
        # propagate); a test takes some away to play a token that lacks them.
        self.permissions: dict[str, dict[str, int]] = {
            path: {p: 1 for p in ("Sys.Audit", "Sys.Modify", "Sys.PowerMgmt", "VM.Audit", "VM.Migrate")}
            for path in ("/", "/nodes", "/vms")
        }
        self.tasks: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict]] = []
        # What the real API would not have: a request outside Proxmox VE's schema or an answer
        # its `returns` refuses (schema.py). The `pve` fixture fails a test that leaves any.
        self.strays: list[str] = []
        self.steps_per_migration = 3  # status polls a migration stays running
        self.fail_next: str | None = None  # exit status of the next migration, e.g. "migration aborted"
        self.lock_next: str | None = None  # a lock the next guest asked to migrate takes first (a backup's race)
        self.ha_lists_before_start = 1  # task list queries before the HA manager starts the qmigrate
        self.ha_starts_migration = True
        self._powered_off: dict[str, dict] = {}  # node → its entry before power_off
        self._clock = 0x6A000000
        self.checks_schema = True  # a benchmark turns it off: checking 400 guests costs its CPU
        self.latency_s = 0.0
        self.slow_s = 0.0
        self.silent = False
        self.gate = server.Gate()
        self._cert, self._key = server.self_signed(cert_dir)
        self.ca_file = str(self._cert)
        self.fingerprint = server.fingerprint(self._cert)
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def power_off(self, node: str) -> None:
        """The node goes down (a reboot's first half): `/cluster/resources` keeps only its name and
        status `offline`, without stats (the shape the connector meets for a member that is down:
        no sizes, no uptime)."""
        entry = self.entry(f"node/{node}")
        self._powered_off[node] = dict(entry)
        entry.clear()
        entry.update(id=f"node/{node}", node=node, type="node", status="offline")

    def boot(self, node: str, uptime: int) -> None:
        """The node is up again (a reboot's second half): its stats as before, `uptime` seconds after boot."""
        entry = self.entry(f"node/{node}")
        entry.update(self._powered_off.pop(node), uptime=uptime)

    # -- the API -----------------------------------------------------------------

    def handle(self, method: str, path: str, params: dict) -> tuple[int, object]:
        self.requests.append((method, path, params))
        if (method, path) in NEEDS and not self.allowed(*NEEDS[method, path]):
            where, privilege = NEEDS[method, path]
            return 403, f"Permission check failed ({where}, {privilege})"
        if method == "GET" and path == "cluster/resources":
            wanted = {"vm": ("qemu", "lxc"), "node": ("node",)}.get(params.get("type"))
            return 200, [
                e
                for e in self.resources
                if (not wanted or e.get("type") in wanted) and self.allowed(*VISIBLE.get(e.get("type"), ("/", "")))
            ]
        if method == "GET" and path == "version":
            return 200, self.version
        if method == "GET" and path == "access/permissions":
            return 200, self.permissions
        if method == "GET" and path == "cluster/ha/resources":
            return 200, self.ha_resources
        if method == "GET" and path == "cluster/ha/status/manager_status":
            return 200, {
                "manager_status": {
                    "master_node": "node1",
                    "node_status": self.node_status,
                    "service_status": self.services,
                    "timestamp": self._clock,
                },
                "quorum": {"node": "node1", "quorate": "1"},
                "lrm_status": {},
            }
        if method == "GET" and path == "cluster/ha/status/current":
            return 200, self._status_current()
        if method == "GET" and path == "cluster/metrics/export":
            if not self.metrics_export:
                return 501, "Method 'GET /cluster/metrics/export' not implemented"
            rows = {f"node/{n}": r for n, r in self.node_rrd.items()} | self.guest_rrd  # by metric id
            return 200, metrics.export(self.resources, rows, params, self.metrics_time)
        if method == "GET" and path == "cluster/options":
            return (
                (501, "Method 'GET /cluster/options' not implemented") if self.options is None else (200, self.options)
            )
        if method == "GET" and path == "cluster/ha/rules":
            return (501, "Method 'GET /cluster/ha/rules' not implemented") if self.rules is None else (200, self.rules)
        if m := re.fullmatch(r"nodes/([^/]+)/(qemu|lxc)/(\d+)/migrate", path):
            if method == "GET":
                found = self.preconditions.get(f"{m[2]}/{m[3]}")
                return (200, found) if found is not None else (501, "not implemented")
            return self._migrate(m[1], m[2], int(m[3]), params)
        if method == "GET" and (m := re.fullmatch(r"nodes/([^/]+)/(qemu|lxc)", path)):
            return 200, [
                e | self.guest_psi.get(e["id"], {})
                for e in self.resources
                if e.get("type") == m[2] and e.get("node") == m[1]
            ]
        if method == "GET" and (m := re.fullmatch(r"nodes/([^/]+)/(qemu|lxc)/(\d+)/rrddata", path)):
            # A guest without rows of its own answers in the recorded shape: a stopped VM's rows,
            # sizes only (the recording has no running VM's rrddata).
            rows = self.guest_rrd.get(f"{m[2]}/{m[3]}")
            return 200, rows if rows is not None else recorded("qemu-rrddata-hour.stopped-vm-go-proxmox.json")
        if method == "GET" and (m := re.fullmatch(r"nodes/([^/]+)/rrddata", path)):
            return 200, self.node_rrd.get(m[1], [])
        if method == "DELETE" and (m := re.fullmatch(r"nodes/([^/]+)/tasks/([^/]+)", path)):
            return self._stop_task(m[2])
        if m := re.fullmatch(r"nodes/([^/]+)/tasks/([^/]+)/status", path):
            return self._status(m[2])
        if m := re.fullmatch(r"nodes/([^/]+)/tasks/([^/]+)/log", path):
            lines = self.tasks[m[2]]["log"] if m[2] in self.tasks else []
            start, limit = int(params.get("start", 0)), int(params.get("limit", 50))
            return 200, [{"n": i + 1, "t": t} for i, t in enumerate(lines)][start : start + limit]
        if method == "POST" and (m := re.fullmatch(r"nodes/([^/]+)/status", path)):
            return self._power(m[1], params.get("command", ""))
        if m := re.fullmatch(r"nodes/([^/]+)/tasks", path):
            return 200, self._task_list(m[1], params)
        return 501, f"Method '{method} /{path}' not implemented"

    def allowed(self, path: str, privilege: str) -> bool:
        """Whether the token holds `privilege` on `path` (/, /nodes or /vms: PVE lists each of
        them with its effective privileges, or leaves it out when it has none)."""
        return not privilege or privilege in self.permissions.get(path, {})

    def _power(self, node: str, command: str) -> tuple[int, object]:
        """`POST /nodes/{node}/status`: `shutdown` takes the node offline (its resource entry
        and the HA manager's node status), as the cluster reports it once the node is down."""
        if command not in ("shutdown", "reboot"):
            return 400, "parameter verification failed: command: value must be one of reboot, shutdown"
        if self.node_status.get(node) != "online":
            return 595, f"no such node or node offline: {node}"
        if command == "shutdown":
            self.entry(f"node/{node}")["status"] = "offline"
            self.node_status[node] = "unknown"
        return 200, None

    def _status_current(self) -> list[dict]:
        """The entries pve-ha-manager's API2/HA/Status.pm `status` builds: quorum, master, one
        lrm per node ("node3 (maintenance mode, <time>)" when its LRM is in maintenance mode),
        one service per HA resource."""
        when = datetime.datetime.fromtimestamp(self._clock, datetime.UTC).strftime("%a %b %d %H:%M:%S %Y")
        out: list[dict] = [
            {"id": "quorum", "type": "quorum", "node": "node1", "status": "OK", "quorate": 1},
            {
                "id": "master",
                "type": "master",
                "node": "node1",
                "status": f"node1 (active, {when})",
                "timestamp": self._clock,
            },
        ]
        for node in sorted(self.node_status):
            mode = self.lrm_mode.get(node, "active")
            state = "active" if mode == "active" else f"{mode} mode"
            out.append(
                {
                    "id": f"lrm:{node}",
                    "type": "lrm",
                    "node": node,
                    "status": f"{node} ({state}, {when})",
                    "timestamp": self._clock,
                }
            )
        for sid, service in sorted(self.services.items()):
            state = service["state"]
            out.append(
                {
                    "id": f"service:{sid}",
                    "type": "service",
                    "sid": sid,
                    "node": service["node"],
                    "crm_state": state,
                    "state": state,
                    "status": f"{sid} ({service['node']}, {state})",
                    "request_state": "started",
                    "max_restart": 1,
                    "max_relocate": 1,
                    "failback": 1,
                }
            )
        return out

    # -- the server ----------------------------------------------------------------

    def start(self) -> int:
        """Serve on a free port of 127.0.0.1 (also kept as `port`); returns it."""
        self.gate = server.Gate()
        self._server = server.serve(self, self._cert, self._key)
        self.port = self._server.server_address[1]
        return self.port

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self.gate.close()
            self._server = None
