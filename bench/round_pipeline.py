"""The dashboard's round pipeline on PostgreSQL: collect → snapshot stored → round → rows → push.

For each size (default 12, 100 and 1000 nodes × 20 guests per node, `make_snapshot.synthetic`,
dynamic usage), a cluster whose source is that snapshot (a read-only what-if cluster reading a
file: its collect parses the snapshot where an adapter would build one) runs `tasks.collect` — snapshot
parsed, stored as JSON, one history row per node and per guest, its round queued — then
`tasks.balancing_round` — the stored snapshot read back, `run_round`, the round's rows and
recommendations, the push to the cluster's pages — as the worker runs them, in the
distributed mode's settings (PostgreSQL, Redis for the channel layer and the broker). The
policy is the product's default (bruteforce, 5 moves per round, target imbalance 0.2, mode
static) with threshold 0 and hold duration 0, so that every round plans (a round that waits
costs next to nothing). A cluster's first pair is reported apart (its round finds the N+1
verdict, `n1.N1_EVERY`, and the hourly capacity figures due, and queues their tasks, which
nobody runs here but the N+1 refresh, run after it untimed), then best and median of --runs
pairs, each with the N+1 verdict marked fresh (on a loaded machine a pair can outlast the
minute); --profile prints where the largest size's last round goes. With --n1 each measured
pair finds the verdict due instead, so every round queues its refresh (as one round a minute
does), and the refresh it queued (`tasks.n1_refresh`, beside the round on a worker) is run
and timed on its own after it; the stored verdict's size (PostgreSQL's jsonb, compressed) is
printed. --mode static is the guests' mode where crs.n1_batch decides the losses side by side.

    .venv/bin/python -m bench.round_pipeline [--database-url postgres://…/crs_bench_pipeline]
        [--redis-url redis://127.0.0.1:6379/1] [--runs 5] [--sizes 12 100 1000] [--profile]
        [--n1] [--mode dynamic|static]

The scratch database is dropped and created here (never the product's); the Celery messages
the collects queue (nobody consumes them here) are deleted from the Redis database at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from bench.history import migrated_scratch
from bench.make_snapshot import synthetic

GUESTS_PER_NODE = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/crs_bench_pipeline")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 100, 1000])
    parser.add_argument("--profile", action="store_true", help="print where the largest size's last pair goes")
    parser.add_argument(
        "--n1", action="store_true", help="every measured round queues the N+1 refresh, timed on its own after it"
    )
    parser.add_argument("--mode", choices=["dynamic", "static"], default="dynamic", help="the snapshot's mode")
    args = parser.parse_args()
    secret = os.environ.get("CRS_SECRET_KEY", "bench-only-" + "x" * 50)  # required in the distributed mode
    migrated_scratch(args.database_url, REDIS_URL=args.redis_url, CRS_SECRET_KEY=secret)
    from django.db import connection
    from django.utils import timezone

    from dashboard import tasks
    from dashboard.models import Cluster, GuestSample, Round

    print(
        f"{'nodes':>6} {'guests':>7} {'collect best/median (s)':>24} {'round best/median (s)':>22}"
        f" {'sum best/median (s)':>20} {'first pair (s)':>15}"
        + (f" {'N+1 refresh best/median (s)':>28} {'verdict (kB)':>13}" if args.n1 else "")
    )
    scratch = tempfile.mkdtemp(prefix="crs-pipeline-")
    for nodes in args.sizes:
        path = Path(scratch, f"{nodes}.json")
        path.write_bytes(orjson.dumps(synthetic(nodes, GUESTS_PER_NODE * nodes, args.mode)))
        cluster = Cluster.objects.create(
            name=f"pipeline {nodes}", source_kind="snapshot", source_config={"path": str(path)}
        )
        cluster.policy.threshold, cluster.policy.hold_duration = 0.0, 0
        cluster.policy.save()
        started = time.perf_counter()  # the first pair queues the N+1 refresh and the hourly capacity
        tasks.collect(cluster.pk)
        tasks.balancing_round(cluster.pk)
        first = time.perf_counter() - started
        tasks.n1_refresh(cluster.pk)  # as a worker would: the verdict stored, its lease released
        collects, rounds, refreshes = [], [], []
        for run in range(args.runs):
            profile = cProfile.Profile() if args.profile and nodes == args.sizes[-1] and run == args.runs - 1 else None
            # the N+1 verdict due (--n1) or not
            Cluster.objects.filter(pk=cluster.pk).update(n1_at=None if args.n1 else timezone.now())
            started = time.perf_counter()
            tasks.collect(cluster.pk)
            collected = time.perf_counter()
            if profile:
                profile.enable()
            tasks.balancing_round(cluster.pk)
            if profile:
                profile.disable()
                pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
            collects.append(collected - started)
            rounds.append(time.perf_counter() - collected)
            if args.n1:  # the refresh this round queued, as the worker runs it beside the rounds
                assert Cluster.objects.filter(pk=cluster.pk, n1_queued_until__isnull=False).exists()
                started = time.perf_counter()
                tasks.n1_refresh(cluster.pk)
                refreshes.append(time.perf_counter() - started)
        assert Round.objects.filter(cluster=cluster).count() == args.runs + 1, "every collect had its round"
        assert GuestSample.objects.filter(cluster=cluster).count() == (args.runs + 1) * GUESTS_PER_NODE * nodes
        sums = [c + r for c, r in zip(collects, rounds, strict=True)]
        n1_columns = ""
        if args.n1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_column_size(n1) FROM dashboard_cluster WHERE id = %s", [cluster.pk])
                n1_columns = f" {min(refreshes):>17.3f} / {statistics.median(refreshes):.3f}"
                n1_columns += f" {cursor.fetchone()[0] / 1000:>13.1f}"
        print(
            f"{nodes:>6} {GUESTS_PER_NODE * nodes:>7} {min(collects):>11.3f} / {statistics.median(collects):.3f}"
            f" {min(rounds):>11.3f} / {statistics.median(rounds):.3f}"
            f" {min(sums):>12.3f} / {statistics.median(sums):.3f}"
            f" {first:>15.2f}{n1_columns}"
        )
    shutil.rmtree(scratch)
    import redis

    from dashboard.models.cluster import WHATIF_QUEUE

    redis.Redis.from_url(args.redis_url).delete(WHATIF_QUEUE, "celery")


if __name__ == "__main__":
    main()
