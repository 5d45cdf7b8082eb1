"""The fault soak (issue 24): the distributed stack as the docs run it (one web, two workers,
beat, PostgreSQL, Redis; supervised as `make web`, `make worker` and `make beat` run them),
20 simulated clusters at 2-second rounds under `automatic` automation with migrations of
5-30 s, and every 60 s the next fault in turn. Checked meanwhile and at the end, printed as a
table and written to tests/artifacts/faultsoak-*.

    .venv/bin/python -m harness.faultsoak --minutes 10    (or: make soak-faults MINUTES=10)

It never stops a service other runs share: Redis is a redis-server of its own, and PostgreSQL
goes away through harness/tcpproxy.py (the stack reaches its database through the proxy; the
checks read it directly). Its database (crs_faultsoak on CRS_TEST_DATABASE_URL's server,
--database-url to choose) is made fresh at the start and kept after, to look into. No pytest and no Django here, as
in stack.py: tests/test_soak_faults.py runs it as a test.
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.stack import (
    ARTIFACTS,
    VENV_BIN,
    WORKER,
    RedisServer,
    descendants,
    fresh_database,
    memory_mb,
    processes_of_a_stack,
    start,
    stop,
    wait_for_port,
)
from harness.tcpproxy import in_front_of_database
from harness.wsclient import Client, login

CLUSTERS = 20
ROUND_INTERVAL = 2  # seconds
# `make test` runs it beside the suite at a smaller scale: 20 clusters at 2-s rounds are 10
# rounds a second, about the two cores' worth alone (0.2 s of CPU a round, bench/README.md).
CI_SCALE = {"clusters": 5, "round_interval": 4}
FAULT_EVERY = 60  # seconds; the first comes half a period after the start
PASSWORD = "faultsoak-password"
# Each cluster a demo simulator of its own (seed), its migrations 5-30 s whatever the guest's
# memory, its trace moving a sample every 20 rounds so the load keeps shifting.
SOURCE = {"migration_mib_s": 512, "migration_min_s": 5, "migration_max_s": 30, "seconds_per_sample": 40}


def setup(clusters: int, round_interval: int) -> str:
    """Python for `manage.py shell`: the clusters, automatic, and the admin."""
    return f"""
from django.contrib.auth import get_user_model
from dashboard.models import Cluster, Policy
for i in range(1, {clusters} + 1):
    cluster = Cluster.objects.create(
        name=f"soak{{i:02d}}", source_kind="simulator",
        source_config={{**{SOURCE!r}, "round_interval_s": {round_interval}, "seed": i}},
    )
    policy = Policy.objects.get(cluster=cluster)
    policy.mode, policy.automation, policy.round_interval_s = "dynamic", "automatic", {round_interval}
    policy.save()
