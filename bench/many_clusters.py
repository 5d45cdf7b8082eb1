"""Many clusters on the distributed engine (issue 25, "Carry many"): N simulated clusters (the
simulator's default cluster: 12 nodes, 416 guests) at I-second rounds for M minutes, on the stack
as the docs run it (PostgreSQL, Redis, `make web`, `make worker`, `make beat`, supervised), once
per worker pool size asked for. It prints one table and writes bench/results/many_clusters.json
(its figure in `make bench-table`, every run's figures beside it).

    .venv/bin/python -m bench.many_clusters                           # 200 clusters, 10 min, 2 then 1 worker processes
    .venv/bin/python -m bench.many_clusters --clusters 20 --minutes 2 --processes 2
    .venv/bin/python -m bench.many_clusters --clusters 40,80,120,160,200 --minutes 3   # the knee

Per run: the rounds each cluster got against the schedule's count, the p99 lateness of a round
against its cluster's schedule (a tick every interval from its first round in the window: a
round belongs to the last tick before it, so lateness is below one interval and a missed tick
is a gap), the longest gap between two rounds of a cluster, the Celery queue's length (LLEN)
over time, CPU seconds per round of each process (web, worker, beat, the PostgreSQL backends
of this database, Redis) read from /proc, and database writes per round (pg_stat_database's
tuples inserted, updated and deleted). Then, in one process on the same database, what a
collect, a round, an N+1 refresh and a push cost in CPU, so the worker's CPU per round splits
into them and the rest (Celery). Its database (crs_overview_many on CRS_TEST_DATABASE_URL's
server) is made fresh per run; Redis is a redis-server of its own. No pytest and no Django here.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import defaultdict
from pathlib import Path

from bench.results import record
from harness.clusters import simulated
from harness.stack import (
    ARTIFACTS,
    COLLECTSTATIC,
    VENV_BIN,
    WORKER,
    RedisServer,
    descendants,
    fresh_database,
    own_static,
    processes_of_a_stack,
    start,
    stop,
    wait_for_port,
)

TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY = 2.0  # seconds between samples of the queue and the processes' CPU
QUEUES = ("celery", "whatif")
# Beat's scheduler: the product's (settings.CELERY_BEAT_SCHEDULER, each cluster at its phase) or,
# as a baseline in the same run, django-celery-beat's own (interval schedules, in step).
SCHEDULERS = {"phased": (), "interval": ("--scheduler", "django_celery_beat.schedulers:DatabaseScheduler")}
ROLES = ("web", "worker", "beat", "postgres", "redis")
# What a collect, a round, an N+1 refresh and a push cost in one process (on the run's database,
# its first cluster), in CPU seconds of that process: the split of the worker's CPU per round.
SPLIT = """
import json, time
from django.db import transaction
from dashboard import n1, tasks
from dashboard.live import sender as live
from dashboard.models import Cluster

pk = Cluster.objects.order_by("pk").values_list("pk", flat=True).first()
costs = {"collect": [], "round": [], "n1 refresh": [], "push": []}
def timed(what, work):
    begun = time.process_time()
    work()
    costs[what].append(time.process_time() - begun)

def round_with_its_pushes():
    with transaction.atomic():  # its pushes run on commit
        tasks.balancing_round.run(pk)

for _ in range(REPEAT):
    timed("collect", lambda: tasks.collect.run(pk))
    Cluster.objects.filter(pk=pk).update(round_lease_until=None)
    timed("round", round_with_its_pushes)
    Cluster.objects.filter(pk=pk).update(n1_at=None)
    cluster = Cluster.objects.select_related("policy").get(pk=pk)
    snapshot = cluster.latest_snapshot()
    timed("n1 refresh", lambda: n1.refresh(cluster, snapshot))
    round_ = cluster.rounds.order_by("-at").first()
    timed("push", lambda: live.push(pk, live.round_payload(round_, 3)))
