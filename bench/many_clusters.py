"""Many clusters on the distributed engine (issues 25 and 36): N simulated clusters (the
simulator's default cluster: 12 nodes, 416 guests) at I-second rounds for M minutes, on the stack
as the docs run it (PostgreSQL, Redis, `make web`, `make worker`, `make beat`, `make
worker-proxmox`, supervised), once per worker pool size asked for. It prints one table and
writes bench/results/many_clusters.json (its figure in `make bench-table`, every run's figures
beside it; runs of earlier invocations at the same interval are kept, a run of the same size
replaced). Fake-Proxmox clusters: bench/many_pve.py, on this Run.

    .venv/bin/python -m bench.many_clusters                           # 200 clusters, 10 min, 2 then 1 worker processes
    .venv/bin/python -m bench.many_clusters --clusters 20 --minutes 2 --processes 2
    .venv/bin/python -m bench.many_clusters --clusters 50,100,150 --minutes 3   # the knee

The window starts when every cluster has had a round and the queues first stand empty.

Per run: the rounds each cluster got against the schedule's count (and the share made), the
p50 and p99 lateness of a round against its cluster's schedule (late_against_schedule), the
longest gap between two rounds of a cluster, the queues' length (LLEN) over time, CPU seconds
per round of each process (web, worker, the Proxmox worker, beat, the PostgreSQL backends of
this database, Redis) read from /proc, the connections open to the database (pg_stat_activity,
each sample) and the backends not there at the window's start (new connections; one that lived
between two samples is not seen), and writes per round (pg_stat_database). Then, in one process
on the same database, what a collect, a round, an N+1 refresh and a push cost in CPU, so the
worker's CPU per round splits into them and the rest (Celery). Its database (crs_overview_many
on CRS_TEST_DATABASE_URL's server) is made fresh per run; Redis is a redis-server of its own.
No pytest and no Django here.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import defaultdict
from pathlib import Path

from bench.many_clusters_figures import ROLES, keep, keep_instances, met, table, timeliness
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
QUEUES = ("celery", "whatif", "proxmox")
# Beat's scheduler: the product's (settings.CELERY_BEAT_SCHEDULER, each cluster at its phase) or,
# as a baseline in the same run, django-celery-beat's own (interval schedules, in step).
SCHEDULERS = {"phased": (), "interval": ("--scheduler", "django_celery_beat.schedulers:DatabaseScheduler")}
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


def family(pid: int) -> list[int]:
    """The process and its descendants; read again when one of its threads ends meanwhile (the
    Proxmox worker's threads come and go: the whole sample was lost to it before)."""
    for _ in range(3):
        try:
            return [pid, *descendants(pid)]
        except FileNotFoundError:
            continue
    return [pid]


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
        self,
        database_url: str,
        clusters: int,
        processes: int,
        minutes: float,
        interval: int,
        scheduler: str = "phased",
        instances: int = 1,
    ):
        self.url, self.clusters, self.processes, self.instances = database_url, clusters, processes, instances
        self.minutes, self.interval, self.scheduler = minutes, interval, scheduler
        self.name = "many-clusters"  # one name for every run: the static files are collected (compressed) once
        self.redis = RedisServer(ARTIFACTS / f"{self.name}-redis.log")
        self.done = threading.Event()
        self.queue: list[tuple[float, int]] = []
        self.cpu: dict[str, dict[int, float]] = defaultdict(dict)  # role → pid → CPU seconds last seen
        self.cpu_at_start: dict[str, dict[int, float]] = {}
        self.connections: list[int] = []  # backends of this database, each sample
        self.backends: set[int] = set()  # every backend pid seen in the window

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=30) as conn:
            return conn.execute(sql, args).fetchall()

    def measure(self) -> dict:
        ARTIFACTS.mkdir(exist_ok=True)
        fresh_database(self.url)
        self.redis.start()
        env = {"DATABASE_URL": self.url, "REDIS_URL": self.redis.url, "CRS_SECRET_KEY": "many-clusters"}
        processes: list[subprocess.Popen] = []
        try:
            setup = ["manage.py", "shell", "-c", self.clusters_code()]
            static = {**env, **own_static(ARTIFACTS / f"{self.name}-static")}  # the stack's collect, ahead
            for args, where in ((["manage.py", "migrate", "--noinput"], env), (setup, env), (COLLECTSTATIC, static)):
                assert start(args, where, ARTIFACTS / f"{self.name}-setup.log").wait(900) == 0, "setup failed"
            worker = [str(VENV_BIN / WORKER[0]), *WORKER[1:], "--concurrency", str(self.processes)]
            beat = SCHEDULERS[self.scheduler]
            port, processes = processes_of_a_stack(
                env, self.name, worker, ARTIFACTS, workers=self.instances, beat_options=beat
            )
            workers = processes[1 : 1 + self.instances]
            self.roles = {
                "web": [processes[0]],
                "worker": workers,
                "beat": [processes[-2]],
                "proxmox worker": [processes[-1]],
            }
            wait_for_port(port, processes[0], timeout=600)
            warm = self.warm_up()
            sampler = threading.Thread(target=self.sample, daemon=True)
            load_before = os.getloadavg()
            writes_before = self.writes()
            self.sample_once()
            self.cpu_at_start = {role: dict(pids) for role, pids in self.cpu.items()}
            at_start = set(self.cpu_at_start.get("postgres", {}))
            began = time.time()
            sampler.start()
            self.window(began)
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
            self.new_backends = len(self.backends - at_start)
            return self.report(began, ended, warm, writes_before, writes_after, (load_before, load_after), split)
        finally:
            self.done.set()
            for process in processes:
                stop(process)
            self.redis.stop()

    def clusters_code(self) -> str:
        """Python for `manage.py shell` that makes the run's clusters."""
        return simulated(self.clusters, self.interval)

    def window(self, began: float) -> None:
        """The measured window (a run with a fault injects it here)."""
        time.sleep(self.minutes * 60)

    def warm_up(self) -> float:
        """Until every cluster has had a round and then the queues first stand empty (seconds it
        took), so the window measures the steady state, not beat's start-up burst; at most 2
        minutes and 1 s a cluster: a machine that cannot get there by then is measured as it is."""
        import redis

        client = redis.Redis.from_url(self.redis.url)
        began = time.monotonic()
        deadline = began + 120 + self.clusters
        while time.monotonic() < deadline:
            if self.query("SELECT count(*) FROM dashboard_cluster WHERE last_round_at IS NULL")[0][0] == 0:
                break
            time.sleep(2)
        while time.monotonic() < deadline and sum(int(client.llen(q)) for q in QUEUES) > 0:
            time.sleep(0.2)
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
        pids = {role: [pid for p in found for pid in family(p.pid)] for role, found in self.roles.items()}
        if self.instances > 1:  # each instance's share of the work: how the fleet splits between them
            pids |= {f"worker{i}": family(p.pid) for i, p in enumerate(self.roles["worker"], 1)}
        name = urllib.parse.urlsplit(self.url).path.lstrip("/")
        mine = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"  # not the sampler's
        pids["postgres"] = [r[0] for r in self.query(mine, (name,))]
        self.connections.append(len(pids["postgres"]))
        self.backends.update(pids["postgres"])
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

    def round_times(self, began: float, ended: float) -> dict[int, list[float]]:
        """Each cluster's rounds in [began, ended), epoch seconds in order (none: an empty list)."""
        rows = self.query(
            "SELECT c.id, COALESCE(array_agg(extract(epoch from r.at) ORDER BY r.at) FILTER (WHERE r.id IS NOT NULL),"
            " '{}') FROM dashboard_cluster c LEFT JOIN dashboard_round r ON r.cluster_id = c.id AND r.at >= "
            "to_timestamp(%s) AND r.at < to_timestamp(%s) GROUP BY c.id",
            (began, ended),
        )
        return {int(pk): [float(t) for t in times] for pk, times in rows}

    def report(self, began, ended, warm, before, after, loads, split) -> dict:
        seconds = ended - began
        rounds = timeliness(self.round_times(began, ended), began, ended, self.interval, self.left_out())
        total = rounds["rounds"]
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
            "worker_instances": self.instances,
            "scheduler": self.scheduler,
            "interval_s": self.interval,
            "minutes": round(seconds / 60, 2),
            "guests_per_cluster": self.guests(),
            "warm_up_s": round(warm, 1),
            **rounds,
            "rounds_per_s": round(total / seconds, 2),
            "collects": collects,  # more than rounds: a round queued too late expires, its collect stays
            "rounds_per_s_scheduled": round(self.clusters / self.interval, 2),
            "queue": {
                "max": max(lengths, default=0),
                "first_third_mean": round(statistics.mean(lengths[:third]), 1) if lengths else 0,
                "last_third_mean": round(statistics.mean(lengths[-third:]), 1) if lengths else 0,
                "series": [(round(t - began), n) for t, n in self.queue],
            },
            "cpu_s_per_round": {role: round(cpu[role] / total, 4) if total else None for role in ROLES},
            "connections": {
                "max": max(self.connections, default=0),
                "mean": round(statistics.mean(self.connections), 1) if self.connections else 0,
                "new_in_window": self.new_backends,
            },
            "cpu_cores_busy": round(sum(cpu.values()) / seconds, 2),
            "worker_cpu_split_s": {k: round(v, 4) for k, v in parts.items()},
            "db_writes_per_round": {
                "inserted": round(inserted / total, 1) if total else None,
                "updated": round(updated / total, 1) if total else None,
                "deleted": round(deleted / total, 1) if total else None,
            },
            "load": [round(x, 1) for x in (*loads[0], *loads[1])],
        }
        if self.instances > 1:
            result["cpu_s_by_instance"] = [
                round(self.cpu_seconds(f"worker{i}"), 1) for i in range(1, self.instances + 1)
            ]
        result["met"] = met(result)
        return result

    def left_out(self) -> set[int]:
        """Clusters the figures leave out (a run's faulty cluster)."""
        return set()

    def cpu_seconds(self, role: str) -> float:
        start = self.cpu_at_start.get(role, {})
        return sum(seconds - start.get(pid, 0.0) for pid, seconds in self.cpu.get(role, {}).items())

    def guests(self) -> int:
        rows = self.query("SELECT jsonb_array_length(snapshot->'guests') FROM dashboard_cluster LIMIT 1")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def database_url_of(server: str) -> str:
    return urllib.parse.urlsplit(server)._replace(path="/crs_overview_many").geturl()


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=numbers, default=[200], help="comma-separated: one run each (the knee)")
    parser.add_argument("--processes", type=numbers, default=[2, 1], help="worker pool sizes, one run each")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument(
        "--instances", type=int, default=1, help="worker instances of --processes each, named worker1@host, … (-n)"
    )
    parser.add_argument("--interval", type=int, default=10, help="seconds between a cluster's rounds")
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
            run = Run(args.database_url, clusters, processes, args.minutes, args.interval, scheduler, args.instances)
            results.append(run.measure())
            print(table(results[-1:]), flush=True)
            if args.instances == 1:
                keep(results, args.interval)  # after every run: a long knee search stopped midway keeps its runs
            else:
                keep_instances(results[-1])
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
