"""Real VM utilisation traces as per-VM arrays: sizes, and usage per 5-minute sample.

The simulator replays these so that the demo cluster and `python -m crs replay` see
the bursts and quiet hours of real workloads rather than invented noise. Three
formats, told apart by their file names (origins in `crs/data/traces/README.md`):

- Bitbrains (`usage-*.csv.gz`): the long CSV, one row per VM and sample, timestamps
  in Unix seconds, each VM with its own phase inside the 300 s period, which is why
  samples are bucketed, not matched. The only trace with real VM sizes.
- PlanetLab (`planetlab-*.csv[.gz]`): one row per VM, CPU percent per sample; no
  memory and no sizes.
- Google (`gcd-vms-*.csv.gz`): two rows per VM (`cpu_pct`, `mem_pct`); no sizes.
- Sized wide (`vms-*.csv.gz`): two rows per VM (`cpu_pct` of its cores, `mem_mib` in
  use) after its `cores` and `memory_mib`; the multi-day Bitbrains weeks, converted once
  into it because the long CSV's per-row timestamps would triple their size.

A trace without sizes takes them from Bitbrains: each VM draws one Bitbrains VM
(seeded, so every run sees the same cluster) and gets its cores and memory, and,
for PlanetLab, which has no memory column, its memory usage over the day too.
"""

from __future__ import annotations

import csv
import functools
import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from .base import SourceError

TRACES_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"
DEFAULT_TRACE = TRACES_DIR / "bitbrains-rnd"
PACKAGED = {
    "bitbrains": DEFAULT_TRACE,
    "planetlab": TRACES_DIR / "planetlab-cloudsim",
    "google": TRACES_DIR / "google-gcd-vms",
    # Weeks of the Bitbrains Rnd months, kept apart: defaults are tuned on July and judged on the others
    "bitbrains-2013-07": TRACES_DIR / "bitbrains-rnd-2013-07",
    "bitbrains-2013-08": TRACES_DIR / "bitbrains-rnd-2013-08",
    "bitbrains-2013-09": TRACES_DIR / "bitbrains-rnd-2013-09",
}
SAMPLE_SECONDS = 300
SAMPLES_PER_DAY = 86400 // SAMPLE_SECONDS
SIZE_SEED = 0  # the draw of Bitbrains sizes for traces without them: fixed, so a trace is always the same cluster
COLUMNS = ("vm_id", "timestamp", "cpu_cores", "cpu_usage_pct", "mem_capacity_kb", "mem_usage_kb")


@dataclass(frozen=True)
class Trace:
    """One trace, VMs in ascending id order; usage arrays are (VMs, samples), read-only."""

    vm_ids: tuple[int, ...]
    cores: np.ndarray  # configured vCPUs per VM
    memory_bytes: np.ndarray  # configured memory per VM: the largest of the day (38 VMs grow)
    cpu_usage: np.ndarray  # cores in use
    mem_usage_bytes: np.ndarray

    @property
    def samples(self) -> int:
        return int(self.cpu_usage.shape[1])


def resolve(name: str | Path) -> Path:
    """A packaged trace's name (bitbrains, planetlab, google) or a directory."""
    return PACKAGED.get(str(name), Path(name))


@functools.lru_cache(maxsize=len(PACKAGED) + 2)
def load(directory: str | Path = DEFAULT_TRACE) -> Trace:
    """Read the trace in `directory` (or a packaged one by name); cached, since workers collect every few seconds.
    Room for every packaged trace (63 MB of arrays for all six): `--list-traces` reads them all, and
    with four places each of its six reads pushed out the one it needed next."""
    path = resolve(directory)
    if files := sorted(path.glob("usage-*.csv.gz")):
        return _to_trace(np.concatenate([_read(f) for f in files]), path)
    if files := sorted(path.glob("planetlab-*.csv*")):
        ids, cpu_pct = _read_planetlab(files)
        return _sized(ids, cpu_pct, None)
    if files := sorted(path.glob("gcd-vms-*.csv.gz")):
        ids, cpu_pct, mem_pct = _read_google(files)
        return _sized(ids, cpu_pct, mem_pct)
    if files := sorted(path.glob("vms-*.csv.gz")):
        return _read_sized_wide(files)
    raise SourceError(
        f"trace {directory}: no usage-*.csv.gz (Bitbrains), planetlab-*.csv (PlanetLab), gcd-vms-*.csv.gz "
        f"(Google) or vms-*.csv.gz (sized wide) file there; packaged traces: {', '.join(PACKAGED)}"
    )