get_user_model().objects.create_superuser("admin", "admin@example.com", {PASSWORD!r})
"""


# What the issue bounds, in seconds.
SEEN_WITHIN, CLEARED_WITHIN, ROUNDS_WITHIN, MOVES_ON_WITHIN = 10, 30, 10, 60
QUIET_WITHIN = 30  # seconds without a round, away from faults (the socket probe's bound)
# The kinds of fault, in the order they take turns (a minute each), as --faults names them.
FAULTS = ("worker-kill", "redis-restart", "postgres-away", "web-kill", "beat-kill", "worker-stop")
SEEN_BY_HEALTHZ = {"redis-restart", "postgres-away", "web-kill"}  # else a worker answers, or beat is back
MEMORY_AGE, MEMORY_GROWTH = 120, 0.10  # RSS compared at 2 minutes of age; at most 10 % more
DOUBLED_ROUNDS = 1.5  # rounds per interval in any minute above which beat counts as doubled
PARTS = ("database", "channel_layer", "worker", "beat")  # what /healthz and /metrics report
TRANSITIONS = ("suggested", "approved", "running", "done", "failed", "expired", "rejected")


@dataclass
class Fault:
    name: str
    began: float = 0.0  # Unix seconds
    ended: float = 0.0
    visible: bool = True  # whether /healthz can see it (a second worker answers for the first)
    seen: float | None = None  # seconds after `began` /healthz (or the harness, for the web) saw it
    cleared: float | None = None  # seconds after `ended` /healthz said all is well again
    rounds_back: float | None = None  # seconds after `ended` the held socket received a round


@dataclass
class Observations:
    health: list[tuple[float, dict | None]] = field(default_factory=list)  # None: the web did not answer
    metrics_missing: list[str] = field(default_factory=list)
    metrics_scrapes: int = 0
    rounds: list[float] = field(default_factory=list)  # when the held socket received a round
    drops: list[float] = field(default_factory=list)  # when the held socket closed or failed to connect
    memory: dict[str, dict[int, list[tuple[float, float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )  # role → pid → [(age s, RSS MB)]


class Soak:
    def __init__(
        self,
        database_url: str,
        minutes: float,
        logs: Path = ARTIFACTS,
        clusters: int = CLUSTERS,
        round_interval: int = ROUND_INTERVAL,
        faults: tuple[str, ...] = FAULTS,
    ):
        self.direct = database_url
        self.minutes, self.logs = minutes, logs
        self.clusters, self.round_interval = clusters, round_interval
        self.rotation = faults  # the kinds of fault, in turn (FAULTS)
        self.redis = RedisServer(logs / "faultsoak-redis.log")
        self.seen = Observations()
        self.faults: list[Fault] = []
        self.done = threading.Event()

    # -- the stack -------------------------------------------------------------------------
    def run(self) -> dict:
        self.logs.mkdir(exist_ok=True)
        fresh_database(self.direct)
        self.redis.start()
        self.proxy, via_proxy = in_front_of_database(self.direct)
        env = {"DATABASE_URL": via_proxy, "REDIS_URL": self.redis.url, "CRS_SECRET_KEY": "faultsoak"}
        processes: list[subprocess.Popen] = []
        try:
            clusters = ["manage.py", "shell", "-c", setup(self.clusters, self.round_interval)]
            for step in (["manage.py", "migrate", "--noinput"], clusters):
                assert start(step, env, self.logs / "faultsoak-setup.log").wait(300) == 0, "setup failed"
            worker = [str(VENV_BIN / WORKER[0]), *WORKER[1:]]  # `make worker`: the default pool
            port, processes = processes_of_a_stack(env, "faultsoak", worker, self.logs, workers=2)
            self.roles = dict(zip(("web", "worker-1", "worker-2", "beat"), processes))
            self.base = f"http://127.0.0.1:{port}"
            wait_for_port(port, processes[0], timeout=300)
            self.warm_up()
            monitors = [
                threading.Thread(target=target, daemon=True)
                for target in (self.poll_health, self.hold_socket, self.sample_memory)
            ]
            for monitor in monitors:
                monitor.start()
            self.inject_faults()
            self.cutoff = time.time()
            self.settle()
            self.done.set()
            for monitor in monitors:
                monitor.join(30)
            return self.report()
        finally:
            self.done.set()
            for process in processes:
                stop(process)
            self.proxy.shut()
            self.redis.stop()  # the database stays for a look after a failed run (made fresh next time)

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.direct, connect_timeout=30) as conn:
            return conn.execute(sql, args).fetchall()

    def warm_up(self) -> None:
        """Until rounds run and the first automatic migrations have started (5 minutes at most)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.query("SELECT count(*) FROM dashboard_migration WHERE started_at IS NOT NULL")[0][0] >= 3:
                return
            time.sleep(2)
        raise TimeoutError("no automatic migration started within 5 minutes of the stack's start")

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

    # -- the faults ------------------------------------------------------------------------
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
        }[kind]
        fault = Fault(name, began=time.time(), visible=kind in SEEN_BY_HEALTHZ)
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

    def settle(self) -> None:
        """After the last period: until every migration approved before it has ended (5 min at most)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and self.open_migrations():
            time.sleep(2)
        time.sleep(max(0.0, CLEARED_WITHIN + 5 - (time.time() - self.faults[-1].ended)) if self.faults else 0)

    def open_migrations(self) -> list[tuple]:
        return self.query(
            "SELECT id, state FROM dashboard_migration WHERE state IN ('approved', 'running') AND decided_at < %s",
            (datetime.fromtimestamp(self.cutoff).astimezone(),),
        )

    # -- the monitors ----------------------------------------------------------------------
    def poll_health(self) -> None:
        last_metrics = 0.0
        while not self.done.is_set():
            answer = healthz(self.base)
            self.seen.health.append((time.time(), answer))  # when it answered: a probe may wait
            if time.monotonic() - last_metrics > 10:
                last_metrics = time.monotonic()
                self.scrape_metrics()
            time.sleep(1)

    def scrape_metrics(self) -> None:
        try:
            with urllib.request.urlopen(f"{self.base}/metrics", timeout=10) as response:
                text = response.read().decode()
        except (OSError, urllib.error.URLError):
            return  # the web is away (a fault): /healthz's record says so
        self.seen.metrics_scrapes += 1
        for component in PARTS:
            if f'crs_component_up{{component="{component}"}}' not in text:
                self.seen.metrics_missing.append(f"{datetime.now():%H:%M:%S} {component}")

    def hold_socket(self) -> None:
        """The page's socket on the first cluster, held all along; reconnecting as the page does."""
        cookie = login(self.base, "admin", PASSWORD)

        async def hold():
            delay = 0.25
            while not self.done.is_set():
                try:
                    client = await asyncio.wait_for(Client.connect(self.base, "/ws/clusters/1/", cookie), 10)
                    delay = 0.25
                    try:
                        while not self.done.is_set():
                            message = await asyncio.wait_for(client.receive_json(), 30)
                            if message["type"] == "round":
                                self.seen.rounds.append(time.time())
                    finally:
                        client.close()
                except (TimeoutError, ConnectionError, OSError, asyncio.IncompleteReadError):
                    self.seen.drops.append(time.time())
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)

        asyncio.run(hold())

    def sample_memory(self) -> None:
        while not self.done.is_set():
            for role in self.roles:
                pid = self.child(role)
                try:
                    if pid is not None:
                        self.seen.memory[role][pid].append((age(pid), memory_mb(pid)[0]))
                except OSError:
                    pass  # it died between the look-up and the read
            time.sleep(10)

    # -- the report ------------------------------------------------------------------------
    def report(self) -> dict:
        for fault in self.faults:
            self.judge_health(fault)
            later = [t - fault.ended for t in self.seen.rounds if t > fault.ended]
            fault.rounds_back = min(later) if later else None
        checks: list[tuple[str, str, bool]] = []
        checks += self.check_starts()
        checks += self.check_migrations()
        checks += self.check_audit_and_rounds()
        checks += self.check_faults()
        checks += self.check_exits()
        checks += self.check_memory()
        polls = [
            (f"{datetime.fromtimestamp(t):%H:%M:%S}", [k for k in PARTS if a.get(k) != "ok"] if a else "no answer")
            for t, a in self.seen.health
        ]
        memory = self.seen.memory.items()  # every life's (age s, RSS MB) samples, for a closer look
        return {
            "minutes": self.minutes,
            "clusters": self.clusters,
            "round_interval": self.round_interval,
            "faults": [f.__dict__ for f in self.faults],
            "checks": checks,
            "healthz_not_ok": [p for p in polls if p[1]],
            "memory": {role: {str(pid): samples for pid, samples in lives.items()} for role, lives in memory},
        }

    def judge_health(self, fault: Fault) -> None:
        def shows(answer: dict | None) -> bool:
            if answer is None:
                return fault.name == "SIGKILL web"
            key = {"Redis": "channel_layer", "Postgr": "database", "SIGKILL b": "beat"}
            wanted = next((v for k, v in key.items() if fault.name.startswith(k)), "worker")
            return answer.get(wanted, "ok") != "ok"

        polls = [(t, a) for t, a in self.seen.health if t >= fault.began]
        fault.seen = next((t - fault.began for t, a in polls if t <= fault.ended + SEEN_WITHIN and shows(a)), None)
        fault.cleared = next(
            (t - fault.ended for t, a in polls if t >= fault.ended and a and all_ok(a)),
            None,
        )

    def check_starts(self) -> list[tuple[str, str, bool]]:
        """The simulator's starts per route against the product's started migrations per route.

        A start the product made at the source is one with task ids: they are stored in the
        transaction that stores the simulator's state. A migration marked running whose start
        never reached the source (its worker killed before the call, settled as failed by the
        next look; or refused by the source) has a started_at and no task: counted here, it
        read as a start the simulator never saw (`2:vm:232 node01>node06`, one run beside the suite)."""
        doubled, unmatched, total = [], [], 0
        for cluster_id, state in self.query("SELECT id, source_state FROM dashboard_cluster"):
            started: dict[str, int] = defaultdict(int)
            for guests, source, target in self.query(
                "SELECT guests, source, target FROM dashboard_migration WHERE cluster_id = %s "
                "AND started_at IS NOT NULL AND task_ids <> '[]'::jsonb",
                (cluster_id,),
            ):
                for guest in guests:
                    started[f"{guest} {source}>{target}"] += 1
            starts = (state or {}).get("starts", {})
            total += sum(starts.values())
            doubled += [f"{cluster_id}:{r} ×{n}" for r, n in starts.items() if n > started.get(r, 0)]
            unmatched += [f"{cluster_id}:{r}" for r, n in started.items() if n > starts.get(r, 0)]
        return [
            ("no migration started twice on its source", f"{total} starts, doubled: {doubled or 'none'}", not doubled),
            ("every recorded start happened at the source", f"unmatched: {unmatched or 'none'}", not unmatched),
        ]

    def check_migrations(self) -> list[tuple[str, str, bool]]:
        rows = self.query(
            "SELECT id, cluster_id, state, reason, decided_at FROM dashboard_migration WHERE decided_at IS NOT NULL "
            "AND state IN ('approved', 'running', 'done', 'failed', 'expired')"
        )
        cutoff = datetime.fromtimestamp(self.cutoff).astimezone()
        still = [f"{i} {s}" for i, _, s, _, d in rows if s in ("approved", "running") and d < cutoff]
        unexplained = [f"{i} {s}" for i, _, s, r, _ in rows if s in ("failed", "expired") and not r]
        ended = defaultdict(int)
        for _, _, s, _, _ in rows:
            ended[s] += 1
        figures = ", ".join(f"{n} {s}" for s, n in sorted(ended.items()))
        return [
            (
                "every approved migration ended (none lost)",
                f"{len(rows)} approved: {figures}; open: {still or 'none'}",
                not still,
            ),
            ("failed and expired ones say why", f"without a reason: {unexplained or 'none'}", not unexplained),
        ]

    def timelines(self) -> dict[int, list[tuple[float, str]]]:
        events = self.query(
            "SELECT migration_id, action, at FROM dashboard_auditevent WHERE migration_id IS NOT NULL ORDER BY at, id"
        )
        lines: dict[int, list[tuple[float, str]]] = defaultdict(list)
        for migration, action, at in events:
            if action in TRANSITIONS:
                lines[migration].append((at.timestamp(), action))
        return lines

    def check_audit_and_rounds(self) -> list[tuple[str, str, bool]]:
        twice = self.query(
            "SELECT migration_id, action, count(*) FROM dashboard_auditevent WHERE migration_id IS NOT NULL "
            "AND action = ANY(%s) GROUP BY migration_id, action HAVING count(*) > 1",
            (list(TRANSITIONS),),
        )
        busiest = self.query(
            "SELECT cluster_id, date_trunc('minute', at) AS m, count(*) FROM dashboard_round "
            "GROUP BY cluster_id, m ORDER BY count(*) DESC LIMIT 1"
        )
        most = busiest[0][2] if busiest else 0
        limit = DOUBLED_ROUNDS * 60 / self.round_interval
        waiting = sum("another beat is running" in line for line in self.log_lines("beat"))
        return [
            ("each transition audited once", f"twice: {[f'{m} {a} ×{n}' for m, a, n in twice] or 'none'}", not twice),
            (
                "no round doubled (one beat)",
                f"busiest cluster-minute {most} rounds (one a {self.round_interval} s = {60 // self.round_interval}; "
                f"doubled > {limit:.0f}); "
                f"beats that waited for the lease: {waiting}",
                most <= limit,
            ),
        ]

    def log_lines(self, role: str) -> list[str]:
        try:
            return (self.logs / f"faultsoak-{role}.log").read_text(errors="replace").splitlines()
        except OSError:
            return []

    def check_exits(self) -> list[tuple[str, str, bool]]:
        return [exits_row({role: self.log_lines(role) for role in ("web", "worker1", "worker2")})]

    def check_faults(self) -> list[tuple[str, str, bool]]:
        """Per fault: the socket's rounds, /healthz, and the migrations it touched moving on."""
        lines = self.timelines()
        moved_late, longest_queued = [], (0.0, "")
        cluster_of = dict(self.query("SELECT id, cluster_id FROM dashboard_migration"))
        for fault in self.faults:
            touched = []
            for migration, events in lines.items():
                before = [a for t, a in events if t <= fault.began]
                if before and before[-1] in ("approved", "running"):
                    touched.append((migration, before[-1], [t for t, _ in events if t > fault.began]))
            for migration, state, later in touched:
                wait = (later[0] if later else time.time()) - fault.ended
                # An approved step waits its turn behind its cluster's other moves (plan order,
                # concurrency): its cluster's plan must move on, not necessarily this step.
                if state == "approved" and wait > MOVES_ON_WITHIN:
                    moves = moved_at(lines, cluster_of, cluster_of[migration], fault.began)
                    if moves is not None and moves - fault.ended <= MOVES_ON_WITHIN:
                        longest_queued = max(longest_queued, (wait, f"{migration} after '{fault.name}'"))
                        continue
                if wait > MOVES_ON_WITHIN:
                    moved_late.append(f"{migration} ({state}) {wait:.0f} s after '{fault.name}'")
        for migration, events in lines.items():  # the longest wait of any approved step for its start
            approved = next((t for t, a in events if a == "approved"), None)
            began = next((t for t, a in events if a in ("running", "expired", "failed")), time.time())
            if approved is not None and began - approved > longest_queued[0]:
                longest_queued = (began - approved, f"migration {migration}")
        table = [
            (
                "touched migrations move on within 60 s of the fault's end",
                f"late: {moved_late or 'none'}",
                not moved_late,
            ),
            ("longest wait of a step queued behind", f"{longest_queued[0]:.0f} s ({longest_queued[1] or '-'})", True),
        ]
        for fault in self.faults:
            rounds = fault.rounds_back is not None and fault.rounds_back <= ROUNDS_WITHIN
            seen = fault.seen is not None and fault.seen <= SEEN_WITHIN
            cleared = fault.cleared is not None and fault.cleared <= CLEARED_WITHIN
            shown = f"{fault.seen:.0f} s" if fault.seen is not None else "not seen"
            table.append(
                (
                    f"{datetime.fromtimestamp(fault.began):%H:%M:%S} {fault.name}",
                    f"socket rounds again {secs(fault.rounds_back)}; /healthz showed it {shown}"
                    f"{'' if fault.visible else ' (not visible: others answer)'}, all ok {secs(fault.cleared)} after",
                    rounds and cleared and (seen or not fault.visible),
                )
            )
        table.append(
            (
                "/metrics has crs_component_up for the 4 parts",
                f"{self.seen.metrics_scrapes} scrapes, missing: {self.seen.metrics_missing or 'none'}",
                self.seen.metrics_scrapes > 0 and not self.seen.metrics_missing,
            )
        )
        table.append(socket_row(self.seen.rounds, self.seen.drops, self.faults))
        return table

    def check_memory(self) -> list[tuple[str, str, bool]]:
        rows = []
        for role, all_lives in sorted(self.seen.memory.items()):
            # A life killed before its first sample (or that never started) has nothing to say.
            lives = {life: samples for life, samples in all_lives.items() if samples}
            if not lives:
                continue
            at_age = [at(samples, MEMORY_AGE) for samples in lives.values()]
            at_age = [rss for rss in at_age if rss is not None]
            longest = max(lives.values(), key=lambda samples: samples[-1][0])
            start_rss, end_rss = at(longest, MEMORY_AGE), longest[-1][1]
            across = max(at_age) / min(at_age) - 1 if len(at_age) > 1 else 0.0
            within = end_rss / start_rss - 1 if start_rss else None  # None: no life reached the age
            grown = f"{start_rss:.0f} → {end_rss:.0f} MB ({within:+.0%})" if within is not None else "not measured"
            rows.append(
                (
                    f"memory of {role}",
                    f"{len(lives)} lives; RSS at {MEMORY_AGE} s: {', '.join(f'{r:.0f}' for r in at_age) or '-'} MB "
                    f"(spread {across:+.0%}); longest life {longest[-1][0] / 60:.0f} min: {grown}",
                    across <= MEMORY_GROWTH and within is not None and within <= MEMORY_GROWTH,
                )
            )
        return rows


