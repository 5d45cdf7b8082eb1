"""Real VM utilisation traces as per-VM arrays: sizes, and usage per 5-minute sample.

The simulator replays these so that the demo cluster and `python -m crs replay` see
the bursts and quiet hours of real business workloads rather than invented noise.
The format is the long CSV of `crs/data/traces/bitbrains-rnd` (see the README
there): one row per VM and sample, timestamps in Unix seconds, each VM with its own
phase inside the 300 s period, which is why samples are bucketed, not matched.
"""

from __future__ import annotations

import csv
import functools
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import SourceError

DEFAULT_TRACE = Path(__file__).resolve().parent.parent / "data" / "traces" / "bitbrains-rnd"
SAMPLE_SECONDS = 300
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
        return self.cpu_usage.shape[1]


@functools.lru_cache(maxsize=4)
def load(directory: str | Path = DEFAULT_TRACE) -> Trace:
    """Read every `usage-*.csv.gz` in `directory`; cached, since workers collect every few seconds."""
    files = sorted(Path(directory).glob("usage-*.csv.gz"))
    if not files:
        raise SourceError(f"trace {directory}: no usage-*.csv.gz file there")
    table = np.concatenate([_read(f) for f in files])
    return _to_trace(table, directory)


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
