"""What one round of the simulated default cluster (12 nodes, 416 guests) costs on a real worker.

A Celery worker started as `make worker` starts it (prefork, one process, production settings,
PostgreSQL and Redis) runs --rounds of beat's task for the cluster, one every --every seconds,
sent from here (no beat). Reported per round:

* the worker's CPU: its pool process and its main process, from /proc/<pid>/stat;
* PostgreSQL's CPU: every backend of the scratch database (the postmaster's children whose
  title names it), sampled from /proc/<pid>/stat every few milliseconds by a thread here, so a
  backend that lives for one task is counted too (up to its last sample, a few ms before it
  ends); sampling after each round, as many_clusters does, misses such backends whole. A
  backend that lives less than the sampling step is still missed: the ended backends' CPU
  (the postmaster's cutime + cstime: every database's, the other users' of the server too)
  is reported beside it, less the same over an idle period as long, measured just before;
* new connections: backends that were not there at the start, and pg_stat_database's sessions;
* queries and `UPDATE dashboard_cluster` statements, counted in this process over one round
  of the same task (the worker runs the same code).

--task collect measures the layout before collect and round were one task: the collect
queues the round (balancing_round), both on the worker. Before this bench existed, run it from
a checkout of the older commit with this file copied in.

    .venv/bin/python -m bench.round_cost [--database-url postgres://…/crs_bench_round]
        [--redis-url redis://127.0.0.1:6379/1] [--rounds 100] [--every 0.5] [--task collect_and_round] [--record]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.history import migrated_scratch
from bench.results import record

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid: int) -> float | None:
    """A process's user + system CPU in ms; None once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except FileNotFoundError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def reaped_ms(pid: int) -> float:
    """The CPU in ms of `pid`'s children that ended and were waited for (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) * 1000 / TICK


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def sample_backends(postmaster: int, name: str, skip: int, last: dict[int, float], stop: threading.Event) -> None:
    """Each backend of database `name` (but `skip`) with its CPU so far in `last`: every few ms
    until `stop`, or once if it is set."""
    titles: dict[int, bool] = {}
    while True:
        for pid in children(postmaster):
            if pid not in titles:
                try:
                    titles[pid] = pid != skip and f" {name} " in Path(f"/proc/{pid}/cmdline").read_text()
                except FileNotFoundError:
                    titles[pid] = False
            if titles[pid] and (ms := cpu_ms(pid)) is not None:
                last[pid] = ms
        if stop.is_set():
            return
        time.sleep(0.002)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/crs_bench_round")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between two rounds' tasks")
    parser.add_argument("--task", default="collect_and_round", choices=["collect_and_round", "collect"])
    parser.add_argument("--record", action="store_true", help="write the figure to bench/results/ (bench.results)")
    args = parser.parse_args()
    env = {"REDIS_URL": args.redis_url, "CRS_SECRET_KEY": "bench-only-" + "x" * 50}
    migrated_scratch(args.database_url, **env)
    import psycopg
    import redis
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dashboard import tasks
    from dashboard.models import Cluster, Round
    from project.celery import app

    redis.Redis.from_url(args.redis_url).flushdb()
    cluster = Cluster.objects.create(name="bench", source_kind="simulator", source_config={})
    cluster.policy.threshold, cluster.policy.hold_duration = 0.0, 0  # every round plans
    cluster.policy.save()

    def one_round() -> None:
        getattr(tasks, args.task)(cluster.pk)
        if args.task == "collect":
            tasks.balancing_round(cluster.pk)

    for _ in range(3):
        one_round()
    tasks.n1_refresh(cluster.pk)  # the first round found the N+1 verdict and the capacity figures due:
    tasks.capacity_counts(cluster.pk)  # done, as the worker does them beside the rounds
    with CaptureQueriesContext(connection) as queries:
        one_round()
    updates = sum(q["sql"].startswith('UPDATE "dashboard_cluster"') for q in queries.captured_queries)
    guests = len(Cluster.objects.get(pk=cluster.pk).snapshot["guests"])
    connection.close()

    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "project", "worker", "-l", "warning", "-Q", "celery,whatif"]
        + ["--concurrency", "1", "--without-mingle", "--without-gossip"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": args.database_url, **env},
    )
    monitor = psycopg.connect(args.database_url, autocommit=True)
    name = monitor.info.dbname

    def sessions() -> int:
        monitor.execute("SELECT pg_stat_clear_snapshot()")
        return monitor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()[0]

    def rounds() -> int:
        return Round.objects.filter(cluster=cluster).count()

    due = {"due": True} if args.task == "collect_and_round" else {}  # as beat sends it (older commits: none)
    try:
        done = rounds()
        for _ in range(5):  # warm-up: the pool process started, its connections open
            app.send_task(f"dashboard.tasks.{args.task}", args=[cluster.pk], kwargs=due, queue="celery")
            deadline = time.monotonic() + 120
            while rounds() == done and time.monotonic() < deadline:
                time.sleep(0.05)
            done = rounds()
        time.sleep(args.every)
        (pool,) = children(worker.pid)
        skip = monitor.info.backend_pid
        postmaster = int(Path(f"/proc/{skip}/stat").read_text().rpartition(")")[2].split()[1])
        at_start: dict[int, float] = {}
        once = threading.Event()
        once.set()
        sample_backends(postmaster, name, skip, at_start, once)
        last, stop = dict(at_start), threading.Event()
        sampler = threading.Thread(target=sample_backends, args=(postmaster, name, skip, last, stop), daemon=True)
        idle = reaped_ms(postmaster)
        time.sleep(args.rounds * args.every)
        worker_start, pool_start, sessions_start = cpu_ms(worker.pid) or 0.0, cpu_ms(pool) or 0.0, sessions()
        reaped_start = reaped_ms(postmaster)
        idle = reaped_start - idle
        sampler.start()
        started = time.monotonic()
        for k in range(args.rounds):
            app.send_task(f"dashboard.tasks.{args.task}", args=[cluster.pk], kwargs=due, queue="celery")
            time.sleep(max(0.0, started + (k + 1) * args.every - time.monotonic()))
        stop.set()
        sampler.join()
        made = rounds() - done
        pool_ms, worker_ms = (cpu_ms(pool) or 0.0) - pool_start, (cpu_ms(worker.pid) or 0.0) - worker_start
        new_sessions = sessions() - sessions_start
        reaped = reaped_ms(postmaster) - reaped_start - idle
    finally:
        worker.terminate()
        worker.wait(30)
    postgres_ms = sum(ms - at_start.get(pid, 0.0) for pid, ms in last.items())
    new_backends = len(set(last) - set(at_start))
    print(f"{args.task}: {made} rounds of {guests} guests, one every {args.every} s (sent {args.rounds})")
    print(
        "| worker pool process | worker main | PostgreSQL backends sampled | ended backends less idle"
        " | new backends | new sessions | queries (UPDATE dashboard_cluster) |"
    )
    print(
        f"| {pool_ms / made:.1f} ms | {worker_ms / made:.1f} ms | {postgres_ms / made:.1f} ms | {reaped / made:.1f} ms"
        f" | {new_backends / made:.2f} | {new_sessions / made:.2f} | {len(queries.captured_queries)} ({updates}) |"
    )
    if args.record:
        record(
            "web-7-round-cost-12x416",
            "a round of the simulated 12-node, 416-guest cluster on a worker as `make worker` runs it, PostgreSQL",
            f"worker {pool_ms / made:.1f} ms CPU (pool process; main {worker_ms / made:.1f}), PostgreSQL"
            f" {postgres_ms / made:.1f} ms, {new_sessions / made:.2f} new connections, {len(queries.captured_queries)}"
            f" queries ({updates} UPDATE dashboard_cluster)",
            "worker ≤ 40 ms CPU, PostgreSQL ≤ 15 ms CPU, 0 new connections",
        )


if __name__ == "__main__":
    main()
