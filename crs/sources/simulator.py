"""A simulated cluster replaying real VM traces: the embedded default and `crs replay`'s world.

The 416 VMs of the Bitbrains trace start crowded onto a few of twelve mixed-size
nodes, so a new user sees the imbalance, a suggestion and its effect within minutes.
Migrations behave as on a real cluster: they take time in proportion to guest
memory, both nodes carry the guest while it moves, it changes node only when the
migration finishes, and some may fail (`fail_rate`). Everything that changes lives
in `state()`, and time comes from the caller, so a worker in another process
resumes exactly where the last one stopped.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np

from ..model import Guest, Node, Pressure, Snapshot
from ..snapshot import MAX_BYTES, MAX_CPUS, MAX_USAGE_PERIOD_S, MIN_NODE_BYTES
from . import config as cfg
from . import trace as traces
from .base import SourceError, TaskStatus

WHERE = "simulator"
KEYS = {
    "cluster",
    "trace",
    "nodes",
    "node_sizes",
    "hot_nodes",
    "seed",
    "round_interval_s",
    "seconds_per_sample",
    "start_sample",
    "migration_mib_s",
    "migration_min_s",
    "migration_max_s",
    "fail_rate",
    "usage_period",
}
# Large, medium and small hosts, cycled, sized so the demo looks like a busy cluster: at
# the trace's midnight the 12 nodes' CPUs are a third used in all (the trace's 416 VMs
# use 50-180 cores over the day) and the crowded large nodes 70-100 %. The VMs' 1179
# vCPUs take 4.1 per CPU thread (crs.fits' default overcommit is 4: the crowded start
# cannot be spread all the way by vCPU count) and their configured memory 36 % of the
# RAM. Memory usage stays low whatever the sizes: the trace reports the VMs' active
# memory, 5 % of their configured memory, and configured memory must fit in RAM.
NODE_SIZES = ({"cpus": 48, "memory_gib": 1536}, {"cpus": 16, "memory_gib": 768}, {"cpus": 8, "memory_gib": 384})
HOT_SHARE = 0.9  # of the VMs start on the hot nodes; the rest spread over the others
FINISHED_TASKS_KEPT = 100  # enough for any poller to see the end of its task
GIB = 2**30


@dataclass(frozen=True)
class SimulatorConfig:
    cluster: str
    trace: str
    nodes: tuple[Node, ...]  # capacity only; usage comes from the guests
    hot_nodes: int  # how many nodes the initial placement crowds
    seed: int
    round_interval_s: float  # caller seconds between balancing rounds
    seconds_per_sample: float  # caller seconds per 5-minute trace sample (the acceleration)
    start_sample: int
    migration_mib_s: float  # memory copied per caller second
    fail_rate: float  # share of migrations that fail half-way
    usage_period: float = 0.0  # trace seconds over which usage is averaged; 0 = the latest sample
    # Bounds of a migration's caller seconds, whatever the guest's memory (the trace's range from
    # 0.1 to 511 GiB would otherwise span 1 s to hours at one rate); 0 = no upper bound.
    migration_min_s: float = 1.0
    migration_max_s: float = 0.0


def parse_config(config: dict[str, Any]) -> SimulatorConfig:
    """Defaults give the demo cluster; every key is optional."""
    config = cfg.refuse_unknown(config, KEYS, WHERE)
    count = cfg.integer(config, "nodes", WHERE, 12, low=2, high=500)
    round_interval = cfg.number(config, "round_interval_s", WHERE, 10.0, low=0.0, exclusive_low=True)
    return SimulatorConfig(
        cluster=cfg.text(config, "cluster", WHERE, "simulator"),
        trace=cfg.text(config, "trace", WHERE, str(traces.DEFAULT_TRACE)),
        nodes=_nodes(count, config.get("node_sizes", list(NODE_SIZES))),
        hot_nodes=cfg.integer(config, "hot_nodes", WHERE, 3, low=1, high=count),
        seed=cfg.integer(config, "seed", WHERE, 0, low=0),
        round_interval_s=round_interval,
        seconds_per_sample=cfg.number(config, "seconds_per_sample", WHERE, round_interval, low=0.0, exclusive_low=True),
        start_sample=cfg.integer(config, "start_sample", WHERE, 0, low=0),
        migration_mib_s=cfg.number(config, "migration_mib_s", WHERE, 1024.0, low=0.0, exclusive_low=True),
        fail_rate=cfg.number(config, "fail_rate", WHERE, 0.0, low=0.0, high=1.0),
        migration_min_s=cfg.number(config, "migration_min_s", WHERE, 1.0, low=0.0, exclusive_low=True),
        migration_max_s=cfg.number(config, "migration_max_s", WHERE, 0.0, low=0.0),
        usage_period=cfg.number(config, "usage_period", WHERE, 0.0, low=0.0, high=MAX_USAGE_PERIOD_S),
    )


def _nodes(count: int, sizes: object) -> tuple[Node, ...]:
    where = f"{WHERE}.node_sizes"
    if not isinstance(sizes, list) or not sizes:
        raise cfg.ConfigError(f"{where}: {sizes!r} is not a non-empty list of {{cpus, memory_gib}}")
    parsed = []
    for i, size in enumerate(sizes):
        size = cfg.refuse_unknown(size, {"cpus", "memory_gib"}, f"{where}[{i}]")
        parsed.append(
            (
                cfg.integer(size, "cpus", f"{where}[{i}]", 0, low=1, high=MAX_CPUS),  # the snapshot's bounds
                cfg.number(size, "memory_gib", f"{where}[{i}]", 0.0, low=MIN_NODE_BYTES / GIB, high=MAX_BYTES / GIB),
            )
        )
    width = max(2, len(str(count)))  # node01..node12: names sort in node order
    return tuple(
        Node(f"node{i + 1:0{width}d}", cpus, gib * GIB)
        for i, (cpus, gib) in ((i, parsed[i % len(parsed)]) for i in range(count))
    )


def initial_placement(trace: traces.Trace, nodes: tuple[Node, ...], hot_nodes: int, seed: int) -> dict[str, str]:
    """Most VMs on the `hot_nodes` largest nodes, the rest on the others: a cluster that needs balancing.

    It is the cluster an admin has after adding new nodes next to the old big ones.
    Within each group a VM goes where its memory fills the least share of the node,
    so no node gets more configured memory than a real admin would tolerate.
    """
    rng = np.random.default_rng(seed)
    by_size = sorted(nodes, key=lambda n: (-n.memory_bytes, -n.cpus, n.name))
    groups = (by_size[:hot_nodes], by_size[hot_nodes:] or by_size[:hot_nodes])
    filled = {n.name: 0.0 for n in nodes}
    placement = {}
    for i in rng.permutation(len(trace.vm_ids)):
        group = groups[0] if rng.random() < HOT_SHARE else groups[1]
        node = min(group, key=lambda n: ((filled[n.name] + trace.memory_bytes[i]) / n.memory_bytes, n.name))
        filled[node.name] += trace.memory_bytes[i]
        placement[f"vm:{trace.vm_ids[i]}"] = node.name
    return dict(sorted(placement.items(), key=lambda item: int(item[0][3:])))


class Simulator:
    """The `Source` for a simulated cluster; see the module docstring."""

    def __init__(self, config: SimulatorConfig, state: dict[str, Any] | None = None):
        self.config = config
        self.trace = traces.load(config.trace)
        self._names = {n.name for n in config.nodes}
        if state is None:
            state = {
                "started_at": None,
                "next_task": 1,
                "tasks": {},
                "placement": initial_placement(self.trace, config.nodes, config.hot_nodes, config.seed),
            }
        self._state = _checked_state(copy.deepcopy(state), set(self._sids()), self._names)

    def collect(self, now: float) -> Snapshot:
        """Usage is the mean over the last `usage_period` of trace time (the samples whose time
        falls in it, at least the latest); pressure is what the latest sample's contention
        stalls now, as Proxmox's status reports its last seconds."""
        self._advance(now)
        sample = self._sample(now)
        moving = {t["sid"]: t["target"] for t in self._state["tasks"].values() if t["state"] == "running"}
        now_guests = tuple(
            self._guest(i, sid, sample, [sample[0]], moving.get(sid)) for i, sid in enumerate(self._sids())
        )
        stalls = {n.name: _stall(n) for n in _with_usage(self.config.nodes, now_guests)}
        window = self._window(now)
        guests = (
            now_guests
            if len(window) == 1
            else tuple(self._guest(i, sid, sample, window, moving.get(sid)) for i, sid in enumerate(self._sids()))
        )
        down = set(self._state.get("maintenance", []))
        nodes = tuple(
            replace(n, pressure=stalls[n.name], maintenance=n.name in down)
            for n in _with_usage(self.config.nodes, guests)
        )
        return Snapshot(
            nodes,
            _with_pressure(nodes, guests),
            cluster=self.config.cluster,
            taken_at=datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            clock_s=self.trace_seconds(now),
        )

    def trace_seconds(self, now: float) -> float:
        """The simulator's own clock: trace seconds since the trace's first sample (growing past a day)."""
        started = self._state["started_at"] if self._state["started_at"] is not None else now
        elapsed = max(0.0, now - started)
        return (self.config.start_sample + elapsed / self.config.seconds_per_sample) * traces.SAMPLE_SECONDS

    def _window(self, now: float) -> list[int]:
        """The samples whose time lies in the last `usage_period` trace seconds, latest first."""
        t = self.trace_seconds(now)
        latest = math.floor(t / traces.SAMPLE_SECONDS)
        count = max(1, latest - math.floor((t - self.config.usage_period) / traces.SAMPLE_SECONDS))
        return [(latest - j) % self.trace.samples for j in range(min(count, self.trace.samples))]

    def migrate(self, sid: str, target: str, now: float) -> str:
        self._advance(now)
        placement = self._state["placement"]
        if sid not in placement:
            raise SourceError(f"migrate: {sid!r} is not a guest of this cluster")
        if target not in self._names:
            raise SourceError(f"migrate: {target!r} is not a node of this cluster")
        if placement[sid] == target:
            raise SourceError(f"migrate: {sid} is already on {target}")
        if target in self._state.get("maintenance", []):
            raise SourceError(f"migrate: {target} is in maintenance and takes no guests")
        if any(t["sid"] == sid and t["state"] == "running" for t in self._state["tasks"].values()):
            raise SourceError(f"migrate: {sid} is already migrating")
        number = self._state["next_task"]
        self._state["next_task"] = number + 1
        # Starts per route, kept past the pruning of finished tasks: a caller that started one
        # migration twice (a worker killed between the start and its record) shows as a 2.
        route = f"{sid} {placement[sid]}>{target}"
        starts = self._state.setdefault("starts", {})
        starts[route] = starts.get(route, 0) + 1
        memory = float(self.trace.memory_bytes[self._sids().index(sid)])
        duration = max(self.config.migration_min_s, memory / (self.config.migration_mib_s * 2**20))
        if self.config.migration_max_s:
            duration = min(duration, max(self.config.migration_max_s, self.config.migration_min_s))
        fails = np.random.default_rng([self.config.seed, number]).random() < self.config.fail_rate
        task_id = f"sim:{number}"
        self._state["tasks"][task_id] = {
            "sid": sid,
            "source": placement[sid],
            "target": target,
            "state": "running",
            "reason": "",
            "started_at": now,
            "ends_at": now + (duration / 2 if fails else duration),
            "fails": bool(fails),
        }
        return task_id

    def task_status(self, task_id: str, now: float) -> TaskStatus:
        self._advance(now)
        task = self._state["tasks"].get(task_id)
        if task is None:
            raise SourceError(f"task {task_id!r}: unknown to this simulator (or long finished)")
        if task["state"] == "done":
            return TaskStatus("done", 1.0)
        span = task["ends_at"] - task["started_at"]
        progress = min(1.0, (now - task["started_at"]) / span) * (0.5 if task["fails"] else 1.0)
        return TaskStatus(task["state"], progress, task["reason"])

    def abort(self, task_id: str, now: float) -> None:
        """A running migration stops at once and fails; its guest stays on its source."""
        self._advance(now)
        task = self._state["tasks"].get(task_id)
        if task is not None and task["state"] == "running":
            task.update(state="failed", reason="migration aborted: emergency stop")

    def maintenance(self, node: str, on: bool, now: float) -> None:
        """As Proxmox's maintenance mode: the node takes no guests and carries no load for the
        balancer; its guests stay until someone moves them (the product's evacuation plan)."""
        if node not in self._names:
            raise SourceError(f"maintenance: {node!r} is not a node of this cluster")
        self._advance(now)
        down = set(self._state.get("maintenance", []))
        self._state["maintenance"] = sorted(down | {node} if on else down - {node})

    def shutdown(self, node: str, now: float) -> None:
        """A simulated node has no power to switch: the admin powers a real one off by hand."""
        raise SourceError(f"shutdown of {node}: the simulator cannot power a node off; power it off by hand")

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self._state)

    def _sids(self) -> list[str]:
        return [f"vm:{i}" for i in self.trace.vm_ids]

    def _sample(self, now: float) -> tuple[int, float]:
        """The trace sample shown at `now` and how far (0 ≤ share < 1) it is towards the next;
        the trace day loops, as days do."""
        if self._state["started_at"] is None:
            self._state["started_at"] = now
        elapsed: float = max(0.0, now - self._state["started_at"])
        position = elapsed / self.config.seconds_per_sample
        whole = math.floor(position)
        return (self.config.start_sample + whole) % self.trace.samples, position - whole

    def _guest(self, i: int, sid: str, sample: tuple[int, float], window: list[int], target: str | None) -> Guest:
        """Usage between two samples moves in a straight line from one to the next, so a
        round between them sees the load shift rather than the same figures again (the
        demo plays a sample over several rounds); on a sample it is that sample exactly.
        Over a `window` of samples (latest first, the latest being `sample`'s), the mean of
        that value and the older samples'."""
        t = self.trace
        at, share = sample
        following = (at + 1) % t.samples

        def usage(series: np.ndarray) -> float:
            value = float(series[i, at])
            latest = value if share == 0.0 else value + share * (float(series[i, following]) - value)
            older = window[1:]
            return latest if not older else (latest + float(series[i, older].sum())) / (1 + len(older))

        return Guest(
            sid,
            self._state["placement"][sid],
            "migrate" if target else "started",
            cores=float(t.cores[i]),
            memory_bytes=float(t.memory_bytes[i]),
            cpu_usage=usage(t.cpu_usage),
            mem_usage_bytes=usage(t.mem_usage_bytes),
            target=target,
        )

    def _advance(self, now: float) -> None:
        """Finish every migration due by `now`, in the order they end: success moves the guest."""
        tasks = self._state["tasks"]
        due = sorted(
            (t["ends_at"], int(k[4:]), k) for k, t in tasks.items() if t["state"] == "running" and t["ends_at"] <= now
        )
        for _, _, key in due:
            task = tasks[key]
            if task["fails"]:
                task.update(
                    state="failed", reason=f"migration aborted: simulated failure (fail_rate {self.config.fail_rate:g})"
                )
            else:
                task["state"] = "done"
                self._state["placement"][task["sid"]] = task["target"]
        finished = sorted((int(k[4:]) for k, t in tasks.items() if t["state"] != "running"))
        for number in finished[:-FINISHED_TASKS_KEPT]:
            del tasks[f"sim:{number}"]