print("SPLIT", json.dumps({k: sorted(v)[len(v) // 2] for k, v in costs.items()}))
"""


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


class Run:
    """One run: N clusters, P worker processes, M minutes measured after a warm-up."""

    def __init__(
        self, database_url: str, clusters: int, processes: int, minutes: float, interval: int, scheduler: str = "phased"
    ):
        self.url, self.clusters, self.processes = database_url, clusters, processes
        self.minutes, self.interval, self.scheduler = minutes, interval, scheduler
        self.name = "many-clusters"  # one name for every run: the static files are collected (compressed) once
        self.redis = RedisServer(ARTIFACTS / f"{self.name}-redis.log")
        self.done = threading.Event()
        self.queue: list[tuple[float, int]] = []
        self.cpu: dict[str, dict[int, float]] = defaultdict(dict)  # role → pid → CPU seconds last seen
        self.cpu_at_start: dict[str, dict[int, float]] = {}

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=30) as conn:
            return conn.execute(sql, args).fetchall()

    def measure(self) -> dict:
        ARTIFACTS.mkdir(exist_ok=True)
        fresh_database(self.url)
        self.redis.start()
        env = {"DATABASE_URL": self.url, "REDIS_URL": self.redis.url, "CRS_SECRET_KEY": "many-clusters"}
        processes = []
        try:
            setup = ["manage.py", "shell", "-c", simulated(self.clusters, self.interval)]
            static = {**env, **own_static(ARTIFACTS / f"{self.name}-static")}  # the stack's collect, ahead
            for args, where in ((["manage.py", "migrate", "--noinput"], env), (setup, env), (COLLECTSTATIC, static)):
                assert start(args, where, ARTIFACTS / f"{self.name}-setup.log").wait(900) == 0, "setup failed"
            worker = [str(VENV_BIN / WORKER[0]), *WORKER[1:], "--concurrency", str(self.processes)]
            beat = SCHEDULERS[self.scheduler]
            port, processes = processes_of_a_stack(env, self.name, worker, ARTIFACTS, beat_options=beat)
            self.roles = dict(zip(("web", "worker", "beat"), processes))
            wait_for_port(port, processes[0], timeout=600)
            warm = self.warm_up()
            sampler = threading.Thread(target=self.sample, daemon=True)
            load_before = os.getloadavg()
            writes_before = self.writes()
            self.sample_once()
            self.cpu_at_start = {role: dict(pids) for role, pids in self.cpu.items()}
            began = time.time()
            sampler.start()
            time.sleep(self.minutes * 60)
            self.sample_once()
            ended = time.time()
            writes_after = self.writes()
            self.done.set()
            sampler.join(10)
            load_after = os.getloadavg()
            for process in processes:
                stop(process)
            processes = []
            split = self.split(env)
            return self.report(began, ended, warm, writes_before, writes_after, (load_before, load_after), split)
        finally:
            self.done.set()
            for process in processes:
                stop(process)
            self.redis.stop()

    def warm_up(self) -> float:
        """Until every cluster has had a round (seconds it took), so the window measures the
        steady state, not the first collects; at most 5 minutes and 2 s a cluster: a machine
        that cannot give every cluster a round by then is measured as it is."""
        began = time.monotonic()
        deadline = began + 300 + self.clusters * 2
        while time.monotonic() < deadline:
            if self.query("SELECT count(*) FROM dashboard_cluster WHERE last_round_at IS NULL")[0][0] == 0:
                break
            time.sleep(2)
        return time.monotonic() - began

    def writes(self) -> tuple[int, int, int]:
        name = urllib.parse.urlsplit(self.url).path.lstrip("/")
        row = self.query(
            "SELECT tup_inserted, tup_updated, tup_deleted FROM pg_stat_database WHERE datname = %s", (name,)
        )[0]
        return int(row[0]), int(row[1]), int(row[2])

    def sample(self) -> None:
        while not self.done.wait(SAMPLE_EVERY):
            try:
                self.sample_once()
            except Exception as exc:  # a sample lost is a gap in the series, not a failed run
                print(f"sample lost: {exc}", file=sys.stderr)

    def sample_once(self) -> None:
        import redis

        client = redis.Redis.from_url(self.redis.url)
        self.queue.append((time.time(), sum(int(client.llen(q)) for q in QUEUES)))
        pids = {role: [p.pid, *descendants(p.pid)] for role, p in self.roles.items()}
        name = urllib.parse.urlsplit(self.url).path.lstrip("/")
        pids["postgres"] = [r[0] for r in self.query("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
        pids["redis"] = [self.redis.process.pid] if self.redis.process else []
        for role, found in pids.items():
            for pid in found:
                if (seconds := cpu_of(pid)) > 0:
                    self.cpu[role][pid] = seconds

    def split(self, env: dict) -> dict:
        """The in-process costs (SPLIT) on this run's database, Redis still up for the pushes."""
        code = SPLIT.replace("REPEAT", "7")
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
            capture_output=True,
            text=True,
            timeout=900,
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("SPLIT ")), None)
        if line is None:
            print(out.stderr[-2000:], file=sys.stderr)
            return {}
        return json.loads(line[6:])

    def report(self, began, ended, warm, before, after, loads, split) -> dict:
        seconds = ended - began
        rows = self.query(
            "SELECT c.id, COALESCE(array_agg(extract(epoch from r.at) ORDER BY r.at) FILTER (WHERE r.id IS NOT NULL),"
            " '{}') FROM dashboard_cluster c LEFT JOIN dashboard_round r ON r.cluster_id = c.id AND r.at >= "
            "to_timestamp(%s) AND r.at < to_timestamp(%s) GROUP BY c.id",
            (began, ended),
        )
        expected = seconds / self.interval
        got, lateness, gaps = [], [], []
        for _, times in rows:
            times = [float(t) for t in times]
            got.append(len(times))
            gaps.append(max(b - a for a, b in zip([began, *times], [*times, ended], strict=True)))
            lateness += late_against_schedule(times, self.interval)
        total = sum(got)
        collects = self.query(
            "SELECT count(DISTINCT (cluster_id, at)) FROM dashboard_nodesample WHERE span_s = 0 AND at >= "
            "to_timestamp(%s) AND at < to_timestamp(%s)",
            (began, ended),
        )[0][0]
        cpu = {role: self.cpu_seconds(role) for role in ROLES}
        inserted, updated, deleted = (a - b for a, b in zip(after, before, strict=True))
        lengths = [n for _, n in self.queue]
        third = max(1, len(lengths) // 3)
        worker_per_round = cpu["worker"] / total if total else 0.0
        n1_share = split.get("n1 refresh", 0.0) * self.interval / 60  # one refresh a minute per cluster
        parts = {
            "collect": split.get("collect", 0.0),
            "round (its pushes in)": split.get("round", 0.0),
            "side tasks (N+1)": n1_share,
        }
        parts["Celery and the rest"] = worker_per_round - sum(parts.values())
        parts["of the round: one push"] = split.get("push", 0.0)
        result = {
            "clusters": self.clusters,
            "worker_processes": self.processes,
            "scheduler": self.scheduler,
            "interval_s": self.interval,
            "minutes": round(seconds / 60, 2),
            "guests_per_cluster": self.guests(),
            "warm_up_s": round(warm, 1),
            "rounds": total,
            "rounds_per_s": round(total / seconds, 2),
            "collects": collects,  # more than rounds: a round queued too late expires, its collect stays
            "rounds_per_s_scheduled": round(self.clusters / self.interval, 2),
            "rounds_per_cluster": {"expected": round(expected, 1), "min": min(got), "median": statistics.median(got)},
            "clusters_short": sum(n < 0.95 * expected - 1 for n in got),
            "lateness_s": {"p50": pct(lateness, 50), "p99": pct(lateness, 99), "max": max(lateness, default=None)},
            "longest_gap_s": round(max(gaps), 2),
            "queue": {
                "max": max(lengths, default=0),
                "first_third_mean": round(statistics.mean(lengths[:third]), 1) if lengths else 0,
                "last_third_mean": round(statistics.mean(lengths[-third:]), 1) if lengths else 0,
                "series": [(round(t - began), n) for t, n in self.queue],
            },
            "cpu_s_per_round": {role: round(cpu[role] / total, 4) if total else None for role in ROLES},
            "cpu_cores_busy": round(sum(cpu.values()) / seconds, 2),
            "worker_cpu_split_s": {k: round(v, 4) for k, v in parts.items()},
            "db_writes_per_round": {
                "inserted": round(inserted / total, 1) if total else None,
                "updated": round(updated / total, 1) if total else None,
                "deleted": round(deleted / total, 1) if total else None,
            },
            "load": [round(x, 1) for x in (*loads[0], *loads[1])],
        }
        result["met"] = met(result)
        return result

    def cpu_seconds(self, role: str) -> float:
        start = self.cpu_at_start.get(role, {})
        return sum(seconds - start.get(pid, 0.0) for pid, seconds in self.cpu.get(role, {}).items())

    def guests(self) -> int:
        rows = self.query("SELECT jsonb_array_length(snapshot->'guests') FROM dashboard_cluster LIMIT 1")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def late_against_schedule(times: list[float], interval: float) -> list[float]:
    """Each round's lateness against its cluster's schedule: a tick every `interval` seconds at
    the phase the cluster's rounds keep (their circular mean over the window), its earliest
    round taken as on time. Ticks anchored on one round (the first, as before) made a round a
    few milliseconds earlier than that one count as nearly a whole interval late. A round later
    than one interval missed a tick, which the gaps report. A schedule that drifts (an interval
    schedule, due one interval after its last run) spreads its phases, and that counts as late."""
    if not times:
        return []
    phases = [t % interval for t in times]
    turn = 2 * math.pi / interval
    mean = math.atan2(sum(math.sin(p * turn) for p in phases), sum(math.cos(p * turn) for p in phases)) / turn
    off = [(p - mean + interval / 2) % interval - interval / 2 for p in phases]
    return [o - min(off) for o in off]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 3)


def met(r: dict) -> bool:
    """The issue's figures: every cluster its rounds, p99 lateness ≤ 1 s, no gap over two
    intervals, no queue growing."""
    p99 = r["lateness_s"]["p99"]
    queue = r["queue"]
    growing = queue["last_third_mean"] > queue["first_third_mean"] + 2 * r["clusters"] / 100 + 1
    return (
        r["clusters_short"] == 0
        and p99 is not None
        and p99 <= 1.0
        and r["longest_gap_s"] <= 2 * r["interval_s"]
        and not growing
    )


def table(results: list[dict]) -> str:
    head = (
        "| clusters | worker processes | beat | rounds/s (scheduled) | rounds per cluster min / median / expected "
        "| collects | p99 lateness | longest gap | queue max (first → last third) "
        "| CPU s per round: web, worker, beat, PostgreSQL, Redis | writes per round (ins/upd/del) "
        "| load 1-min before → after | met |"
    )
    lines = [head, "|" + " --- |" * 13]
    for r in results:
        c, q, w, pc = r["cpu_s_per_round"], r["queue"], r["db_writes_per_round"], r["rounds_per_cluster"]
        lines.append(
            f"| {r['clusters']} | {r['worker_processes']} | {r.get('scheduler', 'interval')} "
            f"| {r['rounds_per_s']} ({r['rounds_per_s_scheduled']}) "
            f"| {pc['min']} / {pc['median']} / {pc['expected']} | {r['collects']} "
            f"| {r['lateness_s']['p99']} s | {r['longest_gap_s']} s "
            f"| {q['max']} ({q['first_third_mean']} → {q['last_third_mean']}) "
            f"| {', '.join(str(c[role]) for role in ROLES)} | {w['inserted']} / {w['updated']} / {w['deleted']} "
            f"| {r['load'][0]} → {r['load'][3]} | {'yes' if r['met'] else 'no'} |"
        )
    for r in results:
        split = ", ".join(f"{k} {v}" for k, v in r["worker_cpu_split_s"].items())
        run = f"{r['clusters']} × {r['worker_processes']}, {r.get('scheduler', 'interval')}"
        lines.append(f"\n{run}: worker CPU s per round = {split}")
    return "\n".join(lines)


def database_url_of(server: str) -> str:
    return urllib.parse.urlsplit(server)._replace(path="/crs_overview_many").geturl()


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=numbers, default=[200], help="comma-separated: one run each (the knee)")
    parser.add_argument("--processes", type=numbers, default=[2, 1], help="worker pool sizes, one run each")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--interval", type=int, default=5, help="seconds between a cluster's rounds")
    parser.add_argument(
        "--schedulers", type=lambda s: s.split(","), default=["phased"], help="phased,interval: one run each"
    )
    parser.add_argument(
        "--database-url",
        default=database_url_of(os.environ.get("CRS_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crs")),
    )
    args = parser.parse_args()
    results: list[dict] = []
    for clusters in args.clusters:
        for processes, scheduler in ((p, s) for p in args.processes for s in args.schedulers):
            print(f"{time.strftime('%H:%M:%S')} {clusters} clusters, {processes} processes, {scheduler}…", flush=True)
            run = Run(args.database_url, clusters, processes, args.minutes, args.interval, scheduler)
            results.append(run.measure())
            print(table(results[-1:]), flush=True)
            keep(results, args.interval)  # after every run: a long knee search stopped midway keeps its runs
    print(table(results))
    return 0


def keep(results: list[dict], interval: int) -> None:
    """bench/results/many_clusters.json: the figure for `make bench-table`, every run beside it."""
    by_size: dict[int, dict[int, float]] = defaultdict(dict)
    for r in results:
        by_size[r["clusters"]][r["worker_processes"]] = r["rounds_per_s"]
    ratios = {n: round(p[2] / p[1], 2) for n, p in by_size.items() if 1 in p and 2 in p and p[1]}
    passing = [r["clusters"] for r in results if r["met"]]
    best = max(results, key=lambda r: (r["met"], r["clusters"]))
    record(
        "many_clusters",
        f"simulated clusters (12 nodes, {best['guests_per_cluster']} guests each) at {interval}-s rounds, "
        "distributed mode, 2 cores",
        f"{best['clusters']} clusters × {best['worker_processes']} worker processes: {best['rounds_per_s']} rounds/s "
        f"of {best['rounds_per_s_scheduled']}, p99 lateness {best['lateness_s']['p99']} s, longest gap "
        f"{best['longest_gap_s']} s, queue max {best['queue']['max']}; 2 over 1 process: {ratios or '-'}; "
        f"largest met: {max(passing, default='none')}",
        "200 clusters, p99 lateness ≤ 1 s, gap ≤ 2 intervals: " + ("met" if 200 in passing else "not met"),
        {"runs": results, "throughput_2_over_1": ratios},
    )


if __name__ == "__main__":
    sys.exit(main())
