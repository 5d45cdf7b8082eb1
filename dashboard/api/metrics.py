"""/metrics for Prometheus: each cluster's balancing figures, read from the database at scrape time.

Read at scrape time rather than counted in process: rounds and migrations run in the
workers, /metrics is served by the web, and in the distributed mode neither knows the
other's memory. The database is the record, so every web process answers the same.
Open to the allow-list (loopback by default) and to a bearer token (CRS_METRICS_ALLOW,
CRS_METRICS_TOKEN); anyone else gets a 403.
"""

import hmac
import ipaddress
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import DatabaseError
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .. import health, outcomes
from ..models import Cluster, Migration, Round, last_round

# Migrations take seconds (a container) to many minutes (a VM with much memory).
DURATION_BUCKETS = [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600]


class ClusterCollector:
    """One sample per cluster (label `cluster`) for each figure the page shows."""

    def collect(self):
        def gauge(name, help_text, labels=("cluster",)):
            return GaugeMetricFamily(name, help_text, labels=list(labels))

        imbalance = gauge("crs_imbalance", "Imbalance of the last round (fraction, 0-1).")
        threshold = gauge("crs_threshold", "Threshold the last round was held against (fraction, 0-1).")
        hold = gauge("crs_hold_count", "Rounds in a row above the threshold so far.")
        hold_needed = gauge("crs_hold_duration_rounds", "Rounds above the threshold needed before a recommendation.")
        pending = gauge("crs_pending_recommendations", "Recommendations waiting for a person.")
        states = gauge("crs_migrations", "Migrations by state.", ("cluster", "state"))
        round_seconds = gauge("crs_round_duration_seconds", "How long the last round took (engine and recording).")
        last_round_at = gauge("crs_last_round_timestamp_seconds", "When the last round ran (Unix time).")
        source_up = gauge(
            "crs_source_up", "1 if the last collection worked, 0 if the source refused or was unreachable."
        )
        source_error_at = gauge("crs_source_error_timestamp_seconds", "When the source last failed (Unix time).")
        paid = gauge(
            "crs_moves_paid_share",
            f"Share of the moves done in the last {outcomes.SUMMARY_DAYS} days and judged that paid (0-1); "
            "absent while none is judged.",
        )
        durations = HistogramMetricFamily(
            "crs_migration_duration_seconds", "Duration of finished migrations (done or failed).", labels=["cluster"]
        )

        try:
            clusters = list(scraped_clusters())
        except DatabaseError:  # the database is away: crs_component_up says so, nothing else is known
            return
        counts: dict[int, dict[str, int]] = {}
        for row in Migration.objects.values("cluster_id", "state").annotate(n=Count("pk")):
            counts.setdefault(row["cluster_id"], {})[row["state"]] = row["n"]
        last_rounds = Round.objects.only("imbalance", "threshold", "at", "duration_s").in_bulk(
            [c.last_round_pk for c in clusters if c.last_round_pk]
        )
        finished = histograms()
        shares = paid_shares()
        for cluster in clusters:
            name = [cluster.name]
            last = last_rounds.get(cluster.last_round_pk)
            if last is not None:
                imbalance.add_metric(name, last.imbalance)
                threshold.add_metric(name, last.threshold)
                last_round_at.add_metric(name, last.at.timestamp())
                if last.duration_s is not None:
                    round_seconds.add_metric(name, last.duration_s)
            hold.add_metric(name, cluster.hold_count)
            hold_needed.add_metric(name, cluster.policy.hold_duration)
            by_state = counts.get(cluster.pk, {})
            pending.add_metric(name, by_state.get("suggested", 0))
            for state in Migration.STATES:
                states.add_metric([cluster.name, state], by_state.get(state, 0))
            source_up.add_metric(name, 0 if cluster.source_error else 1)
            if cluster.source_error_at:
                source_error_at.add_metric(name, cluster.source_error_at.timestamp())
            durations.add_metric(name, *finished.get(cluster.pk, EMPTY_HISTOGRAM))
            if cluster.pk in shares:
                paid.add_metric(name, shares[cluster.pk])
        yield from (imbalance, threshold, hold, hold_needed, pending, states, round_seconds, last_round_at)
        yield from (source_up, source_error_at, paid, durations)


def scraped_clusters():
    """The live clusters with only what a scrape reports, and the pk of each one's last round.
    Not the whole row: every scrape decoded each cluster's snapshot (megabytes of JSON at 20
    clusters) only to drop it: most of a scrape's time, and the web's memory growth (bench/README.md)."""
    return (
        Cluster.objects.filter(archived=False)
        .select_related("policy")
        .only("name", "hold_count", "source_error", "source_error_at", "policy__hold_duration")
        .annotate(last_round_pk=last_round("pk"))
    )


def histograms() -> dict[int, tuple[list, float]]:
    """Per cluster, the cumulative buckets and the sum of its finished migrations' durations,
    counted by the database in one query (not every finished migration read at every scrape)."""
    took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    buckets = {f"le_{le}": Count("pk", filter=Q(took__lte=timedelta(seconds=le))) for le in DURATION_BUCKETS}
    rows = (
        Migration.objects.filter(state__in=["done", "failed"], started_at__isnull=False, finished_at__isnull=False)
        .annotate(took=took)
        .values("cluster_id")
        .annotate(n=Count("pk"), total=Sum("took"), **buckets)
        .values_list("cluster_id", "n", "total", *buckets)
    )
    return {
        cluster_id: ([(str(le), c) for le, c in zip(DURATION_BUCKETS, counts)] + [("+Inf", n)], total.total_seconds())
        for cluster_id, n, total, *counts in rows
    }


def paid_shares() -> dict[int, float]:
    """Per cluster, the share of its judged moves of the last days that paid, as the page's
    record counts them (outcomes.summary), in one query."""
    since = timezone.now() - timedelta(days=outcomes.SUMMARY_DAYS)
    rows = (
        Migration.objects.filter(state="done", finished_at__gte=since, paid__isnull=False)
        .values("cluster_id")
        .annotate(judged=Count("pk"), paid=Count("pk", filter=Q(paid=True)))
        .values_list("cluster_id", "judged", "paid")
    )
    return {cluster_id: paid / judged for cluster_id, judged, paid in rows}


EMPTY_HISTOGRAM = ([(str(le), 0) for le in DURATION_BUCKETS] + [("+Inf", 0)], 0.0)


class ComponentCollector:
    """crs_component_up per part of the service, as /healthz reports them (dashboard/health.py)."""

    def collect(self):
        up = GaugeMetricFamily(
            "crs_component_up",
            "1 if the part works: database and channel layer as the web reaches them, "
            "worker and beat by their heartbeats.",
            labels=["component"],
        )
        for name, state in health.components().items():
            up.add_metric([name], 1 if state == "ok" else 0)
        yield up


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(ComponentCollector())
REGISTRY.register(ClusterCollector())


def allowed(request) -> bool:
    """The allow-list (networks, loopback by default) or the bearer token, if one is configured."""
    token = settings.CRS_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.CRS_METRICS_ALLOW)


@require_GET
@login_not_required  # Prometheus has no session; the allow-list and the token guard it
def metrics(request):
    if not allowed(request):
        return HttpResponse(
            "metrics: allowed from CRS_METRICS_ALLOW networks, or with Authorization: Bearer CRS_METRICS_TOKEN\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
