"""Snapshots in and out: download a cluster's crs-snapshot/1, import one as a read-only
"what-if" cluster, and preview the engine's multi-step plan on any cluster.

The file is the engine's public contract (docs/snapshot-format.md), so what an admin
downloads here is exactly what `python -m crs plan` reads, and a snapshot attached to a
bug report can be replayed on the page with the same policy.
"""

from datetime import timedelta

from django import forms
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

import crs.balancer
import crs.model
import crs.snapshot
from crs.errors import CrsError, SnapshotError
from crs.fields import read_json

from .. import ha
from ..models import AuditEvent, Cluster, Policy

MAX_UPLOAD_BYTES = 20 * 2**20
MAX_PLAN_STEPS = 20


NOT_COLLECTED = {"error": "no snapshot yet: the cluster has not been collected"}


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def export(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return JsonResponse(NOT_COLLECTED, status=404)
    response = HttpResponse(crs.snapshot.dumps(snapshot), content_type="application/json")
    stamp = (cluster.collected_at or timezone.now()).strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="{cluster.name}-{stamp}.json"'
    return response


def policy_values(engine_settings: crs.model.Settings) -> dict:
    """The Policy fields a snapshot's settings carry (the engine's names and units; the dwell a duration)."""
    names = (
        "mode",
        "threshold",
        "hold_duration",
        "margin",
        "method",
        "imbalance_scale",
        "preset",
        "moves_per_round",
        "target_imbalance",
        "load_floor",
        "objective",
        "cpu_overcommit",
    )
    return {
        **{name: getattr(engine_settings, name) for name in names},
        "memory_reserve_bytes": int(engine_settings.memory_reserve_bytes),
        "minimum_dwell": timedelta(seconds=engine_settings.minimum_dwell),
    }


class ImportForm(forms.Form):
    name = forms.SlugField(
        max_length=100,
        error_messages={"required": "name is required", "invalid": "name may contain only letters, digits, - and _"},
    )
    snapshot = forms.FileField(error_messages={"required": "snapshot: choose a crs-snapshot/1 JSON file"})

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if Cluster.objects.filter(name=name).exists():
            raise forms.ValidationError(f"name: a cluster called {name!r} already exists")
        return name

    def clean_snapshot(self) -> dict:
        """The snapshot as the engine reads it, in its canonical form: what is stored holds no
        key the contract does not define (`crs plan` ignores unknown top-level keys; stored,
        they would be kept unchecked), and read_json has refused NUL, NaN and the like anywhere."""
        upload = self.cleaned_data["snapshot"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"snapshot: the file is larger than {MAX_UPLOAD_BYTES // 2**20} MB")
        try:
            snapshot = crs.snapshot.parse(read_json(upload.read(), SnapshotError, "file"))
        except CrsError as exc:
            raise forms.ValidationError(f"snapshot: {exc}") from exc
        self.policy_values = policy_values(snapshot.settings)
        try:  # the snapshot's policy must also fit the settings form's ranges
            Policy(**self.policy_values).clean_fields(exclude=["cluster"])
        except ValidationError as exc:
            problems = "; ".join(m for messages in exc.message_dict.values() for m in messages)
            raise forms.ValidationError(f"snapshot: settings: {problems}") from exc
        return crs.snapshot.to_dict(snapshot)


@require_POST
@permission_required("dashboard.add_cluster", raise_exception=True)
def import_snapshot(request):
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "dashboard/import.html", {"form": form}, status=400)
    data = form.cleaned_data["snapshot"]
    with transaction.atomic():
        cluster = Cluster.objects.create(
            name=form.cleaned_data["name"], source_kind="snapshot", source_config={"snapshot": data}
        )
        policy = Policy.objects.get(cluster=cluster)  # made with the cluster (signals.py)
        for name, value in form.policy_values.items():
            setattr(policy, name, value)
        policy.save()  # the schedule and hold counter follow saved settings
        ha.adopt_file(cluster, data)  # its rules and opt-outs become the cluster's, editable
        AuditEvent.objects.create(
            actor=request.user,
            action="snapshot-imported",
            cluster=cluster,
            details={"file": request.FILES["snapshot"].name},
        )
    return redirect("dashboard:cluster", cluster.pk)


@require_GET
@permission_required("dashboard.add_cluster", raise_exception=True)
def import_form(request):
    return render(request, "dashboard/import.html", {"form": ImportForm()})


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def plan(request, pk):
    """What the engine would do now, up to `steps` moves ahead, as a page or as crs-plan/1 JSON."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    raw = request.GET.get("steps", "5")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PLAN_STEPS:
        return JsonResponse(
            {"errors": {"steps": [f"steps must be a whole number from 1 to {MAX_PLAN_STEPS}"]}}, status=400
        )
    try:
        snapshot = cluster.latest_snapshot()
    except CrsError as exc:  # stored by an older version that accepted it
        return JsonResponse({"error": f"the cluster's last snapshot is refused: {exc}"}, status=409)
    if snapshot is None:
        return JsonResponse(NOT_COLLECTED, status=404)
    result = crs.balancer.plan(snapshot, steps=int(raw))
    if request.GET.get("format") == "json":
        return JsonResponse(result.to_plan_dict(steps=True))
    return render(request, "dashboard/plan.html", {"cluster": cluster, "result": result, "steps": int(raw)})