def _open(path: Path) -> TextIO:
    return gzip.open(path, "rt", newline="") if path.suffix == ".gz" else path.open(newline="")


def _wide_rows(path: Path, leading: str) -> tuple[list[list[str]], np.ndarray]:
    """Rows of a wide trace file (`leading` columns, then one column per sample): the leading
    cells, and the samples as a (rows, samples) array of percent."""
    with _open(path) as f:
        reader = csv.reader(f)
        header = next(reader, [])
        width = len(leading.split(","))
        if ",".join(header[:width]) != leading or len(header) <= width:
            raise SourceError(f"trace {path}: header must start with {leading},s000,...; found {header[: width + 1]}")
        heads, values = [], []
        try:
            for row in reader:
                heads.append(row[:width])
                values.append([float(v) for v in row[width:]])
            table = np.array(values, dtype=float).reshape(len(values), len(header) - width)
        except ValueError as exc:
            raise SourceError(f"trace {path}: line {reader.line_num}: {exc}") from exc
    if not np.isfinite(table).all() or (table < 0).any():
        bad = int(np.argwhere(~np.isfinite(table) | (table < 0))[0][0])
        raise SourceError(f"trace {path}: data row {bad + 1} has a negative or non-finite value")
    return heads, table


def _read_planetlab(files: list[Path]) -> tuple[tuple[int, ...], np.ndarray]:
    """PlanetLab: one row per VM; the guests are numbered from 1 in file order."""
    table = np.concatenate([_wide_rows(f, "vm_index,vm_name")[1] for f in files])
    return tuple(range(1, len(table) + 1)), table