def socket_row(rounds: list[float], drops: list[float], faults: list[Fault]) -> tuple[str, str, bool]:
    """The held socket away from faults: no drop, and a round at least every QUIET_WITHIN s.
    It is what the idle 10-minute probe guarded (every socket closed after 10-19 s)."""
    away = [t for t in drops if not during(t, faults)]
    gap = quiet_gap(rounds, faults)
    return (
        "the socket between faults stays open and gets rounds (the 10-minute probe's guard)",
        f"{len(rounds)} rounds, {len(drops)} drops, {len(away)} away from faults"
        f"{' at ' + ', '.join(f'{datetime.fromtimestamp(t):%H:%M:%S}' for t in away) if away else ''}; "
        f"longest silence away from faults {gap:.1f} s (at most {QUIET_WITHIN} s)",
        not away and gap <= QUIET_WITHIN,
    )


def explained(faults: list[Fault]) -> list[tuple[float, float]]:
    """The spans a fault explains on the socket: the fault and the ROUNDS_WITHIN after it."""
    return [(f.began, f.ended + ROUNDS_WITHIN) for f in faults]


def during(t: float, faults: list[Fault]) -> bool:
    """Whether `t` falls in a span a fault explains, when the socket may drop."""
    return any(start <= t <= end for start, end in explained(faults))


