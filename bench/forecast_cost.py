"""What the live forecast costs a round (issue 26; the wave's bound: at most 10 % at 12 nodes).

On PostgreSQL (a scratch database named by --database-url, dropped and created here): the
simulator's default cluster (12 nodes, 416 guests) collected once, and 28 days of its guests'
history with peaks as downsampling keeps it (1-minute rows for a day, 5-minute rows to day 7,
hourly rows to day 28), made in bulk by generate_series: each guest's use as collected, its
peaks up to 20 % above (so the forecast changes few decisions: the cost is the reading). Timed, medians of --runs:

* a round (`dashboard.rounds.run`, the web side's load → decide → apply) with the cluster's
  `forecast` setting off, and on between the hourly loads (forecasts cached);
* the hourly load of the past days' three hours (`dashboard.forecasts.load`), which one round
  an hour pays;
* the forecasts of a 5-minute slot with each guest's trial (`dashboard.forecasts.guest_forecasts`),
  which one round in 30 pays;
* the cost per round averaged over an hour of 10-s rounds: (on + load / 360 + slot / 30) against off.

    .venv/bin/python -m bench.forecast_cost [--database-url postgres://…/crs_bench_forecast] [--runs 15]
"""

import argparse
import time
from datetime import timedelta

from bench.history import migrated_scratch, timed
from bench.results import record

ROUND_S = 10  # the rounds an hour's load is spread over
TIERS = (  # (days back from, days back to, seconds between a guest's rows)
    (1, 0, 60),
    (7, 1, 300),
    (28, 7, 3600),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/crs_bench_forecast")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    migrated_scratch(args.database_url)
    from django.db import connection
    from django.utils import timezone

    import crs.snapshot
    from dashboard import forecasts, rounds
    from dashboard.models import Cluster, Policy

    with Cluster.objects.opened_source(Cluster.objects.create(name="bench", source_kind="simulator").pk) as (
        cluster,
        source,
    ):
        snapshot = source.collect(time.time())  # as tasks.collect takes it, without queueing the round
    cluster.snapshot, cluster.collected_at = crs.snapshot.to_dict(snapshot), timezone.now()
    cluster.save()
    now = timezone.now()
    with connection.cursor() as cursor:
        for back_from, back_to, step in TIERS:
            cursor.execute(
                "INSERT INTO dashboard_guestsample (cluster_id, at, guest, node, cpu_usage, mem_usage_bytes, span_s,"
                " samples, cpu_peak, mem_peak_bytes) SELECT %s, t, g.sid, g.node, g.cpu, g.mem, %s, 1,"
                " g.cpu * (1 + 0.2 * random()), g.mem FROM generate_series(%s::timestamptz, %s::timestamptz,"
                " make_interval(secs => %s)) t, unnest(%s::text[], %s::text[], %s::float8[], %s::float8[])"
                " AS g(sid, node, cpu, mem)",
                [
                    cluster.pk,
                    0 if step == 60 else step,
                    now - timedelta(days=back_from),
                    now - timedelta(days=back_to, seconds=step),
                    step,
                    [g.sid for g in snapshot.guests],
                    [g.node for g in snapshot.guests],
                    [g.cpu_usage or 0.0 for g in snapshot.guests],
                    [g.mem_usage_bytes or 0.0 for g in snapshot.guests],
                ],
            )
        cursor.execute("ANALYZE dashboard_guestsample")
        cursor.execute("SELECT count(*) FROM dashboard_guestsample")
        (rows,) = cursor.fetchone()

    def round_with(setting: str) -> float:
        Policy.objects.filter(cluster=cluster).update(forecast=setting)
        cluster.refresh_from_db()
        rounds.run(cluster, cluster.latest_snapshot())  # warm: the forecast's hourly load, if on
        return timed(lambda: rounds.run(cluster, cluster.latest_snapshot()), args.runs) * 1000

    off, on = round_with("off"), round_with("on")
    hour = int(time.time()) // 3600 * 3600
    load = timed(lambda: forecasts.load(cluster.pk, hour), max(3, args.runs // 3)) * 1000
    loaded = forecasts.load(cluster.pk, hour)
    slot = timed(lambda: forecasts.guest_forecasts(loaded, 0), max(3, args.runs // 3)) * 1000
    per_hour, per_slot = 3600 // ROUND_S, 300 // ROUND_S
    averaged = on + load / per_hour + slot / per_slot
    ratio = averaged / off - 1
    print(f"{len(snapshot.guests)} guests, {rows} history rows over 28 days")
    print(f"round, forecast off: {off:.1f} ms; on, between loads: {on:.1f} ms ({on / off - 1:+.0%})")
    print(
        f"hourly load: {load:.0f} ms; a slot's forecasts: {slot:.0f} ms; averaged over {per_hour} rounds of "
        f"{ROUND_S} s: {averaged:.1f} ms ({ratio:+.0%})"
    )
    record(
        "forecast_cost",
        f"a round at 12 nodes, {len(snapshot.guests)} guests, with the live forecast on",
        f"{ratio:+.0%} over an hour of {ROUND_S}-s rounds ({off:.1f} → {on:.1f} ms a round, {load:.0f} ms an hour, "
        f"{slot:.0f} ms each 5 minutes)",
        "≤ +10 %",
        {"off_ms": off, "on_ms": on, "load_ms": load, "slot_ms": slot, "rows": rows},
    )


if __name__ == "__main__":
    main()
