"""The REST API of HA rules, auto-rebalance opt-outs and the N+1 verdict (/api/v1/; dashboard/ha.py, n1.py).

Its own router, included beside urls.py's under the same /api/v1/ prefix: the serializers
check the JSON types (each error under its field's name); the domain's ha.py checks the rest, as the
page and the admin do.
"""

from typing import Any

from django import forms
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from .. import ha, n1, violations
from ..forms import cluster_choice
from ..models import Cluster, HaRule, RebalanceOptOut, with_cluster
from .base import ApiViewSet, filtered, form_parameters

CONFLICT = OpenApiResponse(
    description="Not editable here (a Proxmox cluster's rules) or no snapshot yet: `cluster` says why."
)


class RuleNodeSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=100)
    priority = serializers.IntegerField(min_value=0, max_value=2**53, default=0, help_text="Higher is preferred.")


class RuleSerializer(serializers.ModelSerializer):
    resources = serializers.ListField(
        child=serializers.CharField(max_length=20), help_text='Guest sids, e.g. ["vm:101"].'
    )
    nodes = RuleNodeSerializer(
        many=True, required=False, help_text="Node affinity only: the nodes and their priorities."
    )
    dropped = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Why Proxmox drops the rule as the cluster is now (empty: it holds).",
    )

    class Meta:
        model = HaRule
        fields = ["id", "cluster", "rule", "type", "resources", "nodes", "strict", "affinity", "dropped"]
        read_only_fields: list[str] = []
        validators: list[Any] = []  # ha.validated names a clash of ids itself, under the cluster's lock


class ClusterRuleSerializer(serializers.Serializer):
    pk = serializers.IntegerField(allow_null=True, help_text="The stored rule's id; null for a Proxmox cluster's.")
    id = serializers.CharField(help_text="The rule's id.")
    type = serializers.ChoiceField(choices=HaRule.TYPES)
    resources = serializers.ListField(child=serializers.CharField())
    nodes = RuleNodeSerializer(many=True, required=False)
    strict = serializers.BooleanField(required=False)
    affinity = serializers.ChoiceField(choices=HaRule.AFFINITIES)
    dropped = serializers.ListField(child=serializers.CharField())


class ClusterRulesSerializer(serializers.Serializer):
    editable = serializers.BooleanField(help_text="False: a Proxmox cluster's rules, edited in Proxmox.")
    edit_url = serializers.URLField(allow_null=True, help_text="Where a Proxmox cluster's rules are edited.")
    rules = ClusterRuleSerializer(many=True)
    opt_outs = serializers.ListField(child=serializers.CharField(), help_text="Guests opted out of auto-rebalance.")


class OptOutSerializer(serializers.ModelSerializer):
    class Meta:
        model = RebalanceOptOut
        fields = ["id", "cluster", "guest", "created_at"]
        validators: list[Any] = []  # a repeated opt-out is answered with the existing one, not refused


class ClusterFilterForm(forms.Form):
    cluster = cluster_choice()