def quiet_gap(rounds: list[float], faults: list[Fault]) -> float:
    """The longest wait between two rounds on the socket that no fault overlaps: a socket
    closed every 10-19 s, or rounds that stop coming, show here when no fault explains it."""
    busy = explained(faults)
    gaps = [b - a for a, b in zip(rounds, rounds[1:]) if not any(a < end and b > start for start, end in busy)]
    return max(gaps, default=0.0)


def moved_at(lines: dict, cluster_of: dict, cluster: int, after: float) -> float | None:
    """When a migration of `cluster` next changed state after `after`, if one did."""
    times = [t for m, events in lines.items() if cluster_of.get(m) == cluster for t, _ in events if t > after]
    return min(times, default=None)


def age(pid: int) -> float:
    """Seconds since the process started (/proc: its start in clock ticks after boot)."""
    started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return float(Path("/proc/uptime").read_text().split()[0]) - started


def at(samples: list[tuple[float, float]], seconds: float) -> float | None:
    """The RSS first sampled at `seconds` of age or later, if the life reached it. (Nearest
    within 15 s found none for a life a loaded machine sampled late, and the check then passed
    on nothing.)"""
    return next((rss for age, rss in samples if age >= seconds), None)


def exits_row(logs: dict[str, list[str]]) -> tuple[str, str, bool]:
    """The web and the workers end only when a fault kills them (SIGKILL: status 137), from
    their supervisors' log lines: a worker that exits on a Redis restart (celery 5.7.0) costs a
    restart's seconds at every one. Beat may exit while PostgreSQL is away: not asked."""
    exits = [
        f"{role}: {line.split('exited with ')[1]}"
        for role, lines in logs.items()
        for line in lines
        if "exited with status" in line and "status 137" not in line
    ]
    return ("the web and the workers exit only when killed", f"other exits: {exits or 'none'}", not exits)


