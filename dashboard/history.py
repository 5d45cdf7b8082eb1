"""History that lasts: samples at every collect, folded into coarser means as they age.

Three kinds of rows (models.Round, NodeSample, GuestSample) share one scheme: a row covers
`span_s` seconds (0 = one round or one collect) and stands for `samples` of them; a guest row
also keeps the highest value it covers (its peaks, folded by MAX), for the forecast.

What the forecast's 28 days of guest rows cost (PostgreSQL, measured with pg_total_relation_size
over 1.5 M generated rows: 155 B a row with its two indexes, 104 B a tuple; the two peak
columns are 16 B of it): a guest keeps 1 440 1-minute + 1 728 5-minute + 504 hourly rows,
3 672 rows, about 0.55 MiB. 12 nodes × 240 guests: 0.88 M rows, 137 MB (the peaks 14 MB);
50 nodes × 1 000 guests: 3.7 M rows, 570 MB (the peaks 59 MB). The default 90 days of hourly
rows (CRS_HISTORY_HOURLY) add 1 488 rows a guest beyond the forecast's need. Raw rows
are kept for settings.CRS_HISTORY_RAW (guests as 1-minute means), then folded into
5-minute means until CRS_HISTORY_FIVE_MINUTE, then hourly means until CRS_HISTORY_HOURLY,
then dropped. Folding is one INSERT … SELECT … GROUP BY and one DELETE per tier and table,
in one transaction, so it stays set-based at millions of rows and reads never see a bucket
twice or not at all; the same SQL runs on PostgreSQL and SQLite (the embedded mode), only
the bucket expression differs.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, F, Func, Max, Model, Sum
from django.utils import timezone

import crs.forecast
import crs.usage
from crs.model import Snapshot

from .models import Cluster, GuestSample, Migration, NodeSample, Round
from .timesql import FIVE_MINUTES, HOUR, MINUTE, bucket_sql


class Bucket(Func):
    """bucket_sql as an ORM expression, for the trend query."""

    output_field = DateTimeField()

    def __init__(self, expression, seconds: int):
        super().__init__(expression)
        self.seconds = int(seconds)

    def as_sql(self, compiler, connection, **extra):  # type: ignore[override]  # Django passes only these here
        sql, params = compiler.compile(self.source_expressions[0])
        return bucket_sql(sql, self.seconds, connection.vendor), params


# -- recording ---------------------------------------------------------------------------------------


def record_samples(cluster: Cluster, snapshot: Snapshot, at: datetime) -> None:
    """One row per node and per guest for this collect (folded later by `downsample`)."""
    _insert(
        NodeSample,
        ("cluster_id", "at", "span_s", "samples", "node", "cpu", "memory"),
        [(cluster.pk, at, 0, 1, s.name, s.cpu_load, s.mem_load) for s in crs.usage.node_stats(snapshot, "dynamic")],
    )
    _insert(
        GuestSample,
        (
            "cluster_id",
            "at",
            "span_s",
            "samples",
            "guest",
            "node",
            "cpu_usage",
            "mem_usage_bytes",
            "cpu_peak",
            "mem_peak_bytes",
        ),
        [
            (cluster.pk, at, 0, 1, g.sid, g.node, g.cpu_usage, g.mem_usage_bytes, g.cpu_usage, g.mem_usage_bytes)
            for g in snapshot.guests
        ],
    )


def _insert(model: type[Model], columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Fresh rows, many at once. On PostgreSQL with COPY: `bulk_create` builds a model and an
    SQL parameter per value, about a second of a 1000-node collect's 20 000 guest rows,
    where COPY streams them in a few hundredths. SQLite (the embedded mode's small
    clusters) keeps `bulk_create`, which also converts the datetimes as Django stores them."""
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(model(**dict(zip(columns, row, strict=True))) for row in rows)
        return
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(  # psycopg's own cursor under Django's wrapper
            f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
        ) as copy,
    ):
        for row in rows:
            copy.write_row(row)


