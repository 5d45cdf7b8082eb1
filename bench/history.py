"""History that lasts: its size on disk per cluster, the 90-day trend query, the migrations list.

On PostgreSQL (a scratch database named by --database-url, created and migrated here): one
cluster of 12 nodes × 20 guests, rounds every 10 s, at the steady state downsampling keeps
(24 h raw, guests as 1-minute means; 6 more days of 5-minute means; 83 more days of hourly
means), made in bulk by generate_series. Reported:

* the history's size on disk (tables and indexes) and per day it covers;
* the trend query of the 90-day range (history.trend, hourly points), median of 7;
* the API's migration list (GET /api/v1/migrations/, first page of 100 and of 1 000) with
  10 000 migrations stored, median of 7.

    .venv/bin/python -m bench.history [--database-url postgres://postgres@127.0.0.1:5432/crs_bench_history]
"""

import argparse
import os
import statistics
import time
from datetime import timedelta

NODES, GUESTS, ROUND_S = 12, 240, 10
TABLES = ("dashboard_round", "dashboard_nodesample", "dashboard_guestsample")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/crs_bench_history")
    args = parser.parse_args()
    migrated_scratch(args.database_url)
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from dashboard import history
    from dashboard.models import Cluster

    cluster = Cluster.objects.create(name="bench", source_kind="simulator")
    now = timezone.now()
    tiers = [  # (from, to, seconds between rows: rounds and nodes, guests)
        (now - timedelta(hours=24), now, ROUND_S, 60),
        (now - timedelta(days=7), now - timedelta(hours=24), 300, 300),
        (now - timedelta(days=90), now - timedelta(days=7), 3600, 3600),
    ]
    started = time.monotonic()
    with connection.cursor() as cursor:
        for since, until, step, guest_step in tiers:
            span_s = 0 if step == ROUND_S else step
            series = (
                "generate_series(%s::timestamptz, %s::timestamptz - interval '1 second', make_interval(secs => %s))"
            )
            cursor.execute(
                "INSERT INTO dashboard_round (cluster_id, at, imbalance, threshold, decision, hold_count, explanation,"
                f" node_usage, span_s, samples) SELECT %s, t, random() * 0.5, 0.3, 'holding', 1, '{{}}'::jsonb,"
                f" '{{}}'::jsonb, %s, %s FROM {series} t",
                [cluster.pk, span_s, max(1, step // ROUND_S), since, until, step],
            )
            cursor.execute(
                "INSERT INTO dashboard_nodesample (cluster_id, at, node, cpu, memory, span_s, samples)"
                f" SELECT %s, t, 'node' || n, random(), random(), %s, %s FROM {series} t, generate_series(1, %s) n",
                [cluster.pk, span_s, max(1, step // ROUND_S), since, until, step, NODES],
            )
            cursor.execute(
                "INSERT INTO dashboard_guestsample (cluster_id, at, guest, node, cpu_usage, mem_usage_bytes, span_s,"
                f" samples, cpu_peak, mem_peak_bytes) SELECT %s, t, 'vm:' || (100 + g), 'node' || (g %% {NODES} + 1),"
                f" random() * 4, random() * 8e9, %s, %s, random() * 8, random() * 16e9"
                f" FROM {series} t, generate_series(1, %s) g",
                [cluster.pk, guest_step, max(1, guest_step // ROUND_S), since, until, guest_step, GUESTS],
            )
        cursor.execute("ANALYZE")
        sizes = {}
        for table in TABLES:
            cursor.execute("SELECT pg_total_relation_size(%s), (SELECT count(*) FROM " + table + ")", [table])
            sizes[table] = cursor.fetchone()
    print(f"generated in {time.monotonic() - started:.0f} s")
    total = sum(size for size, _ in sizes.values())
    for table, (size, rows) in sizes.items():
        print(f"{table:24} {rows:>9} rows {size / 2**20:8.1f} MiB")
    print(
        f"history of one cluster (12 nodes × 20 guests, 90 days): {total / 2**20:.1f} MiB,"
        f" {total / 90 / 2**20:.2f} MiB per day"
    )

    trend = timed(lambda: history.trend(cluster, now - timedelta(days=90), history.HOUR))
    points = len(history.trend(cluster, now - timedelta(days=90), history.HOUR))
    print(f"trend query, 90 days ({points} hourly points): median {trend * 1000:.0f} ms")

    admin = get_user_model().objects.create_superuser("bench", password="bench")
    fields = "cluster_id, state, leader, guests, source, target, imbalance_before, imbalance_after, relative_gain,"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO dashboard_migration ({fields} margin, method, step, alternatives, priority, automatic,"
            " reason, task_ids, progress, suggested_at, decided_by_id, started_at, finished_at)"
            " SELECT %s, 'done', 'vm:' || (100 + i %% 240), jsonb_build_array('vm:' || (100 + i %% 240)), 'node01',"
            " 'node02', 0.4, 0.3, 0.25, 0.1, 'bruteforce', 0, '[]'::jsonb, 3, false, '', '[]'::jsonb, 1.0,"
            " now() - make_interval(mins => i), %s, now() - make_interval(mins => i), now() - make_interval(mins => i)"
            " FROM generate_series(1, 10000) i",
            [cluster.pk, admin.pk],
        )
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    for size in (100, 1000):
        url = f"/api/v1/migrations/?page_size={size}"
        assert client.get(url).status_code == 200
        print(f"GET {url} with 10 000 stored: median {timed(lambda url=url: client.get(url)) * 1000:.0f} ms")
    connection.close()


def timed(call, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fresh(url: str) -> None:
    """Drop and create the scratch database (never the product's)."""
    from urllib.parse import urlsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(
        host=parts.hostname, port=parts.port or 5432, user=parts.username, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def migrated_scratch(url: str, **environment: str) -> None:
    """Django on a fresh, migrated scratch database at `url` (with the production settings and
    `environment` besides), as the bench scripts that store rows start."""
    os.environ["DATABASE_URL"] = url
    os.environ.update(environment)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    fresh(url)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


if __name__ == "__main__":
    main()
