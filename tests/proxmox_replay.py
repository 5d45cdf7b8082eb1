"""Replays Proxmox's converted HA-manager tests (tests/fixtures/proxmox) through the engine.

A small stand-in for the HA manager's simulator: it keeps service states, turns fixture
events into the manager's reactions (recovery, maintenance evacuation, failback,
rebalance-on-start, balancing rounds every 20 s) and asks `crs.placement` and
`crs.balancer` for every decision. It decides nothing itself; it only sequences.

Sequencing as `Manager.pm manage` does (reference/proxmox-crs.md §6.1a): one round walks
the services in sid order and walks again while any changed state, so a service started in
a round and standing where a rule forbids is moved in that round; the rounds between two
commands (100 s, a round every 20 s) carry on what becomes possible once moves settle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from crs import balancer
from crs.decision import RoundState
from crs.model import Guest, Node, Settings, Snapshot
from crs.placement import select_node
from crs.rules import command_motion, compile_rules
from crs.snapshot import parse_rule

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "proxmox"
ROUND = 20
COMMAND_INTERVAL = 100


def fixture_paths() -> list[Path]:
    return sorted(FIXTURES.glob("*.json"))


@dataclass
class Service:
    sid: str
    node: str
    state: str  # the HA manager's state of the service
    cores: float
    memory_bytes: float
    cpu_usage: float = 0.0
    mem_usage_bytes: float = 0.0
    running: bool = True
    target: str | None = None
    maintenance_node: str | None = None
    queued_at: int = 0
    requested: str = "started"  # the configured state: started, stopped (recovered too) or disabled
    already_running: bool = False
    failback: bool = True
    command: tuple[str, str] | None = None  # an admin's migrate/relocate/stop, (action, target), taken next round
    start_failures: int = 0  # a failing test agent (fa:): its first starts fail, on `fails_on` or anywhere
    fails_on: str | None = None
    start_tries: int = 0
    started_on: str | None = None  # where the LRM last started it
    start_failed: bool = False  # the LRM reported a failed start: the relocation policy applies
    failed_nodes: list[str] = field(default_factory=list)


@dataclass
class Manager:
    """The cluster as the HA manager sees it, and the decisions it logged."""

    fixture: dict
    scale: str = "normalized"
    nodes: dict[str, dict] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    decisions: list[tuple[str, str, str | None]] = field(default_factory=list)
    migrations: list[dict] = field(default_factory=list)
    hold: RoundState = RoundState()

    def __post_init__(self) -> None:
        for n in self.fixture["nodes"]:
            self.nodes[n["name"]] = {
                "cpus": n["cpus"],
                "memory": n["memory_bytes"],
                "online": n["online"],
                "maintenance": False,
            }
        for s in self.fixture["services"]:
            self.services[s["sid"]] = _service(s)
        opts = self.fixture["options"]
        self.settings = Settings(
            mode=self.fixture["mode"],
            auto_rebalance=opts.get("ha-auto-rebalance", False),
            threshold=opts.get("ha-auto-rebalance-threshold", 0.3),
            hold_duration=opts.get("ha-auto-rebalance-hold-duration", 3),
            margin=opts.get("ha-auto-rebalance-margin", 0.1),
            method=opts.get("ha-auto-rebalance-method", "bruteforce"),
            imbalance_scale=self.scale,
            rebalance_on_start=opts.get("ha-rebalance-on-start", False),
        )
        names = {s.sid for s in self.services.values()} | {
            ev["sid"] for t in self.fixture.get("timeline", []) for ev in t["events"] if ev["type"] == "service_added"
        }
        node_names = set(self.nodes)
        self.rules = tuple(parse_rule(r, f"rules[{i}]", names, node_names) for i, r in enumerate(self.fixture["rules"]))

    # -- the engine's view -------------------------------------------------------

    def snapshot(self) -> Snapshot:
        nodes = tuple(
            Node(name, n["cpus"], n["memory"], n["online"], n["maintenance"]) for name, n in self.nodes.items()
        )
        guests = tuple(
            Guest(
                s.sid,
                s.node,
                s.state,
                s.cores,
                s.memory_bytes,
                s.cpu_usage,
                s.mem_usage_bytes,
                target=s.target,
                running=s.running,
            )
            for s in sorted(self.services.values(), key=lambda s: s.sid)
        )
        sids = {g.sid for g in guests}
        rules = tuple(r for r in self.rules if all(sid in sids for sid in r.resources))
        return Snapshot(nodes, guests, rules, self.settings)

    def select(self, sid: str, preference: str) -> str | None:
        snap = self.snapshot()
        service = self.services[sid]
        return select_node(
            snap,
            sid,
            preference,  # type: ignore[arg-type]
            rules=compile_rules(snap),
            maintenance_node=service.maintenance_node,
            failback=service.failback,
            tried=service.failed_nodes,
        )

    # -- one manager round: per-service state machine, in sid order ----------------

    def manage(self) -> bool:
        """One round; True when any service changed state in it."""
        changed_in_round = False
        changed = True
        while changed:
            changed = False
            for sid in sorted(self.services):
                service = self.services[sid]
                before = service.state
                if service.state == "recovery":
                    if service.requested == "disabled":
                        service.state = "stopped"  # a disabled service is not recovered any more
                    else:
                        self._recover(service)
                elif service.state == "request_start":
                    self._start(service)
                elif service.state == "started":
                    if service.requested != "started":
                        service.state = "request_stop"
                    elif service.command:
                        self._take_command(service)
                    elif service.start_failed:
                        self._relocate_after_failed_start(service)
                    else:
                        self._keep_placed(service)
                elif service.state == "stopped":
                    if service.command:
                        self._take_command(service, log=False)
                    elif service.requested == "started":
                        service.state = "request_start"
                if service.state != before:
                    changed, service.command = True, None  # a state change drops a pending command
            changed_in_round |= changed
        self._finish_motions()
        for service in self.services.values():
            if service.state == "request_stop":
                service.state = "stopped"  # the LRM has confirmed the stop by the next round
            if service.start_failures and service.state == "started" and service.started_on != service.node:
                self._lrm_start(service)
        return changed_in_round

    def _lrm_start(self, service: Service) -> None:
        """The LRM starts a failing test agent: one try and `max_restart` (1) retries on the node."""
        for _ in range(2):
            if service.fails_on in (None, service.node):
                service.start_tries += 1
                if service.start_failures >= service.start_tries:
                    continue
            service.start_tries, service.started_on, service.failed_nodes = 0, service.node, []
            return
        service.start_failed = True

    def _relocate_after_failed_start(self, service: Service) -> None:
        """Proxmox's relocation policy: up to `max_relocate` (1) other nodes, `try-next`."""
        service.start_failed = False
        service.failed_nodes.append(service.node)
        if len(service.failed_nodes) > 1:
            raise AssertionError(f"{service.sid} would enter the error state: not in the fixture format")
        target = self.select(service.sid, "try-next")
        if target is not None and target != service.node:
            self._queue_motion(service, target)

    def settle(self) -> None:
        """The rounds until the next command, or until nothing changes any more."""
        for _ in range(COMMAND_INTERVAL // ROUND):
            if not self.manage():
                return

    def _recover(self, service: Service) -> None:
        target = self.select(service.sid, "best-score")
        if target is None:
            self.decisions.append((service.sid, "recover-failed", None))
            return
        self.decisions.append((service.sid, "recover", target))
        service.node = target
        if service.requested == "started":
            service.state, service.running = "started", self.settings.mode != "dynamic"
        else:  # a requested stop survives the recovery
            service.state, service.running = "request_stop", False

    def _start(self, service: Service) -> None:
        service.running = service.already_running
        if not self.settings.rebalance_on_start:
            service.state = "started"
            return
        target = self.select(service.sid, "best-score")
        self.decisions.append((service.sid, "start-placement", target))
        if target is None or target == service.node or service.already_running:
            service.state = "started"
            if target not in (None, service.node):
                self.decisions.append((service.sid, "rebalance-on-start-ignored", None))
            return
        service.state, service.target = "request_start_balance", target

    def _keep_placed(self, service: Service) -> None:
        target = self.select(service.sid, "none")
        if target is None or target == service.node:
            if service.maintenance_node == service.node:
                service.maintenance_node = None
            return
        if service.maintenance_node not in (None, target, service.node):
            service.maintenance_node = None  # placed elsewhere meanwhile: the fallback is dropped
        self._queue_motion(service, target)

    def _take_command(self, service: Service, log: bool = True) -> None:
        (action, target), service.command = service.command, None
        if action == "stop":  # a stop command also sets the requested state
            if service.state == "started":
                service.state, service.requested = "request_stop", "stopped"
        elif self._online(target) and target != service.node:
            self._queue_motion(service, target, action=action, log=log)

    def _queue_motion(self, service: Service, target: str, now: int = 0, action: str = "", log: bool = True) -> None:
        action = action or ("migrate" if service.sid.startswith("vm:") else "relocate")
        if log:
            self.decisions.append((service.sid, action, target))
        service.state, service.target, service.queued_at = action, target, now

    def _online(self, node: str) -> bool:
        return self.nodes[node]["online"] and not self.nodes[node]["maintenance"]

    def _finish_motions(self, now: int | None = None) -> None:
        for service in self.services.values():
            if service.target and (now is None or now >= service.queued_at + ROUND):
                service.node, service.target = service.target, None
                service.state = "started" if service.requested == "started" else "stopped"
                if service.maintenance_node == service.node:
                    service.maintenance_node = None

    # -- fixture events ------------------------------------------------------------

    def event(self, ev: dict) -> None:
        kind = ev["type"]
        nodes = ev["nodes"] if "nodes" in ev else [ev.get("node")]  # "nodes": several in the same round
        if kind == "node_failure":
            for node in nodes:
                self.nodes[node]["online"] = False
            for s in self.services.values():
                if s.node in nodes and s.requested != "disabled":
                    s.state = "recovery"
        elif kind in ("node_recovered", "node_online"):
            for node in nodes:
                self.nodes[node].update(online=True, maintenance=False)
        elif kind == "node_maintenance":
            for node in nodes:
                self.nodes[node]["maintenance"] = True
            for s in self.services.values():
                if s.node in nodes and s.state == "started":
                    s.maintenance_node = s.node
        elif kind == "initial_start":
            for s in self.services.values():
                s.state = "request_start" if s.requested == "started" else "request_stop"
        elif kind == "service_commands":  # one batch, read together before the round
            for command in ev["commands"]:
                if command["command"] in ("migrate", "relocate"):
                    self._command(command["sid"], command["command"], command["target"])
                elif command["command"] == "stop":
                    self.services[command["sid"]].command = ("stop", "")
                else:  # the requested state: started, stopped or disabled
                    self.services[command["sid"]].requested = command["command"]
        elif kind == "service_added":
            spec = ev["service"]
            service = _service(spec)
            service.state = "request_start" if spec["state"] == "started" else "stopped"
            service.already_running = spec.get("already_running", False)
            self.services[spec["sid"]] = service
        else:
            raise AssertionError(f"unknown fixture event {kind}")
        self.settle()
        for s in self.services.values():  # events are far apart: the LRM has confirmed the starts
            s.running = True

    def _command(self, sid: str, action: str, target: str) -> None:
        """An admin's migrate/relocate: checked and queued as the manager reads its commands."""
        service = self.services[sid]
        if not self._online(target) or target == service.node:
            return
        snap = self.snapshot()
        refused_by, along = command_motion(compile_rules(snap), sid, target, {g.sid: g for g in snap.guests})
        if refused_by is None:
            for moving in [sid, *along]:
                self.services[moving].command = (action, target)

    def placement(self) -> dict[str, str | None]:
        return {sid: (None if s.state == "recovery" else s.node) for sid, s in sorted(self.services.items())}

    # -- balancing rounds ----------------------------------------------------------

    def rebalance_rounds(self, ev: dict) -> None:
        timeline = {t["sim_time"]: t["events"] for t in self.fixture.get("timeline", [])}
        for s in self.services.values():
            if s.state in ("migrate", "relocate"):
                s.queued_at = ev["first_round_sim_time"]  # the LRM picks it up in the first round
        initial = self.fixture.get("initial_service_status", {})
        for sid, status in initial.items():
            service = self.services[sid]
            service.state, service.target = status["state"], status.get("target")
            if service.target:
                service.queued_at = ev["first_round_sim_time"]
        if not initial:
            for s in self.services.values():
                s.state = "request_start" if s.state == "started" else "stopped"
        for now in range(ev["first_round_sim_time"], ev["until_sim_time"] + 1, ev["round_interval_sim_seconds"]):
            for change in timeline.get(now, []):
                self._timeline_event(change)
            for s in self.services.values():  # the LRM has confirmed last round's starts
                if s.state == "started":
                    s.running = True
            self._balance(now)
            self._finish_motions(now)
            for s in self.services.values():
                if s.state == "request_start":
                    s.state, s.running = "started", False

    def _timeline_event(self, change: dict) -> None:
        if change["type"] == "usage_change":
            service = self.services[change["sid"]]
            for key, value in change["set"].items():
                setattr(service, key, value)
        elif change["type"] == "service_added":
            service = _service(change)
            service.state, service.running = "request_start", False
            self.services[change["sid"]] = service
        else:
            raise AssertionError(f"unknown timeline event {change['type']}")

    def _balance(self, now: int) -> None:
        result = balancer.run_round(self.snapshot(), self.hold, proxmox_gate=True)
        self.hold = result.state
        if result.decision != "migrate" or result.move is None:
            return
        move = result.move
        self.migrations.append(
            {
                "sim_time": now,
                "leader": move.leader,
                "moves": list(move.guests),
                "target": move.target,
                "imbalance_before": round(result.imbalance, 2),
                "imbalance_after": round(move.imbalance_after, 2),
            }
        )
        for sid in move.guests:
            self._queue_motion(self.services[sid], move.target, now)


def _service(spec: dict) -> Service:
    return Service(
        spec["sid"],
        spec["node"],
        spec.get("state", "started"),
        spec.get("cores", 4.0),
        spec.get("memory_bytes", 4096 * 2**20),
        spec.get("cpu_usage", 0.0),
        spec.get("mem_usage_bytes", 0.0),
        requested=spec.get("state", "started"),
        failback=spec.get("failback", True),
        start_failures=spec.get("start_failures", 0),
        fails_on=spec.get("fails_on"),
    )


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def run_placement(fixture: dict) -> tuple[Manager, list[tuple[dict, dict]]]:
    """Apply the fixture's event(s); returns the manager and (expected, got) per step."""
    manager = Manager(fixture)
    if fixture["event"].get("type") != "sequence" or fixture["steps"][0]["event"]["type"] != "initial_start":
        for s in manager.services.values():
            s.state = {"disabled": "stopped"}.get(s.state, s.state)
    checks = []
    steps = (
        fixture["steps"]
        if fixture["event"]["type"] == "sequence"
        else [{"event": fixture["event"], "expected": fixture["expected"]}]
    )
    for step in steps:
        manager.event(step["event"])
        checks.append((step["expected"], manager.placement()))
    return manager, checks


def run_rebalance(fixture: dict, scale: str) -> Manager:
    manager = Manager(fixture, scale=scale)
    manager.rebalance_rounds(fixture["event"])
    return manager


__all__ = ["Manager", "fixture_paths", "load", "run_placement", "run_rebalance", "replace"]