# -- downsampling ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """How one table folds: the columns that identify a series, the means, and fixed values of a folded row."""

    model: type[Model]
    keys: tuple[str, ...]
    means: tuple[str, ...]
    extra: tuple[tuple[str, str], ...] = ()  # (column, SQL over the group)


JSON_EMPTY = {"postgresql": "'{}'::jsonb", "sqlite": "'{}'"}

ROUNDS = Table(
    Round,
    ("cluster_id",),
    ("imbalance", "threshold"),
    (
        ("imbalance_max", "MAX(COALESCE(imbalance_max, imbalance))"),
        ("decision", "'downsampled'"),
        ("hold_count", "MAX(hold_count)"),
        ("explanation", "{json}"),
        ("node_usage", "{json}"),
        ("duration_s", "AVG(duration_s)"),
    ),
)
NODES = Table(NodeSample, ("cluster_id", "node"), ("cpu", "memory"))
# A guest's peaks fold by MAX: a 1-minute spike stays the peak of its 5-minute and hourly rows.
GUESTS = Table(
    GuestSample,
    ("cluster_id", "guest", "node"),
    ("cpu_usage", "mem_usage_bytes"),
    (("cpu_peak", "MAX(cpu_peak)"), ("mem_peak_bytes", "MAX(mem_peak_bytes)")),
)
# The next hour's forecast reads the same hour of up to 28 past days (crs.forecast.DAYS_BACK),
# so guest rows stay that long (and the hour after) even when CRS_HISTORY_HOURLY is shorter.
FORECAST_BACK = timedelta(days=crs.forecast.DAYS_BACK, hours=1)