def _read_google(files: list[Path]) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Google: a `cpu_pct` and a `mem_pct` row per VM, in either order."""
    _, (cpu, mem) = _paired_rows(files, "vm_name,metric", ("cpu_pct", "mem_pct"))
    return tuple(range(1, len(cpu) + 1)), cpu, mem


def _read_sized_wide(files: list[Path]) -> Trace:
    """Sized wide: per VM its id, cores and configured MiB, then a `cpu_pct` and a `mem_mib` row."""
    heads, (cpu_pct, mem_mib) = _paired_rows(files, "vm_id,cores,memory_mib,metric", ("cpu_pct", "mem_mib"))
    try:
        ids = [int(h[0]) for h in heads]
        cores, memory = (np.array([float(h[i]) for h in heads]) for i in (1, 2))
    except ValueError as exc:
        raise SourceError(f"trace {files[0]}: {exc}") from exc
    if not (cores > 0).all() or not (memory > 0).all():
        raise SourceError(f"trace {files[0]}: VM {ids[int(np.argmin(cores * memory))]} has no cores or memory")
    order = np.argsort(ids)
    cpu = np.minimum(cpu_pct, 100.0) / 100.0 * cores[:, None]
    arrays = [a[order] for a in (cores, memory * 2**20, cpu, mem_mib * 2**20)]
    for a in arrays:
        a.flags.writeable = False
    return Trace(tuple(ids[i] for i in order), *arrays)


def _paired_rows(files: list[Path], leading: str, metrics: tuple[str, str]) -> tuple[list[list[str]], list[np.ndarray]]:
    """Wide files with one row per VM and metric, the metric last of the `leading` columns: each
    VM's leading cells (the first row's) and one (VMs, samples) array per metric, in `metrics` order."""
    series: dict[str, dict[str, np.ndarray]] = {}
    first: dict[str, list[str]] = {}
    for path in files:
        heads, table = _wide_rows(path, leading)
        for head, row in zip(heads, table):
            name, metric = head[0], head[-1]
            if metric not in metrics:
                raise SourceError(f"trace {path}: metric {metric!r} of {name}; allowed: {', '.join(metrics)}")
            series.setdefault(name, {})[metric] = row
            first.setdefault(name, head)
    incomplete = sorted(name for name, rows in series.items() if len(rows) < len(metrics))
    if incomplete:
        raise SourceError(f"trace {files[0]}: VM {incomplete[0]} lacks a {' or '.join(metrics)} row")
    return list(first.values()), [np.array([series[n][m] for n in series]) for m in metrics]


def _sized(ids: tuple[int, ...], cpu_pct: np.ndarray, mem_pct: np.ndarray | None) -> Trace:
    """Sizes for a trace without them: each VM draws one Bitbrains VM (seeded) and takes its
    cores and memory, and, when the trace has no memory usage, that VM's memory usage over
    the day (repeated if this trace is longer)."""
    donors = load(DEFAULT_TRACE)
    pick = np.random.default_rng(SIZE_SEED).integers(0, len(donors.vm_ids), size=len(ids))
    cores, memory = donors.cores[pick], donors.memory_bytes[pick]
    cpu = np.minimum(cpu_pct, 100.0) / 100.0 * cores[:, None]
    if mem_pct is not None:
        mem = np.minimum(mem_pct, 100.0) / 100.0 * memory[:, None]
    else:
        columns = np.arange(cpu_pct.shape[1]) % donors.samples
        mem = donors.mem_usage_bytes[pick][:, columns]
    arrays = (cores.copy(), memory.copy(), cpu, mem)
    for a in arrays:
        a.flags.writeable = False
    return Trace(ids, *arrays)


def _read(path: Path) -> np.ndarray:
    with gzip.open(path, "rt", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise SourceError(f"trace {path}: column {missing[0]!r} missing; needs {', '.join(COLUMNS)}")
        index = [header.index(c) for c in COLUMNS]
        try:
            rows = [[float(row[i]) for i in index] for row in reader]
        except (ValueError, IndexError) as exc:
            raise SourceError(f"trace {path}: line {reader.line_num}: {exc}") from exc
    table = np.array(rows, dtype=float).reshape(-1, len(COLUMNS))
    if not np.isfinite(table).all() or (table < 0).any():
        bad = int(np.argwhere(~np.isfinite(table) | (table < 0))[0][0])
        raise SourceError(f"trace {path}: data row {bad + 1} has a negative or non-finite value")
    return table


def _to_trace(table: np.ndarray, directory: str | Path) -> Trace:
    vm_id, ts, cores, pct, mem_cap_kb, mem_used_kb = table.T
    ids, row_vm = np.unique(vm_id.astype(int), return_inverse=True)
    start = ts.min() // SAMPLE_SECONDS * SAMPLE_SECONDS
    bucket = ((ts - start) // SAMPLE_SECONDS).astype(int)
    shape = (ids.size, int(bucket.max()) + 1)
    cpu = np.full(shape, np.nan)
    mem = np.full(shape, np.nan)
    cpu[row_vm, bucket] = pct / 100.0 * cores
    mem[row_vm, bucket] = mem_used_kb * 1024.0
    vm_cores = np.zeros(ids.size)
    vm_memory = np.zeros(ids.size)
    np.maximum.at(vm_cores, row_vm, cores)
    np.maximum.at(vm_memory, row_vm, mem_cap_kb * 1024.0)
    if (vm_cores == 0).any() or (vm_memory == 0).any():
        raise SourceError(f"trace {directory}: VM {ids[np.argmin(vm_cores * vm_memory)]} has no cores or memory")
    arrays = (vm_cores, vm_memory, _fill_gaps(cpu), _fill_gaps(mem))
    for a in arrays:
        a.flags.writeable = False
    return Trace(tuple(int(i) for i in ids), *arrays)


def _fill_gaps(usage: np.ndarray) -> np.ndarray:
    """A missed sample repeats the VM's previous one (its next one at the very start).

    17 of the 416 VMs miss one 5-minute sample; repeating a neighbour keeps the
    cluster total free of a false dip.
    """
    out = usage.copy()
    for row in out:
        known = np.flatnonzero(~np.isnan(row))
        if known.size == 0:
            row[:] = 0.0
            continue
        nearest_before = np.maximum.accumulate(np.where(~np.isnan(row), np.arange(row.size), -1))
        row[:] = row[np.where(nearest_before >= 0, nearest_before, known[0])]
    return out
