"""The fault soak's faults (harness/faultsoak.py): the kinds in turn, one a minute, each a
record of when it began and ended and what /healthz and the held socket saw of it; and the acts
that make them on the stack's supervised processes, its Redis, the proxy before its PostgreSQL
and its two fake Proxmox clusters (harness/fakepve: one stops answering, one answers 2 s a call).
No pytest and no Django here."""

import os
import signal
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.fakepve import FakePve
from harness.stack import RedisServer, descendants, wait_for_port
from harness.tcpproxy import TcpProxy

FAULT_EVERY = 60  # seconds; the first comes half a period after the start
# The kinds of fault, in the order they take turns (a minute each), as --faults names them.
FAULTS = (
    "worker-kill",
    "redis-restart",
    "postgres-away",
    "web-kill",
    "beat-kill",
    "worker-stop",
    "pve-silent",
    "pve-slow",
)
PVE_FAULT_S, PVE_SLOW_S = 30, 2.0  # how long a Proxmox cluster is silent or slow; slow: per call
SEEN_BY_HEALTHZ = {"redis-restart", "postgres-away", "web-kill"}  # else a worker answers, or beat is back


@dataclass
class Fault:
    name: str
    began: float = 0.0  # Unix seconds
    ended: float = 0.0
    visible: bool = True  # whether /healthz can see it (a second worker answers for the first)
    seen: float | None = None  # seconds after `began` /healthz (or the harness, for the web) saw it
    cleared: float | None = None  # seconds after `ended` /healthz said all is well again
    rounds_back: float | None = None  # seconds after `ended` the held socket received a round
    cluster: int | None = None  # the one cluster a Proxmox fault is on (the others must not notice)


class Faults:
    """The acts, on the soak's stack (its supervisors in `roles`, its Redis, its proxy)."""

    minutes: float
    rotation: tuple[str, ...]  # the kinds of fault, in turn (FAULTS)
    faults: list[Fault]
    roles: dict[str, subprocess.Popen]
    redis: RedisServer
    proxy: TcpProxy
    base: str
    pves: dict[str, tuple[int, FakePve]]  # "silent", "slow" → (its cluster's id, its fake Proxmox)

    def child(self, role: str) -> int | None:
        """The pid of the server a role's supervisor runs now (None while it waits to restart)."""
        supervisor = self.roles[role].pid
        try:
            children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
        except OSError:
            return None
        for pid in map(int, children):
            try:
                if b"sleep" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                    return pid
            except OSError:
                continue
        return None

    def restarted(self, role: str, old: int, timeout: float = 120) -> None:
        """Until the supervisor runs a new server in place of `old`."""
        deadline = time.monotonic() + timeout
        while self.child(role) in (None, old):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{role}: not restarted within {timeout} s of its kill")
            time.sleep(0.2)

    def inject_faults(self) -> None:
        began = time.monotonic()
        total = self.minutes * 60
        k = 0
        while (at := FAULT_EVERY / 2 + k * FAULT_EVERY) < total:
            time.sleep(max(0.0, at - (time.monotonic() - began)))
            self.fault(k)
            k += 1
        time.sleep(max(0.0, total - (time.monotonic() - began)))

    def fault(self, k: int) -> None:
        kind = self.rotation[k % len(self.rotation)]
        turn = k // len(self.rotation)  # the workers take the worker faults in turns of the rotation
        killed, stopped = f"worker-{1 + turn % 2}", f"worker-{2 - turn % 2}"
        name, act = {
            "worker-kill": (f"SIGKILL {killed}", lambda: self.kill(killed)),
            "redis-restart": ("Redis restarted (down 5 s)", self.restart_redis),
            "postgres-away": ("PostgreSQL away 20 s", self.take_postgres_away),
            "web-kill": ("SIGKILL web", lambda: self.kill("web")),
            "beat-kill": ("SIGKILL beat", lambda: self.kill("beat")),
            "worker-stop": (f"SIGSTOP {stopped} 30 s", lambda: self.hang(stopped)),
            "pve-silent": (f"Proxmox cluster stops answering {PVE_FAULT_S} s", lambda: self.upset("silent")),
            "pve-slow": (
                f"Proxmox cluster answers {PVE_SLOW_S:g} s a call for {PVE_FAULT_S} s",
                lambda: self.upset("slow"),
            ),
        }[kind]
        on = self.pves[kind[4:]][0] if kind.startswith("pve-") else None
        fault = Fault(name, began=time.time(), visible=kind in SEEN_BY_HEALTHZ, cluster=on)
        self.faults.append(fault)
        print(f"{datetime.now():%H:%M:%S} fault {k + 1}: {fault.name}", flush=True)
        act()
        fault.ended = time.time()

    def kill(self, role: str) -> None:
        pid = self.child(role)
        assert pid is not None, f"{role} is not running before its kill"
        os.kill(pid, signal.SIGKILL)
        self.restarted(role, pid)
        if role == "web":
            wait_for_port(int(urllib.parse.urlsplit(self.base).port or 0), self.roles["web"], timeout=300)

    def restart_redis(self) -> None:
        self.redis.stop()
        time.sleep(5)
        self.redis.start()

    def take_postgres_away(self) -> None:
        self.proxy.close()
        time.sleep(20)
        self.proxy.open()

    def hang(self, role: str) -> None:
        """SIGSTOP a worker and its pool for 30 s: a hung worker, then SIGCONT."""
        pid = self.child(role)
        assert pid is not None, f"{role} is not running before its stop"
        group = [pid, *descendants(pid)]
        for p in group:
            os.kill(p, signal.SIGSTOP)
        time.sleep(30)
        for p in group:
            os.kill(p, signal.SIGCONT)

    def upset(self, how: str) -> None:
        """A Proxmox cluster that stops answering (its calls wait out the connector's timeout), or
        answers PVE_SLOW_S a call, for PVE_FAULT_S: the other clusters' rounds must not wait on it."""
        pve = self.pves[how][1]
        if how == "silent":
            pve.silent = True
        else:
            pve.slow_s = PVE_SLOW_S
        time.sleep(PVE_FAULT_S)
        pve.silent, pve.slow_s = False, 0.0