def fold(table: Table, span_s: int, before: datetime) -> int:
    """Replace the rows finer than `span_s` seconds older than `before` by their `span_s`-second
    means (weighted by the samples each stands for). `before` is aligned down to a bucket, so
    a bucket is folded whole, once. Returns the rows replaced."""
    vendor = connection.vendor
    db_table = table.model._meta.db_table
    epoch = int(before.timestamp()) // span_s * span_s
    # As the backend stores it: SQLite compares text, and a bare aware datetime there reads
    # '… +00:00', after a row at the cutoff itself, which was folded a tier early.
    cutoff = connection.ops.adapt_datetimefield_value(datetime.fromtimestamp(epoch, tz=UTC))
    keys = ", ".join(table.keys)
    means = ", ".join(f"SUM({m} * samples) / SUM(samples)" for m in table.means)
    extra_cols = "".join(f", {c}" for c, _ in table.extra)
    extra_sql = "".join(", " + sql.format(json=JSON_EMPTY[vendor]) for _, sql in table.extra)
    insert = (
        f"INSERT INTO {db_table} ({keys}, at, span_s, samples, {', '.join(table.means)}{extra_cols}) "
        f"SELECT {keys}, {bucket_sql('at', span_s, vendor)} AS bucket, %s, SUM(samples), {means}{extra_sql} "
        f"FROM {db_table} WHERE span_s < %s AND at < %s GROUP BY {keys}, bucket"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(insert, [span_s, span_s, cutoff])
        cursor.execute(f"DELETE FROM {db_table} WHERE span_s < %s AND at < %s", [span_s, cutoff])
        return cursor.rowcount


def downsample(now: datetime | None = None) -> dict[str, int]:
    """Fold every table's aged rows into the next tier and drop what is older than the last.
    Safe to run twice and at any time: a run finds nothing more to fold. Returns rows replaced per table."""
    now = now or timezone.now()
    done = {"guest 1-minute": fold(GUESTS, MINUTE, now - timedelta(seconds=MINUTE))}
    for table in (ROUNDS, NODES, GUESTS):
        name = table.model._meta.model_name
        done[f"{name} 5-minute"] = fold(table, FIVE_MINUTES, now - settings.CRS_HISTORY_RAW)
        done[f"{name} hourly"] = fold(table, HOUR, now - settings.CRS_HISTORY_FIVE_MINUTE)
        kept = max(settings.CRS_HISTORY_HOURLY, FORECAST_BACK) if table is GUESTS else settings.CRS_HISTORY_HOURLY
        done[f"{name} dropped"] = table.model._default_manager.filter(at__lt=now - kept).delete()[0]
    return done


# -- reading -----------------------------------------------------------------------------------------

# Range → (how far back, the trend's bucket in seconds): about 1 000–2 200 points each.
RANGES = {
    "3h": (timedelta(hours=3), 10),
    "24h": (timedelta(hours=24), MINUTE),
    "7d": (timedelta(days=7), FIVE_MINUTES),
    "30d": (timedelta(days=30), HOUR),
    "90d": (timedelta(days=90), HOUR),
}


def trend(cluster: Cluster, since: datetime, seconds: int) -> list[dict]:
    """The imbalance and threshold per `seconds`-bucket since `since`: means weighted by rounds, and the highest."""
    rows = (
        cluster.rounds.filter(at__gte=since)
        .order_by()
        .values(bucket=Bucket("at", seconds))
        .annotate(
            imbalance_sum=Sum(F("imbalance") * F("samples")),
            threshold_sum=Sum(F("threshold") * F("samples")),
            rounds=Sum("samples"),
            peak=Max("imbalance_max"),
            top=Max("imbalance"),
        )
        .order_by("bucket")
    )
    return [
        {
            "at": row["bucket"].isoformat(),
            "imbalance": row["imbalance_sum"] / row["rounds"],
            "imbalance_max": max(v for v in (row["peak"], row["top"]) if v is not None),
            "threshold": row["threshold_sum"] / row["rounds"],
            "rounds": row["rounds"],
        }
        for row in rows
    ]


def markers(cluster: Cluster, since: datetime) -> list[dict]:
    """Migrations started since `since`: where the chart marks them, and who approved each."""
    started = (
        cluster.migrations.filter(started_at__gte=since)
        .select_related("decided_by")
        .order_by("started_at", "pk")
        .only(
            "pk",
            "started_at",
            "leader",
            "guests",
            "source",
            "target",
            "state",
            "automatic",
            "decided_by__username",
            "imbalance_before",
            "imbalance_after",
        )
    )
    return [marker(m) for m in started]


def marker(m: Migration) -> dict:
    return {
        "id": m.pk,
        "at": cast(datetime, m.started_at).isoformat(),  # markers are of migrations that started
        "guests": m.guests,
        "source": m.source,
        "target": m.target,
        "state": m.state,
        "approved_by": "automatic" if m.automatic else (m.decided_by.get_username() if m.decided_by else None),
        "imbalance_before": m.imbalance_before,
        "imbalance_after": m.imbalance_after,
    }


def history_range(cluster: Cluster, name: str, now: datetime | None = None) -> dict:
    """What the trend chart shows for one range: the trend at the range's resolution and the migrations in it."""
    back, seconds = RANGES[name]
    since = (now or timezone.now()) - back
    return {
        "range": name,
        "since": since.isoformat(),
        "resolution": seconds,
        "points": trend(cluster, since, seconds),
        "markers": markers(cluster, since),
        "forecast": next_hour(cluster),
    }


def next_hour(cluster: Cluster) -> dict | None:
    """Per node, the next hour's forecast peak as the latest round saw it (rounds.node_usage);
    None when it saw none (the setting off, or no guest with a day of history)."""
    last = cluster.rounds.filter(span_s=0).order_by("-at").values_list("at", "node_usage").first()
    nodes = {name: u["forecast"] for name, u in last[1].items() if "forecast" in u} if last else {}
    return {"at": last[0].isoformat(), "nodes": nodes} if last and nodes else None