class RuleViewSet(ApiViewSet):
    """HA rules of simulated and imported clusters: node affinity (nodes with priorities, strict or
    not) and resource affinity (together or apart). An edit Proxmox's feasibility checks would
    drop is refused with its "Drop rule …" message; a Proxmox cluster's rules answer 409."""

    serializer_class = RuleSerializer
    queryset = with_cluster(HaRule.objects.all())
    write_permission = "dashboard.change_policy"

    def _with_dropped(self, rules):
        reasons: dict[int, dict[str, list[str]]] = {}
        for cluster in {r.cluster for r in rules}:
            reasons[cluster.pk] = {r["id"]: r["dropped"] for r in ha.rules_state(cluster)["rules"]}
        for rule in rules:
            rule.dropped = reasons[rule.cluster_id].get(rule.rule, [])
        return rules

    @extend_schema(parameters=form_parameters(ClusterFilterForm))
    def list(self, request):
        cluster = filtered(ClusterFilterForm, request)["cluster"]
        rules = self.get_queryset().filter(cluster=cluster) if cluster else self.get_queryset()
        return Response(self.get_serializer(self._with_dropped(list(rules)), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self._with_dropped([self.get_object()])[0]).data)

    def _save(self, request, instance, partial=False):
        serializer = self.get_serializer(instance, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        given = serializer.validated_data
        data = {name: getattr(instance, name) for name in ha.FIELDS} if instance else {}
        data |= {name: given[name] for name in ha.FIELDS if name in given}
        data["nodes"] = [dict(entry) for entry in data.get("nodes", [])]
        cluster = instance.cluster if instance else given["cluster"]
        saved = ha.save_rule(cluster.pk, data, instance, request.user)
        code = status.HTTP_200_OK if instance else status.HTTP_201_CREATED
        return Response(self.get_serializer(self._with_dropped([saved])[0]).data, status=code)

    @extend_schema(responses={201: RuleSerializer, 409: CONFLICT})
    def create(self, request):
        return self._save(request, None)

    @extend_schema(responses={200: RuleSerializer, 409: CONFLICT})
    def update(self, request, pk=None):
        return self._save(request, self.get_object())

    @extend_schema(responses={200: RuleSerializer, 409: CONFLICT})
    def partial_update(self, request, pk=None):
        return self._save(request, self.get_object(), partial=True)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        ha.delete_rule(self.get_object(), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class OptOutViewSet(ApiViewSet):
    """Guests opted out of automatic rebalancing: balancing rounds never pick them (any cluster)."""

    serializer_class = OptOutSerializer
    queryset = RebalanceOptOut.objects.all()
    write_permission = "dashboard.change_policy"

    @extend_schema(parameters=form_parameters(ClusterFilterForm))
    def list(self, request):
        cluster = filtered(ClusterFilterForm, request)["cluster"]
        opt_outs = self.get_queryset().filter(cluster=cluster) if cluster else self.get_queryset()
        return Response(self.get_serializer(opt_outs, many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(responses={201: OptOutSerializer, 200: OptOutSerializer, 409: CONFLICT})
    def create(self, request):
        """Opt a guest out; repeating it answers 200 with the existing opt-out."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        cluster, guest = serializer.validated_data["cluster"], serializer.validated_data["guest"]
        changed = ha.set_opt_out(cluster.pk, guest, True, request.user)
        opt_out = RebalanceOptOut.objects.get(cluster=cluster, guest=guest)
        return Response(self.get_serializer(opt_out).data, status=201 if changed else 200)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Opt the guest back in."""
        opt_out = self.get_object()
        ha.set_opt_out(opt_out.cluster_id, opt_out.guest, False, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


N1_SCHEMA = inline_serializer(
    "N1Verdict",
    {
        "type": serializers.CharField(),
        "computed_at": serializers.DateTimeField(),
        "seconds": serializers.FloatField(help_text="How long computing it took."),
        "survives": serializers.BooleanField(),
        "verdict": serializers.CharField(),
        "losses": serializers.ListField(
            child=serializers.DictField(),
            help_text="Per node, if it failed now: node, survived, summary (in words), overloaded (the nodes "
            "taking its HA guests that would then be over a limit: node, cores, memory_bytes, cpu and memory "
            "as fractions of the limits, refusal), lost (up to 10 HA guests left with no node) and lost_count, "
            "recovered (how many HA guests find a node), down (up to 10 running non-HA guests down with it) "
            "and down_count. Where each guest would go: n1-loss.",
        ),
    },
)

N1_LOSS_SCHEMA = inline_serializer(
    "N1Loss",
    {
        "node": serializers.CharField(),
        "survived": serializers.BooleanField(),
        "summary": serializers.CharField(),
        "recoveries": serializers.ListField(
            child=serializers.DictField(), help_text="Per HA guest: sid, target (null = lost), why_lost."
        ),
        "loads": serializers.ListField(
            child=serializers.DictField(),
            help_text="Each node taking guests, after: node, cores, memory_bytes, cpu and memory (fractions "
            "of the limits), refusal.",
        ),
        "overloaded": serializers.ListField(child=serializers.DictField()),
        "lost": serializers.ListField(child=serializers.CharField()),
        "down": serializers.ListField(child=serializers.CharField(), help_text="Running non-HA guests."),
    },
)


class ProxmoxMoveSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["running", "evacuation", "rule-fix"],
        help_text="running: under way now; evacuation or rule-fix: what Proxmox's next round moves, and why.",
    )
    guest = serializers.CharField(help_text='The guest\'s sid, e.g. "vm:104".')
    source = serializers.CharField(help_text="The node it leaves.")  # type: ignore[assignment]  # the payload's, not Field.source
    target = serializers.CharField(help_text="The node Proxmox's placement sends it to.")
    rules = serializers.ListField(
        child=serializers.CharField(),
        help_text="Ids of the rules it breaks (empty: running, maintenance, or inferred rules).",
    )
    why = serializers.CharField(help_text="In words, naming the rule or the node in maintenance.")


class ProxmoxMovesSerializer(serializers.Serializer):
    proxmox = serializers.BooleanField(help_text="False: not a Proxmox cluster, the product makes every move.")
    moves = ProxmoxMoveSerializer(many=True)


class ClusterHaViewSet(ApiViewSet):
    """A cluster's HA side: its rules as they apply (also a Proxmox cluster's), its N+1 verdict,
    and the moves Proxmox's own HA manager makes on a Proxmox cluster."""

    queryset = Cluster.objects.select_related("policy")
    serializer_class = ClusterRulesSerializer

    @extend_schema(responses=ClusterRulesSerializer)
    @action(detail=True, pagination_class=None)
    def rules(self, request, pk=None):
        return Response(ha.rules_state(self.get_object()))

    @extend_schema(responses=N1_SCHEMA)
    @action(detail=True, pagination_class=None)
    def n1(self, request, pk=None):
        """Would the cluster survive losing any one node? Recomputed by rounds every minute."""
        cluster = self.get_object()
        if cluster.n1 is None:
            raise NotFound("no N+1 verdict yet: the cluster's next round computes it")
        return Response(cluster.n1)

    @extend_schema(
        parameters=[OpenApiParameter("node", str, required=True, description="The node that fails.")],
        responses={200: N1_LOSS_SCHEMA, 400: OpenApiResponse(description="node missing or not a usable node")},
    )
    @action(detail=True, pagination_class=None, url_path="n1-loss")
    def n1_loss(self, request, pk=None):
        """Losing one node in full, computed now from the latest snapshot (the N+1 verdict keeps
        only what goes wrong): where each HA guest would go and each target's load after."""
        cluster = self.get_object()
        node = request.query_params.get("node", "")
        loss = n1.loss_of(cluster, node)
        if loss is None:
            snapshot = cluster.latest_snapshot()
            usable = sorted(n.name for n in snapshot.nodes if n.usable) if snapshot else []
            allowed = ", ".join(usable) or "none yet"
            raise ValidationError({"node": [f"{node!r} is not a usable node; one of: {allowed}"]})
        return Response(loss)

    @extend_schema(responses=ProxmoxMovesSerializer)
    @action(detail=True, pagination_class=None, url_path="proxmox-moves")
    def proxmox_moves(self, request, pk=None):
        """The moves Proxmox's HA manager makes itself on the latest snapshot, one per HA guest
        (the product leaves them to it): evacuations of nodes in maintenance and rule fixes."""
        cluster = self.get_object()
        moves = violations.proxmox_own(cluster, cluster.latest_snapshot())
        return Response({"proxmox": cluster.is_proxmox, "moves": moves})


router = SimpleRouter()
router.register("rules", RuleViewSet, basename="rule")
router.register("rebalance-opt-outs", OptOutViewSet, basename="opt-out")
router.register("clusters", ClusterHaViewSet, basename="cluster-ha")
