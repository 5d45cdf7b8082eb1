"""The engine's plain, frozen view of a cluster: nodes, guests, rules and the policy.

Units are in the names (`memory_bytes`, `cpu_usage` in cores). A `Snapshot` is built
once by `crs.snapshot.parse`, which validates everything; code that receives one may
trust it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

Mode = Literal["basic", "static", "dynamic"]
Method = Literal["bruteforce", "topsis"]
Scale = Literal["normalized", "raw"]
Objective = Literal["even", "pressure", "both"]
Preset = Literal["proxmox", "product"]
Containers = Literal["never", "restart"]

MODES: tuple[str, ...] = ("basic", "static", "dynamic")
METHODS: tuple[Method, ...] = ("bruteforce", "topsis")
SCALES: tuple[str, ...] = ("normalized", "raw")
OBJECTIVES: tuple[str, ...] = ("even", "pressure", "both")
ForecastUse = Literal["off", "on"]
FORECAST_USES: tuple[str, ...] = ("off", "on")
PRESETS: tuple[str, ...] = ("proxmox", "product")
CONTAINERS: tuple[str, ...] = ("never", "restart")

# Guest states as the HA manager names them (reference/proxmox-crs.md §1.2).
MOVING_STATES = frozenset({"migrate", "relocate"})
STATES_ON_CURRENT_NODE = frozenset(
    {"started", "request_stop", "fence", "freeze", "error", "recovery", "migrate", "relocate"}
)
STATES_ON_TARGET_NODE = frozenset({"migrate", "relocate", "request_start_balance"})
STATES = frozenset({"stopped", "request_start", "disabled", "ignored"} | STATES_ON_CURRENT_NODE | STATES_ON_TARGET_NODE)


@dataclass(frozen=True, slots=True)
class Settings:
    """The balancing policy; the defaults are the `proxmox` preset, Proxmox's exact behaviour.

    A snapshot without the newer keys means that preset, so files written before them
    keep their answers. `PRODUCT` below is what new clusters start from.
    """

    mode: Mode = "static"
    auto_rebalance: bool = True
    threshold: float = 0.3  # imbalance above which a round looks for a move (fraction)
    hold_duration: int = 3  # consecutive rounds above threshold before acting
    margin: float = 0.1  # minimum relative improvement of the imbalance by the whole plan (fraction)
    method: Method = "bruteforce"
    imbalance_scale: Scale = "normalized"
    rebalance_on_start: bool = False
    preset: Preset = "proxmox"  # proxmox: no "fits" refusal (Proxmox scores, it never refuses a full node)
    moves_per_round: int = 1  # move budget of one round's plan
    target_imbalance: float | None = None  # a plan continues while above it; None = the threshold
    load_floor: float = 0.0  # act only when the busiest node's CPU or memory is above it (fraction)
    objective: Objective = "even"
    cpu_overcommit: float = 4.0  # configured cores per CPU thread a node may carry (crs.fits)
    memory_reserve_bytes: float = 0.0  # memory kept free on every node (crs.fits)
    # Seconds of the source's own clock (trace time for the simulator) over which guests' and
    # nodes' usage is averaged; 0 = the latest value, as Proxmox reads it.
    usage_period: float = 0.0
    # Containers cannot live-migrate: "restart" moves them with downtime (as Proxmox relocates
    # them), "never" keeps them out of automatic moves.
    containers: Containers = "restart"
    # "on": plans read the guests' forecast peaks (crs.forecast): a pressure move ahead of a
    # predicted stall, and no move onto a node predicted to stall within the hour.
    forecast: ForecastUse = "off"
    # What a forecast's lead time is made of: a move must be done before the peak, so it starts
    # one round plus the migration's expected duration (memory / this bandwidth) ahead of it.
    round_interval_s: float = 10.0
    migration_mib_s: float = 1024.0
    # Seconds a move's gain is expected to last where the guest's history does not say
    # (crs.payoff): a move is made only when its gain over this time outweighs its cost.
    benefit_horizon: float = 3600.0
    # Seconds a waiting recommendation stands before a better plan may replace it (crs.verdict),
    # so an admin has time to read it; 0 = replaced as soon as a plan beats it by the margin.
    minimum_dwell: float = 0.0

    @property
    def target(self) -> float:
        """Where a plan stops: below the threshold leaves room before the next crossing."""
        return self.threshold if self.target_imbalance is None else self.target_imbalance


PROXMOX = Settings()
# The product's defaults for new clusters: plans of several moves down to a target below
# the threshold (hysteresis), and no move that overfills a node. Hold 1: a round acts on the
# first 5-minute trace sample above the threshold (a replay round is one sample, itself a
# 5-minute mean); waiting three samples (15 minutes) left Bitbrains and PlanetLab at 24
# nodes above the threshold in 8 % of rounds, one sample keeps every trace ≥ 98 % within
# it (bench/README.md, the replay table). Live rounds count hold in rounds of the cluster's
# interval: the dashboard's 3 rounds of 10 s act within those 5 minutes too.
# Usage is averaged over 5 minutes, as DRS averages, so a 10-second spike moves nothing; a
# container moves only when an admin asks, since its move is a restart.
PRODUCT = Settings(
    preset="product",
    moves_per_round=5,
    target_imbalance=0.2,
    hold_duration=1,
    usage_period=300.0,
    containers="never",
    forecast="on",
    minimum_dwell=600.0,
)


@dataclass(frozen=True, slots=True)
class Guards:
    """What the product adds to Proxmox's rules against thrashing; empty = Proxmox exactly.

    Admins of every peer balancer complain about ping-pong and about suggestions they
    already rejected coming back; the web side derives these sets from its history.
    """

    in_cooldown: frozenset[str] = frozenset()  # guests in cooldown after a migration: not moved
    barred: frozenset[tuple[str, str]] = frozenset()  # (guest, node) not to suggest: way back, rejected


@dataclass(frozen=True, slots=True)
class Pressure:
    """Pressure stall information: the fraction of time (0.75 = 75 %) some / all tasks waited
    on CPU, memory or IO (Proxmox VE 9's `pressure*` fields, in percent there)."""

    cpu_some: float = 0.0
    cpu_full: float = 0.0
    memory_some: float = 0.0
    memory_full: float = 0.0
    io_some: float = 0.0
    io_full: float = 0.0


@dataclass(frozen=True, slots=True)
class Forecast:
    """A guest's predicted peak over the next hour, from its own history (crs.forecast): the
    cores and memory it is expected to use then, when, and on how many of the past days that
    hour reached it. A guest with less than a day of history has none."""

    cpu: float  # cores in use at the peak
    memory_bytes: float
    at_s: float  # seconds from the snapshot to the peak, at most an hour
    seen: int  # of the last `days` days, those whose same hour reached the peak
    days: int
    # Its trial (crs.forecast.trial): of the last days, those on which it foresaw a rise at this
    # time, and those of them it came within 10 % of the peak on; 0, 0: not tried (given as is).
    acted: int = 0
    within: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: float  # CPU threads of the host
    memory_bytes: float
    online: bool = True
    maintenance: bool = False
    cpu_usage: float | None = None  # measured cores in use (dynamic); None = sum of guests
    mem_usage_bytes: float | None = None
    ksm_bytes: float = 0.0  # memory KSM shares between guests (the memory rule's 80 % case)
    pressure: Pressure | None = None  # None: the source reports none (Proxmox VE 8)
    traits: frozenset[str] = frozenset()  # what the node offers (gpu, local-nvme): guests' `requires`
    standby: bool = False  # powered down on purpose (crs.power): not failed, only asleep
    uptime_s: float | None = None  # seconds since it booted; None: the source does not say

    @property
    def usable(self) -> bool:
        """Only online nodes outside maintenance and standby carry load and receive guests: a
        standby node is no placement or recovery target and is left out of the imbalance."""
        return self.online and not self.maintenance and not self.standby


@dataclass(frozen=True, slots=True)
class Guest:
    sid: str  # "vm:<id>" or "ct:<id>"
    node: str
    state: str = "started"
    cores: float = 1.0  # configured CPUs; 0 = unlimited = all of the node's CPUs
    memory_bytes: float = 512 * 2**20
    cpu_usage: float = 0.0  # measured cores in use (dynamic)
    mem_usage_bytes: float = 0.0
    ha: bool = True  # managed by the scheduler; unmanaged running guests are load only
    auto_rebalance: bool = True  # False: never picked by a balancing round
    target: str | None = None  # set while moving
    running: bool = True  # the start is confirmed; a started guest not yet running is "starting"
    pressure: Pressure | None = None  # None: the source reports none (Proxmox VE 8)
    uptime_s: float | None = None  # None: long running
    allowed_nodes: frozenset[str] | None = None  # None: everywhere (Proxmox's migrate preconditions)
    pinned_reason: str = ""  # why allowed_nodes is narrowed (local disk, passed-through device)
    requires: frozenset[str] = frozenset()  # node traits it needs; "!trait": a trait it must not meet
    recoverable: bool = True  # False: tied to its node (local disk, device): lost if the node fails
    proxmox_ha: bool = False  # an HA resource of a Proxmox cluster: its manager evacuates it and enforces its rules
    forecast: Forecast | None = None  # None: not forecast (less than a day of history, or no history kept)
    lock: str = ""  # Proxmox's config lock (backup, snapshot, clone, …); "" = none

    def may_run_on(self, node: Node) -> bool:
        """Allowed nodes and traits, as OpenStack Placement's required and forbidden traits."""
        if self.allowed_nodes is not None and node.name not in self.allowed_nodes:
            return False
        return all((t[1:] not in node.traits) if t.startswith("!") else (t in node.traits) for t in self.requires)

    @property
    def locked(self) -> bool:
        """Held by a lock Proxmox refuses a migration for ("VM is locked (backup)"): any but
        `migrate`, the lock of a migration that already shows as the guest's state."""
        return self.lock not in ("", "migrate")

    @property
    def kind(self) -> str:
        return self.sid.split(":", 1)[0]

    @property
    def moving(self) -> bool:
        return self.state in MOVING_STATES


@dataclass(frozen=True, slots=True)
class NodeAffinityRule:
    id: str
    resources: tuple[str, ...]
    nodes: tuple[tuple[str, int], ...]  # (node, priority); higher priority is preferred
    strict: bool = False
    affinity: Literal["positive", "negative"] = "positive"  # negative: keep off these nodes
    type: str = field(default="node-affinity", init=False)


@dataclass(frozen=True, slots=True)
class ResourceAffinityRule:
    id: str
    resources: tuple[str, ...]
    affinity: Literal["positive", "negative"]
    type: str = field(default="resource-affinity", init=False)


Rule = NodeAffinityRule | ResourceAffinityRule


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    guests: tuple[Guest, ...]
    rules: tuple[Rule, ...] = ()
    settings: Settings = Settings()
    cluster: str = ""
    taken_at: str | None = None
    clock_s: float | None = None  # the source's own clock (trace seconds for the simulator); None: taken_at

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def guest(self, sid: str) -> Guest:
        for guest in self.guests:
            if guest.sid == sid:
                return guest
        raise KeyError(sid)

    def with_nodes(self, nodes: tuple[Node, ...]) -> Snapshot:
        return replace(self, nodes=nodes)

    def with_settings(self, settings: Settings) -> Snapshot:
        return replace(self, settings=settings)

    @property
    def in_motion(self) -> tuple[Guest, ...]:
        """Guests being migrated or relocated right now."""
        return tuple(g for g in self.guests if g.moving)