def _with_usage(nodes: tuple[Node, ...], guests: tuple[Guest, ...]) -> tuple[Node, ...]:
    """Measured node usage, as pvestatd reports it: a moving guest loads both of its nodes."""
    cpu = {n.name: 0.0 for n in nodes}
    mem = {n.name: 0.0 for n in nodes}
    for g in guests:
        for name in cast(set[str], {g.node, g.target} - {None}):
            cpu[name] += g.cpu_usage
            mem[name] += g.mem_usage_bytes
    return tuple(
        Node(n.name, n.cpus, n.memory_bytes, cpu_usage=cpu[n.name], mem_usage_bytes=mem[n.name]) for n in nodes
    )


def _with_pressure(nodes: tuple[Node, ...], guests: tuple[Guest, ...]) -> tuple[Guest, ...]:
    """Pressure as contention makes it: where a node's CPU demand exceeds its threads, every
    guest on it waits the excess share of the time ((demand − threads) ÷ demand), and memory
    demand beyond RAM stalls them the same way; nodes report the same shares. The trace has
    no stalls of its own, so this is what a saturated node would show, and nothing below."""
    shares = {n.name: n.pressure for n in nodes}
    return tuple(replace(g, pressure=shares[g.node]) for g in guests)


def _stall(node: Node) -> Pressure:
    cpu_demand, mem_demand = node.cpu_usage or 0.0, node.mem_usage_bytes or 0.0
    cpu = max(0.0, cpu_demand - node.cpus) / cpu_demand if cpu_demand else 0.0
    memory = max(0.0, mem_demand - node.memory_bytes) / mem_demand if mem_demand else 0.0
    return Pressure(cpu_some=cpu, memory_some=memory)


def _checked_state(state: object, sids: set[str], nodes: set[str]) -> dict[str, Any]:
    """A persisted state that still fits the config; a changed trace or node count needs a reset."""
    where = f"{WHERE} state"
    if not isinstance(state, dict) or not {"started_at", "next_task", "tasks", "placement"} <= set(state):
        raise cfg.ConfigError(f"{where}: expected started_at, next_task, tasks and placement")
    placement = state["placement"]
    if not isinstance(placement, dict) or set(placement) != sids:
        raise cfg.ConfigError(f"{where}.placement: its guests differ from the trace's; reset the cluster")
    stray = sorted(set(placement.values()) - nodes)
    if stray:
        raise cfg.ConfigError(f"{where}.placement: node {stray[0]!r} is no longer configured; reset the cluster")
    return state
