"""What rounds and collects record: the imbalance trend and the node and guest samples of the history."""

from django.db import models


def last_round(field: str) -> models.Subquery:
    """Each cluster's last round's `field`, to annotate clusters with: one query for them all."""
    return models.Subquery(Round.objects.filter(cluster=models.OuterRef("pk")).order_by("-at").values(field)[:1])


class Round(models.Model):
    """One balancing round's outcome: a point of the imbalance trend and the round status."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="rounds")
    at = models.DateTimeField(db_index=True)
    imbalance = models.FloatField()  # fraction, engine scale
    threshold = models.FloatField()  # fraction, as it was for this round
    decision = models.CharField(max_length=20)
    hold_count = models.IntegerField()  # rounds of the hold served, as in the explanation
    explanation = models.JSONField()
    node_usage = models.JSONField()  # {node: {"cpu": fraction, "memory": fraction}}
    duration_s = models.FloatField(null=True, blank=True)  # seconds the round took (engine and recording), for /metrics
    happiness = models.FloatField(null=True, blank=True)  # share of happy guests (crs.happiness); None: no data
    # As it ages a round is folded into a mean over `span_s` seconds (history.py): 0 = one round.
    # A folded row's imbalance and threshold are means, `imbalance_max` the highest it covers,
    # its decision "downsampled", its explanation and node usage empty (node_samples keep those).
    span_s = models.IntegerField(default=0)
    samples = models.IntegerField(default=1)  # rounds it stands for
    imbalance_max = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"])]
        ordering = ["at"]


class NodeSample(models.Model):
    """One node's measured CPU and memory use (fractions) at one collect, or their mean over
    `span_s` seconds once it ages (history.py): the node lines of the history."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="node_samples")
    at = models.DateTimeField()
    span_s = models.IntegerField(default=0)  # seconds the row covers: 0 = one collect
    samples = models.IntegerField(default=1)  # collects it averages
    node = models.CharField(max_length=100)
    cpu = models.FloatField()
    memory = models.FloatField()

    class Meta:
        # The span index keeps the name it got on ["span", "at"] (0014): the rename (0026) kept the index.
        indexes = [
            models.Index(fields=["cluster", "at"]),
            models.Index(fields=["span_s", "at"], name="dashboard_n_span_88fce9_idx"),
        ]


class GuestSample(models.Model):
    """One guest's measured use on its node, as 1-minute means (one row per collect until its
    minute is folded), coarser as it ages: what a what-if replays (whatif.py). Beside the means,
    the highest value each row covers (`cpu_peak`, `mem_peak_bytes`; a collect's own row: its
    value), folded by MAX: a mean flattens the peak a workload repeats daily, which is what the
    next hour's forecast reads (forecasts.py)."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="guest_samples")
    at = models.DateTimeField()
    span_s = models.IntegerField(default=0)  # 0 = one collect, then 60, 300, 3600 seconds
    samples = models.IntegerField(default=1)
    guest = models.CharField(max_length=40)
    node = models.CharField(max_length=100)
    cpu_usage = models.FloatField()  # cores in use
    mem_usage_bytes = models.FloatField()
    cpu_peak = models.FloatField()  # cores: the highest value the row covers
    mem_peak_bytes = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["cluster", "at"]),
            models.Index(fields=["span_s", "at"], name="dashboard_g_span_85664e_idx"),
        ]