def healthz(base: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        try:
            return json.loads(error.read())
        except ValueError:
            return None
    except (TimeoutError, OSError, ValueError):
        return None


def all_ok(answer: dict) -> bool:
    return all(answer.get(part) == "ok" for part in PARTS)


def secs(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else "never"


def table(report: dict) -> str:
    lines = [
        f"Fault soak, {report['minutes']:g} min, {len(report['faults'])} faults, "
        f"{report['clusters']} clusters at {report['round_interval']}-s rounds",
        "",
        "| check | measured | |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {measured} | {'ok' if ok else 'FAILED'} |" for name, measured, ok in report["checks"]]
    return "\n".join(lines)


def soak(database_url: str, minutes: float, logs: Path = ARTIFACTS, **scale) -> dict:
    """Run the soak (`scale`: clusters, round_interval, faults); its report (also written to
    <logs>/faultsoak-table.md and -report.json)."""
    report = Soak(database_url, minutes, logs, **scale).run()
    text = table(report)
    (logs / "faultsoak-table.md").write_text(text + "\n")
    (logs / "faultsoak-report.json").write_text(json.dumps(report, indent=1, default=str))
    print(text, flush=True)
    return report


def database_url_of(server: str) -> str:
    """The soak's own database (crs_faultsoak) on the server of `server`."""
    return urllib.parse.urlsplit(server)._replace(path="/crs_faultsoak").geturl()


def faults_of(text: str, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(FAULTS))
    if unknown or not kinds:
        named = ", ".join(map(repr, unknown or [text]))
        parser.error(f"--faults: {named} is not a kind of fault; they are {', '.join(FAULTS)}")
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--clusters", type=int, default=CLUSTERS)
    parser.add_argument("--round-interval", type=int, default=ROUND_INTERVAL, help="seconds")
    parser.add_argument(
        "--database-url",
        default=database_url_of(os.environ.get("CRS_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crs")),
        help="a database the soak makes fresh and drops (default: crs_faultsoak on CRS_TEST_DATABASE_URL's server)",
    )
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"the kinds of fault, in turn (default all: {','.join(FAULTS)}); without web-kill the web lives long",
    )
    args = parser.parse_args()
    report = soak(
        args.database_url,
        args.minutes,
        clusters=args.clusters,
        round_interval=args.round_interval,
        faults=faults_of(args.faults, parser),
    )
    return 0 if all(ok for _, _, ok in report["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
