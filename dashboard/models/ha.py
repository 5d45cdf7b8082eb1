"""HA rules and the per-guest opt-out of simulated and imported clusters (dashboard/ha.py)."""

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from .cluster import Cluster

rule_id_validator = RegexValidator(
    r"\A[A-Za-z][A-Za-z0-9_-]{1,63}\Z",
    "rule must start with a letter and hold 2 to 64 letters, digits, - or _ (Proxmox's rule ids)",
)


class HaRule(models.Model):
    """One HA rule as Proxmox's rules.cfg holds it, for clusters whose rules the product keeps
    (simulated and imported); a Proxmox cluster's rules are read from the cluster instead.
    Every round's snapshot carries them (ha.applied); ha.validated is the only way in."""

    TYPES = ["node-affinity", "resource-affinity"]
    AFFINITIES = ["positive", "negative"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="ha_rules")
    rule = models.CharField(max_length=64, validators=[rule_id_validator], help_text="The rule's id, as in Proxmox.")
    type = models.CharField(max_length=20, choices=[(t, t) for t in TYPES])
    resources = models.JSONField(default=list, help_text='Guest sids, e.g. ["vm:101", "ct:102"].')
    nodes = models.JSONField(
        default=list, blank=True, help_text='Node affinity: [{"node": "node1", "priority": 1}, …]; higher is preferred.'
    )
    strict = models.BooleanField(default=False, help_text="Node affinity: the guests may run on the listed nodes only.")
    affinity = models.CharField(
        max_length=10,
        choices=[(a, a) for a in AFFINITIES],
        default="positive",
        help_text="Resource affinity: positive keeps the guests together, negative apart. Node affinity: positive "
        "keeps them on the listed nodes, negative off them.",
    )

    class Meta:
        ordering = ["cluster", "rule"]
        constraints = [models.UniqueConstraint(fields=["cluster", "rule"], name="ha_rule_unique_id")]
        verbose_name = "HA rule"

    def __str__(self) -> str:
        return f"{self.rule} ({self.type}, {self.cluster})"

    def as_dict(self) -> dict:
        """The rule in the snapshot's terms (docs/snapshot-format.md `rules[]`)."""
        base = {"id": self.rule, "type": self.type, "resources": list(self.resources)}
        if self.type == "node-affinity":
            return {**base, "nodes": list(self.nodes), "strict": self.strict, "affinity": self.affinity}
        return {**base, "affinity": self.affinity}


class RebalanceOptOut(models.Model):
    """A guest that balancing rounds never pick (the snapshot's `auto_rebalance: false`)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="opt_outs")
    guest = models.CharField(max_length=20, help_text='The guest\'s sid, e.g. "vm:101".')
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster", "guest"]
        constraints = [models.UniqueConstraint(fields=["cluster", "guest"], name="opt_out_unique_guest")]
        verbose_name = "auto-rebalance opt-out"

    def __str__(self) -> str:
        return f"{self.guest} opted out ({self.cluster})"
