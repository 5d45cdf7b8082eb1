"""N+1 verdicts for many what-ifs of one cluster, with every node's loss recovered side by side.

Capacity with --n1 asks `crs.n1.survives` of many prefixes of its allocation order. That
function recovers one lost node's guests at a time through `select_node`: one Python round
trip scoring every node per recovered guest, 20 000 of them per verdict at 1000 nodes. Here a
block of losses is one NumPy matrix, a column per lost node and a row per node left: step j
recovers the j-th stranded guest of every loss in the block at once. Each score is computed
with the operations `select_node` uses, in the same order (crs.placement's criteria, crs.topsis's
folds), so every recovery target, hence the verdict, is the one `survives` finds
(tests/test_engine_n1_batch.py checks it on random clusters).

It covers what capacity meets at scale: static mode, whole-number sizes (their sums do not
depend on the order they are added in), guests no rule, allowed-node list or trait narrows.
A loss that strands any other guest is handed to `crs.n1.loss_survived`; `prepare` returns
None for a cluster outside the batch's reach, and the caller asks `survives` itself.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from . import topsis
from .fits import Limits, guest_cores
from .model import Guest, Snapshot
from .n1 import NOT_RECOVERED, Cluster, LossVerdict, N1Report, exact_fold, loss_survived, verdicts
from .placement import WEIGHTS
from .rules import CompiledRules
from .usage import counted_nodes

BLOCK = 32  # losses per matrix: its arrays stay in the CPU cache (measured: 64 costs 1.7× as much at 1000 nodes)


@dataclass(frozen=True, slots=True)
class Stranded:
    """One HA guest to recover when its node fails, as the batch needs it."""

    sid: str
    cores: float  # 0: the whole target node
    memory_bytes: float
    holds: bool  # False: stopped, recovered as request_stop, it holds nothing on its target
    recoverable: bool


@dataclass(frozen=True, slots=True)
class Prepared:
    """The cluster before any extra guest: per node (name order) placement's occupancy, the
    configured sizes held, the limits of the capacity rule, and what each loss strands."""

    snapshot: Snapshot
    limits: Limits
    names: list[str]
    cpu: np.ndarray
    mem: np.ndarray
    maxcpu: np.ndarray
    maxmem: np.ndarray
    held_cores: np.ndarray
    held_memory: np.ndarray
    stranded: dict[str, list[Stranded]]  # losses the batch recovers
    irregular: frozenset[str]  # losses recovered by crs.n1 itself
    rules: CompiledRules
    ha_guests: int
    usable: frozenset[str]
    stranded_memory: np.ndarray  # per node: what its loss strands (0 for irregular losses)
    index: dict[str, int]  # node name → position in `names`
    cpus: np.ndarray  # what a guest with 0 cores reserves on each node
    cap_cores: np.ndarray  # the capacity rule's limits (crs.fits.refusal)
    cap_memory: np.ndarray


def prepare(snapshot: Snapshot, limits: Limits = Limits()) -> Prepared | None:
    """The batch's view of `snapshot`, or None where it does not apply (not static mode,
    fractional sizes, fewer than three usable nodes): then ask `crs.n1.survives`."""
    if snapshot.settings.mode != "static" or not all(_whole(g) for g in snapshot.guests):
        return None
    cluster = Cluster.of(snapshot)
    names = cluster.occupancy.names
    if len(names) < 3:
        return None
    usable = frozenset(names)
    stranded: dict[str, list[Stranded]] = {}
    irregular: set[str] = set()
    for name in names:
        guests = [g for g in cluster.on_node.get(name, ()) if g.ha and g.state not in NOT_RECOVERED]
        if all(_plain(g, cluster.rules, usable - {name}) for g in guests):
            stranded[name] = [_stranded(g) for g in guests]
        else:
            irregular.add(name)
    occupancy = cluster.occupancy
    nodes = [cluster.nodes[n] for n in names]
    return Prepared(
        snapshot,
        limits,
        names,
        occupancy.cpu.copy(),
        occupancy.mem.copy(),
        occupancy.maxcpu.copy(),
        occupancy.maxmem.copy(),
        np.array([cluster.holdings[n].cores for n in names]),
        np.array([cluster.holdings[n].memory_bytes for n in names]),
        stranded,
        frozenset(irregular),
        cluster.rules,
        sum(1 for g in snapshot.guests if g.ha),
        usable,
        np.array([sum(s.memory_bytes for s in stranded.get(n, ())) for n in names], dtype=float),
        {name: i for i, name in enumerate(names)},
        np.array([float(n.cpus) for n in nodes]),
        np.array([n.cpus * limits.cpu_overcommit for n in nodes]),
        np.array([n.memory_bytes - limits.memory_reserve_bytes for n in nodes]),
    )


def _whole(guest: Guest) -> bool:
    return float(guest.cores).is_integer() and float(guest.memory_bytes).is_integer()


def _plain(guest: Guest, rules: CompiledRules, others: frozenset[str]) -> bool:
    """Recovered to the best-scored of all nodes left, as `select_node` does when nothing
    narrows it, and counted nowhere but on the lost node until then."""
    narrowed = guest.sid in rules.node_affinity or guest.sid in rules.positive or guest.sid in rules.negative
    pinned = guest.allowed_nodes is not None or bool(guest.requires)
    return not narrowed and not pinned and not counted_nodes(guest, others)


def _stranded(guest: Guest) -> Stranded:
    return Stranded(guest.sid, guest.cores, guest.memory_bytes, guest.state != "stopped", guest.recoverable)


def accepts(prepared: Prepared, guest: Guest) -> bool:
    """Whether `guest` may be one of the `Extras`: a started HA guest of whole-number size that
    nothing narrows, on a usable node."""
    return (
        guest.node in prepared.usable
        and guest.state == "started"
        and guest.target is None
        and guest.ha
        and _whole(guest)
        and _plain(guest, prepared.rules, frozenset())
    )


@dataclass(frozen=True, slots=True)
class Extras:
    """Guests added to the prepared cluster (capacity's allocation order), converted once so
    that asking about any prefix of them costs NumPy sums, not a pass over the guests."""

    guests: tuple[Guest, ...]
    where: np.ndarray  # node index of each
    cores: np.ndarray  # what each reserves on its node
    memory: np.ndarray
    stranded: tuple[Stranded, ...]
    by_node: dict[str, list[int]]  # node → positions of its guests, ascending

    @classmethod
    def of(cls, prepared: Prepared, guests: Sequence[Guest]) -> Extras:
        if not all(accepts(prepared, g) for g in guests):
            raise ValueError("crs.n1_batch: an extra guest the batch does not cover (see accepts)")
        index = prepared.index
        nodes = {n.name: n for n in prepared.snapshot.nodes}
        by_node: dict[str, list[int]] = {}
        for k, guest in enumerate(guests):
            by_node.setdefault(guest.node, []).append(k)
        return cls(
            tuple(guests),
            np.array([index[g.node] for g in guests], dtype=int),
            np.array([guest_cores(g, nodes[g.node]) for g in guests], dtype=float),
            np.array([g.memory_bytes for g in guests], dtype=float),
            tuple(_stranded(g) for g in guests),
            by_node,
        )


def first_failure(
    prepared: Prepared,
    extras: Extras | None = None,
    count: int = 0,
    suspects: Sequence[str] = (),
) -> str | None:
    """A node whose loss the cluster plus the first `count` extras does not survive, or None
    when it survives the loss of any one (`crs.n1.survives`). The `suspects` are tried first,
    then the losses that strand the most memory, so a failing verdict usually stops early."""
    what_if = _WhatIf.of(prepared, extras, count)
    first = [s for s in dict.fromkeys(suspects) if s in what_if.index]
    chosen = set(first)
    stranded = what_if.stranded_memory()
    rest = sorted((n for n in prepared.names if n not in chosen), key=lambda n: -stranded[what_if.index[n]])
    ranked = first + rest
    regular = [n for n in rest if n not in prepared.irregular]
    blocks = [[n for n in first if n not in prepared.irregular]]
    blocks += [regular[i : i + BLOCK] for i in range(0, len(regular), BLOCK)]
    for block in blocks:
        if block and (failed := what_if.block_failure(block)) is not None:
            return failed
    return next((n for n in ranked if n in prepared.irregular and not what_if.irregular_survives(n)), None)


def verdict(snapshot: Snapshot, limits: Limits = Limits()) -> N1Report[LossVerdict]:
    """The cluster's N+1 verdict as the dashboard stores it (`crs.n1.verdicts`): the losses the
    batch covers are decided side by side, and only those it finds failing, or does not
    cover, are recovered one by one to say which nodes overload and which guests are lost.
    At 1000 nodes that is a second instead of `crs.n1.n1`'s recovery of every loss."""
    prepared = prepare(snapshot, limits)
    return verdicts(snapshot, limits, survivals(prepared) if prepared is not None else None)


def survivals(prepared: Prepared) -> dict[str, bool]:
    """Whether each loss the batch covers is survived, BLOCK losses to a matrix."""
    what_if = _WhatIf.of(prepared, None, 0)
    regular = [name for name in prepared.names if name not in prepared.irregular]
    out: dict[str, bool] = {}
    for i in range(0, len(regular), BLOCK):
        block = regular[i : i + BLOCK]
        out |= dict(zip(block, _survivals([(what_if, name) for name in block], stop=False), strict=True))
    return out


@dataclass(slots=True)
class _WhatIf:
    """The prepared cluster with the first `count` extras counted on their nodes."""

    prepared: Prepared
    extras: Extras | None
    count: int
    index: dict[str, int]
    cpu: np.ndarray
    mem: np.ndarray
    held_cores: np.ndarray
    held_memory: np.ndarray
    cpus: np.ndarray  # what a guest with 0 cores reserves on each node
    cap_cores: np.ndarray
    cap_memory: np.ndarray
    exact: bool

    @classmethod
    def of(cls, prepared: Prepared, extras: Extras | None, count: int) -> _WhatIf:
        cpu, mem = prepared.cpu.copy(), prepared.mem.copy()
        held_cores, held_memory = prepared.held_cores.copy(), prepared.held_memory.copy()
        if extras is not None:
            where, cores, memory = extras.where[:count], extras.cores[:count], extras.memory[:count]
            for total, amounts in ((cpu, cores), (mem, memory), (held_cores, cores), (held_memory, memory)):
                total += np.bincount(where, weights=amounts, minlength=total.size)  # whole numbers: exact
        return cls(
            prepared,
            extras,
            count if extras is not None else 0,
            prepared.index,
            cpu,
            mem,
            held_cores,
            held_memory,
            prepared.cpus,
            prepared.cap_cores,
            prepared.cap_memory,
            exact_fold(len(prepared.names), prepared.ha_guests + count),
        )

    def sequence(self, name: str) -> list[Stranded]:
        """The guests losing `name` strands, in sid order (Proxmox recovers them in that order)."""
        base = self.prepared.stranded[name]
        if self.extras is None or not (positions := self.extras.by_node.get(name)):
            return base
        added = [self.extras.stranded[k] for k in positions[: bisect_left(positions, self.count)]]
        return sorted(base + added, key=lambda s: s.sid) if added else base

    def stranded_memory(self) -> np.ndarray:
        """Per node: the memory its loss strands (the ranking of likely failures)."""
        total = self.prepared.stranded_memory.copy()
        if self.extras is not None:
            where, memory = self.extras.where[: self.count], self.extras.memory[: self.count]
            total += np.bincount(where, weights=memory, minlength=total.size)
        return total

    def irregular_survives(self, name: str) -> bool:
        snapshot = self.prepared.snapshot
        if self.extras is not None and self.count:
            snapshot = replace(snapshot, guests=snapshot.guests + self.extras.guests[: self.count])
        return loss_survived(snapshot, name, Cluster.of(snapshot, self.prepared.rules), self.prepared.limits)

    def block_failure(self, block: list[str]) -> str | None:
        """Recover the losses of `block` side by side; the first found not survived, or None."""
        survived = _survivals([(self, name) for name in block], stop=True)
        return next((name for name, ok in zip(block, survived, strict=True) if not ok), None)


def survived_with(prepared: Prepared, extras: Extras, loss: str, counts: Sequence[int]) -> list[bool]:
    """Whether the loss of `loss` is survived with each of `counts` first extras: one column per
    count in one matrix, so a search narrows by 32 at a time for the price of one recovery."""
    cases = [(_WhatIf.of(prepared, extras, count), loss) for count in counts]
    if loss in prepared.irregular:
        return [what_if.irregular_survives(loss) for what_if, _ in cases]
    out: dict[int, bool] = {}
    for exact in (True, False):  # the fold follows the guest count: never mixed in one matrix
        part = [i for i, (what_if, _) in enumerate(cases) if what_if.exact == exact]
        out |= dict(zip(part, _survivals([cases[i] for i in part], stop=False), strict=True))
    return [out[i] for i in range(len(cases))]


def _survivals(cases: list[tuple[_WhatIf, str]], *, stop: bool) -> list[bool]:
    """Each case's loss (of a regular node) recovered side by side, one column each: whether it
    is survived. `stop`: at the first that is not (the cases not yet failed count as survived)."""
    survived = [True] * len(cases)
    sequences = [what_if.sequence(loss) for what_if, loss in cases]
    for i, sequence in enumerate(sequences):
        if not all(s.recoverable for s in sequence):
            survived[i] = False
            if stop:
                return survived
    order = sorted(range(len(cases)), key=lambda i: -len(sequences[i]))  # the active columns stay a prefix
    if not order:
        return survived
    columns = _Rows.of([cases[i] for i in order])
    exact = cases[0][0].exact
    for step in range(len(sequences[order[0]])):
        guests = [sequences[i][step] for i in order if len(sequences[i]) > step]
        for column in columns.recover(guests, exact):
            survived[order[column]] = False
            if stop:
                return survived
    return survived


@dataclass(slots=True)
class _Rows:
    """The losses of a block side by side: one column per loss, one row per node left (name
    order, the lost node's row taken out). Alternatives run down the columns because NumPy
    sums down a column of a C-ordered matrix as a left fold, the order crs.topsis folds in."""

    cpu: np.ndarray
    mem: np.ndarray
    maxcpu: np.ndarray
    maxmem: np.ndarray
    cpus: np.ndarray
    held_cores: np.ndarray
    held_memory: np.ndarray
    cap_cores: np.ndarray
    cap_memory: np.ndarray
    cpu_util: np.ndarray = field(init=False)  # cpu / maxcpu, kept up to date where a guest lands
    mem_util: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.cpu_util = self.cpu / self.maxcpu
        self.mem_util = self.mem / self.maxmem

    @classmethod
    def of(cls, cases: list[tuple[_WhatIf, str]]) -> _Rows:
        if len(cases) == 1:
            cases = cases * 2  # a lone column would be summed pairwise: a twin, ignored
        losses = np.array([what_if.index[loss] for what_if, loss in cases], dtype=int)
        nodes = len(cases[0][0].prepared.names)
        keep = np.arange(nodes)[None, :] != losses[:, None]
        shape = (losses.size, nodes - 1)
        what_ifs = [what_if for what_if, _ in cases]

        def left(values: list[np.ndarray]) -> np.ndarray:
            return np.ascontiguousarray(np.stack(values)[keep].reshape(shape).T)

        return cls(
            left([w.cpu for w in what_ifs]),
            left([w.mem for w in what_ifs]),
            left([w.prepared.maxcpu for w in what_ifs]),
            left([w.prepared.maxmem for w in what_ifs]),
            left([w.cpus for w in what_ifs]),
            left([w.held_cores for w in what_ifs]),
            left([w.held_memory for w in what_ifs]),
            left([w.cap_cores for w in what_ifs]),
            left([w.cap_memory for w in what_ifs]),
        )

    def recover(self, guests: list[Stranded], exact: bool) -> list[int]:
        """Place guests[c] on column c's best-scored node (columns past the list are done) and
        count it there, as crs.n1 does; the columns whose target then holds more than the
        capacity rule allows (that only grows during a loss, so the loss fails)."""
        active = len(guests)
        width = max(active, 2)  # scored on at least two columns (see `of`); the extra one is ignored
        padded = guests + guests[:1] * (width - active)
        cores = np.array([s.cores for s in padded], dtype=float)
        memory = np.array([s.memory_bytes for s in padded], dtype=float)
        maxcpu, maxmem = self.maxcpu[:, :width], self.maxmem[:, :width]
        cpu_after = (
            self.cpu[:, :width] + (cores if np.all(cores > 0) else np.where(cores > 0, cores, maxcpu))
        ) / maxcpu
        mem_after = (self.mem[:, :width] + memory) / maxmem
        fold = _criteria_exact if exact else _criteria_incremental
        average_cpu, highest_cpu = fold(self.cpu_util[:, :width], cpu_after)
        average_mem, highest_mem = fold(self.mem_util[:, :width], mem_after)
        closeness = topsis.scores_columns([average_cpu, highest_cpu, average_mem, highest_mem], WEIGHTS)
        target = closeness.argmax(axis=0)[:active]  # placement_scores negates it: the first lowest score
        loss = np.arange(active)
        cores, memory = cores[:active], memory[:active]
        reserved = np.where(cores > 0, cores, self.cpus[target, loss])  # reserved_cpu, and guest_cores alike
        self.cpu[target, loss] += reserved  # request_stop counts in placement too (STATES_ON_CURRENT_NODE)
        self.mem[target, loss] += memory
        self.cpu_util[target, loss] = self.cpu[target, loss] / self.maxcpu[target, loss]
        self.mem_util[target, loss] = self.mem[target, loss] / self.maxmem[target, loss]
        holds = np.array([s.holds for s in guests])
        self.held_cores[target[holds], loss[holds]] += reserved[holds]
        self.held_memory[target[holds], loss[holds]] += memory[holds]
        over = (self.held_memory[target, loss] > self.cap_memory[target, loss]) | (
            self.held_cores[target, loss] > self.cap_cores[target, loss]
        )
        return [int(c) for c in np.flatnonzero(over & holds)]


def _criteria_incremental(base: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """crs.placement.criteria_incremental for a placement (source = target), per column: the
    sum of squares adjusted at the one node, the highest of the others from the top two."""
    count, width = base.shape
    dots = np.array([float(np.dot(row, row)) for row in np.ascontiguousarray(base.T)])  # BLAS, as there
    average = dots - base**2
    average += after**2
    np.maximum(average, 0.0, out=average)
    average /= count
    np.sqrt(average, out=average)
    average += 1.0
    column = np.arange(width)
    top = base.argmax(axis=0)
    kept = base[top, column]
    scratch = base.copy()
    scratch[top, column] = -np.inf
    second = scratch.max(axis=0)  # the highest but the top one (equal to it when tied)
    high = np.maximum(after, kept)  # the others' highest is the top one's …
    high[top, column] = np.maximum(after[top, column], second)  # … but where the top one is the alternative
    high += 1.0
    return average, high


def _criteria_exact(base: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """crs.placement.criteria_after for a placement, per column: folded node by node."""
    count = base.shape[0]
    high = np.zeros(base.shape)
    squares = np.zeros(base.shape)
    for j in range(count):
        util = np.repeat(base[j : j + 1, :], count, axis=0)  # every alternative sees node j as it is …
        util[j, :] = after[j, :]  # … but the one that places the guest there
        high = np.maximum(high, util)
        squares += util * util
    return 1.0 + np.sqrt(squares / count), 1.0 + high
