"""A small fake Proxmox VE API over real HTTPS, for the connector's tests.

It serves the responses recorded from real clusters (fixtures/pve-api/responses)
plus the entries the recordings lack, built from reference/pve-api.md: an HA-managed
VM, a container with string numbers, HA status and rules. Migrations change its state
the way PVE does: a `qmigrate` task that holds the `migrate` lock and moves the guest
when it ends; for an HA guest an `hamigrate` task first, then the HA manager's
`qmigrate` a little later. Each status poll of a running task advances it one step,
so tests are deterministic without sleeping. A guest whose entry has a `lock` (a test sets
it, as a backup does) is refused as Proxmox refuses it: "VM is locked (backup)".
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pve_schema

RESPONSES = Path(__file__).resolve().parent / "fixtures" / "pve-api" / "responses"
TOKEN = "root@pam!crs=0b8f2f5e-6a4c-4c4e-9a57-3b1d2c9d7e11"
GIB = 2**30
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
    )
}
VISIBLE = {"node": ("/nodes", "Sys.Audit"), "qemu": ("/vms", "VM.Audit"), "lxc": ("/vms", "VM.Audit")}


def recorded(name: str):
    return json.loads((RESPONSES / name).read_text())["data"]


class FakePve:
    """State of the fake cluster; tests read and change it directly."""

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
        # its `returns` refuses (tests/pve_schema.py). The `pve` fixture fails a test that leaves any.
        self.strays: list[str] = []
        self.steps_per_migration = 3  # status polls a migration stays running
        self.fail_next: str | None = None  # exit status of the next migration, e.g. "migration aborted"
        self.lock_next: str | None = None  # a lock the next guest asked to migrate takes first (a backup's race)
        self.ha_lists_before_start = 1  # task list queries before the HA manager starts the qmigrate
        self.ha_starts_migration = True
        self._powered_off: dict[str, dict] = {}  # node → its entry before power_off
        self._clock = 0x6A000000
        self._cert, self._key = _self_signed(cert_dir)
        self.ca_file = str(self._cert)
        self.fingerprint = _fingerprint(self._cert)
        self._server: ThreadingHTTPServer | None = None

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

    def entry(self, resource_id: str) -> dict:
        return next(e for e in self.resources if e.get("id") == resource_id)

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

    def _migrate(self, node: str, kind: str, vmid: int, params: dict) -> tuple[int, object]:
        guest = next((e for e in self.resources if e.get("id") == f"{kind}/{vmid}"), None)
        if guest is None or guest["node"] != node:
            return 500, f"Configuration file 'nodes/{node}/{kind}/{vmid}.conf' does not exist"
        target = params.get("target")
        if target == node:
            return 500, f"target is local node ({target})"
        if self.node_status.get(target) != "online":
            return 500, f"no such cluster node '{target}'"
        if kind == "lxc" and guest["status"] == "running" and params.get("restart") != "1":
            return 500, "CT is running - use online or restart migration"
        sid = f"{'vm' if kind == 'qemu' else 'ct'}:{vmid}"
        if self.lock_next:
            guest["lock"], self.lock_next = self.lock_next, None
        if lock := guest.get("lock"):  # PVE::AbstractConfig::check_lock
            if kind == "qemu":  # qemu-server's migrate_vm checks before forking its worker
                return 500, f"VM is locked ({lock})"
            # pve-container's checks in the task (PVE::LXC::Migrate::prepare): the task fails
            upid = self._task(node, "vzmigrate", vmid, {"sid": sid, "target": target})
            self.tasks[upid] |= {"status": "stopped", "exitstatus": f"CT is locked ({lock})", "endtime": self._clock}
            return 200, upid
        if guest.get("hastate"):
            upid = self._task(node, "hamigrate", vmid, {"sid": sid, "target": target, "steps": 0})
        else:
            upid = self._start_migration(guest, sid, target)
        return 200, upid

    def _start_migration(self, guest: dict, sid: str, target: str) -> str:
        guest["lock"] = "migrate"
        if guest.get("hastate"):
            guest["hastate"] = "migrate"
            self.services[sid] |= {"state": "migrate", "target": target}
        kind = "qmigrate" if guest["type"] == "qemu" else "vzmigrate"
        return self._task(
            guest["node"],
            kind,
            guest["vmid"],
            {
                "sid": sid,
                "target": target,
                "steps": self.steps_per_migration,
                "memory": guest["maxmem"],
                "exit": self.fail_next or "OK",
            },
        )

    def _task(self, node: str, kind: str, vmid: int, extra: dict) -> str:
        self._clock += 2
        pid = 0x1F000 + len(self.tasks)
        upid = f"UPID:{node}:{pid:08X}:{0x10F9374C:08X}:{self._clock:08X}:{kind}:{vmid}:root@pam!crs:"
        self.tasks[upid] = {
            "upid": upid,
            "node": node,
            "type": kind,
            "id": str(vmid),
            "user": "root@pam!crs",
            "pid": pid,
            "pstart": 0x10F9374C,
            "starttime": self._clock,
            "status": "running",
            "log": [f"starting {kind} of {vmid}"],
            **extra,
        }
        if kind == "hamigrate":
            self.tasks[upid] |= {"status": "stopped", "exitstatus": "OK", "endtime": self._clock}
            self.tasks[upid]["log"].append(f"requesting HA migration of {extra['sid']} to node {extra['target']}")
        if kind in ("qmigrate", "vzmigrate") and "exit" in extra:
            self.fail_next = None
        return upid

    def _status(self, upid: str) -> tuple[int, object]:
        task = self.tasks.get(upid)
        if task is None:
            return 500, "no such task"
        if task["status"] == "running":
            self._step(task)
        keys = ("upid", "node", "pid", "pstart", "starttime", "type", "id", "user", "status", "exitstatus")
        return 200, {k: task[k] for k in keys if k in task}

    def _stop_task(self, upid: str) -> tuple[int, object]:
        """As pvedaemon stops a task: the migration ends interrupted, the guest stays on its source."""
        task = self.tasks.get(upid)
        if task is None:
            return 500, "no such task"
        if task["status"] == "running":
            kind = "qemu" if task["type"] == "qmigrate" else "lxc"
            self.entry(f"{kind}/{task['id']}").pop("lock", None)
            task |= {"status": "stopped", "exitstatus": "interrupted by signal", "endtime": self._clock}
        return 200, None

    def _step(self, task: dict) -> None:
        task["steps"] -= 1
        done = task["steps"] <= 0
        moved = task["memory"] * (1 - max(task["steps"], 0) / self.steps_per_migration)
        task["log"].append(
            f"migration active, transferred {moved / GIB:.1f} GiB of {task['memory'] / GIB:.1f} GiB VM-state, 1.1 GiB/s"
        )
        if not done:
            return
        kind, vmid = ("qemu" if task["type"] == "qmigrate" else "lxc"), task["id"]
        guest = self.entry(f"{kind}/{vmid}")
        guest.pop("lock", None)
        task |= {"status": "stopped", "exitstatus": task["exit"], "endtime": self._clock}
        if task["exit"] == "OK":
            guest["node"] = task["target"]
        if guest.get("hastate"):
            guest["hastate"] = "started"
            self.services[task["sid"]] = {"node": guest["node"], "state": "started", "uid": "b1"}

    def _task_list(self, node: str, params: dict) -> list[dict]:
        for task in [t for t in self.tasks.values() if t["type"] == "hamigrate" and not t.get("picked_up")]:
            if self.ha_starts_migration and task["node"] == node:
                if self.ha_lists_before_start > 0:
                    self.ha_lists_before_start -= 1
                    continue
                task["picked_up"] = True
                guest = next(e for e in self.resources if e.get("vmid") == int(task["id"]) and "type" in e)
                self._start_migration(guest, task["sid"], task["target"])
        since, vmid = int(params.get("since", 0)), params.get("vmid")
        return [
            {k: v for k, v in t.items() if k not in ("log", "steps", "memory", "exit", "sid", "target")}
            for t in self.tasks.values()
            if t["node"] == node and t["starttime"] >= since and (vmid is None or t["id"] == vmid)
        ]

    # -- the server ----------------------------------------------------------------

    def start(self) -> int:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._answer("GET", parse_qs(urlsplit(self.path).query))

            def do_DELETE(self):
                self._answer("DELETE", parse_qs(urlsplit(self.path).query))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                self._answer("POST", parse_qs(body))

            def _answer(self, method, query):
                path = urlsplit(self.path).path.removeprefix("/api2/json/")
                if self.headers.get("Authorization") != f"PVEAPIToken={TOKEN}":
                    status, data = 401, "authentication failure"
                else:
                    params = {k: v[-1] for k, v in query.items()}
                    status, data = fake.handle(method, path, params)
                    fake.strays += pve_schema.request_errors(method, path, params)
                    if status == 200:
                        fake.strays += pve_schema.answer_errors(method, path, data)
                body = json.dumps(
                    {"data": data if status == 200 else None} | ({} if status == 200 else {"message": data})
                ).encode()
                self.send_response(status, None if status == 200 else str(data))
                self.send_header("Content-Type", "application/json;charset=UTF-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass  # keep the test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self._cert, self._key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _fingerprint(cert_file: Path) -> str:
    """The certificate's SHA-256, AB:CD:… as `pvenode cert info` shows it (worked out here with
    `cryptography`, not with the code under test)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    return x509.load_pem_x509_certificate(cert_file.read_bytes()).fingerprint(hashes.SHA256()).hex(":").upper()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, so the connector runs with TLS verification on in tests."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-pve")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "pve.pem", directory / "pve.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
