"""The cluster page's automation panel: the change-window and blackout forms and the views that add and remove them."""

from datetime import datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from ..automation import add, remove, status, zone_of
from ..models import WEEKDAYS, Blackout, ChangeWindow, Cluster


class WindowForm(forms.ModelForm):
    days = forms.TypedMultipleChoiceField(
        choices=list(enumerate(WEEKDAYS)),
        coerce=int,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "days: tick at least one day", "invalid_choice": "days: Mon … Sun only"},
    )

    class Meta:
        model = ChangeWindow
        fields = ["days", "start", "end"]
        widgets = {"start": forms.TimeInput(attrs={"type": "time"}), "end": forms.TimeInput(attrs={"type": "time"})}
        error_messages = {
            "start": {"required": "from is required", "invalid": "from must be a time, e.g. 22:00"},
            "end": {"required": "to is required", "invalid": "to must be a time, e.g. 06:00"},
        }


class BlackoutForm(forms.ModelForm):
    """Start and end as typed on the page: wall clock in the cluster's time zone."""

    class Meta:
        model = Blackout
        fields = ["label", "starts_at", "ends_at"]
        widgets = {
            "starts_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
            "ends_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
        }
        error_messages = {
            "label": {"required": "label is required: say why, e.g. backups"},
            "starts_at": {"required": "from is required", "invalid": "from must be a date and time"},
            "ends_at": {"required": "to is required", "invalid": "to must be a date and time"},
        }


def _saved(request, cluster: Cluster, form: forms.ModelForm, model) -> None:
    form.instance.cluster = cluster
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, f"Not added: {error}")
        return
    add(model, request.user, cluster=cluster, **form.cleaned_data)
    messages.success(request, "Added; it applies from the next round.")


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def add_window(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    _saved(request, cluster, WindowForm(request.POST), ChangeWindow)
    return redirect(reverse("dashboard:cluster", args=[pk]) + "#automation")


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def add_blackout(request, pk):
    """The times are read in the cluster's zone (the form says so), then stored as moments."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    with timezone.override(zone_of(cluster)):
        _saved(request, cluster, BlackoutForm(request.POST), Blackout)
    return redirect(reverse("dashboard:cluster", args=[pk]) + "#automation")


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def remove_item(request, pk, kind, item):
    """Remove a window or blackout; a second click (already gone) changes nothing."""
    model = ChangeWindow if kind == "window" else Blackout
    found = model.objects.filter(pk=item, cluster_id=pk).first()
    if found is not None:
        remove(found, request.user)
        messages.success(request, "Removed; it applies from the next round.")
    return redirect(reverse("dashboard:cluster", args=[pk]) + "#automation")


def page_context(cluster: Cluster) -> dict:
    """The automation panel: the status with every moment also as wall time in the cluster's zone."""
    data = status(cluster)
    zone = zone_of(cluster)

    def wall(iso: str | None, fmt: str = "%a %H:%M") -> str:
        return datetime.fromisoformat(iso).astimezone(zone).strftime(fmt) if iso else ""

    data["gate"]["until_wall"] = wall(data["gate"]["until"])
    for w in data["windows"]:
        w["day_names"] = ", ".join(WEEKDAYS[d] for d in w["days"])
    for b in data["blackouts"]:
        b["from_wall"], b["to_wall"] = wall(b["starts_at"], "%Y-%m-%d %H:%M"), wall(b["ends_at"], "%Y-%m-%d %H:%M")
    data["window_form"], data["blackout_form"] = WindowForm(), BlackoutForm()
    return data
