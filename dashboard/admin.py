from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction

from . import ha, notify
from .connections import AUDITED_FIELDS, audited, record
from .errors import Refused
from .forms import PolicyForm
from .models import EVENTS, AuditEvent, Cluster, HaRule, Migration, NotificationDestination, Policy, RebalanceOptOut


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "source_kind", "archived", "hold_count", "last_round_at"]
    list_filter = ["archived", "source_kind"]
    readonly_fields = ["hold_count", "collected_at", "last_round_at"]
    # A new cluster gets default settings (signals.py); edit them under Settings.

    def save_model(self, request, obj, form, change):
        old = Cluster.objects.get(pk=obj.pk) if change else None
        super().save_model(request, obj, form, change)
        record(request.user, old, obj)  # after the save, which takes a token's secret out of the config

    def delete_model(self, request, obj):
        # The event outlives the row (cluster None), so it names the cluster in its details.
        with transaction.atomic():
            before = audited(obj)
            AuditEvent.objects.create(
                actor=request.user,
                action="cluster-deleted",
                cluster=None,
                details={"cluster": obj.name, "changes": {f: [before[f], None] for f in AUDITED_FIELDS}},
            )
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for cluster in queryset:  # the list's bulk delete: one event per cluster, like the delete page
            self.delete_model(request, cluster)


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    form = PolicyForm
    list_display = ["cluster", "mode", "automation", "objective", "threshold", "hold_duration", "moves_per_round"]

    def has_add_permission(self, request):
        return False  # every cluster gets its settings when it is created

    def save_model(self, request, obj, form, change):
        form.save_by(request.user)


@admin.register(Migration)
class MigrationAdmin(admin.ModelAdmin):
    # State changes go through Migration.objects.transition (page or API), never a raw edit.
    list_display = ["pk", "cluster", "leader", "source", "target", "state", "automatic", "decided_by", "suggested_at"]
    list_filter = ["state", "cluster"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # migrations are the history the audit trail points at


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    # Append-only (AuditEvent): listed and filtered here and on /audit/, never added, edited or deleted.
    list_display = ["at", "actor_name", "action", "cluster", "migration"]
    list_filter = ["action", "cluster"]
    search_fields = ["actor_name"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class HaRuleForm(forms.ModelForm):
    """The admin's rule form: checked by ha.validated, as the page and the API are."""

    class Meta:
        model = HaRule
        fields = ["cluster", "rule", "type", "resources", "nodes", "strict", "affinity"]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if self.errors or not data.get("cluster"):
            return data
        try:
            ha.validated(
                data["cluster"], {k: v for k, v in data.items() if k != "cluster"}, self.instance.pk and self.instance
            )
        except Refused as exc:
            for name, messages in exc.errors.items():
                self.add_error(name if name in self.fields else None, messages)
        return data


@admin.register(HaRule)
class HaRuleAdmin(admin.ModelAdmin):
    """Rules of simulated and imported clusters (a Proxmox cluster's are edited in Proxmox); audited."""

    form = HaRuleForm
    list_display = ["rule", "cluster", "type", "affinity", "strict"]
    list_filter = ["cluster", "type"]

    def save_model(self, request, obj, form, change):
        data = {name: form.cleaned_data[name] for name in ha.FIELDS}
        saved = ha.save_rule(obj.cluster_id, data, obj if change else None, request.user)
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        ha.delete_rule(obj, request.user)

    def delete_queryset(self, request, queryset):
        for rule in queryset:
            ha.delete_rule(rule, request.user)


class RebalanceOptOutForm(forms.ModelForm):
    class Meta:
        model = RebalanceOptOut
        fields = ["cluster", "guest"]

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if data.get("cluster") and data.get("guest"):
            try:
                ha.check_guest(data["cluster"], data["guest"])
            except Refused as exc:
                raise ValidationError(str(exc)) from exc
        return data


@admin.register(RebalanceOptOut)
class RebalanceOptOutAdmin(admin.ModelAdmin):
    """Guests that balancing rounds never pick; audited."""

    form = RebalanceOptOutForm
    list_display = ["guest", "cluster", "created_at"]
    list_filter = ["cluster"]

    def has_change_permission(self, request, obj=None):
        return False  # opt in (delete) and out (add) instead

    def save_model(self, request, obj, form, change):
        ha.set_opt_out(obj.cluster_id, obj.guest, True, request.user)
        obj.pk = RebalanceOptOut.objects.get(cluster_id=obj.cluster_id, guest=obj.guest).pk

    def delete_model(self, request, obj):
        ha.set_opt_out(obj.cluster_id, obj.guest, False, request.user)

    def delete_queryset(self, request, queryset):
        for opt_out in queryset:
            self.delete_model(request, opt_out)


class DestinationForm(forms.ModelForm):
    """The events as ticks, each with what it means (models.EVENTS), rather than a JSON list to type."""

    events = forms.MultipleChoiceField(
        choices=[(name, f"{name}: {meaning}") for name, meaning in EVENTS.items()],
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    class Meta:
        model = NotificationDestination
        fields = ["cluster", "name", "url", "events", "imbalance_for"]


@admin.register(NotificationDestination)
class DestinationAdmin(admin.ModelAdmin):
    """Where a cluster's notifications go, for admins who use the admin site rather than the API;
    "Send a test notification" shows at once whether a destination works, and why not."""

    form = DestinationForm
    list_display = ["name", "cluster", "events", "created_at"]
    list_filter = ["cluster"]
    actions = ["send_test"]

    @admin.action(description="Send a test notification", permissions=["change"])
    def send_test(self, request, queryset):
        for destination in queryset.select_related("cluster"):
            try:
                notify.send_test(destination, request.user)
            except notify.DeliveryFailed as exc:
                self.message_user(request, f"{destination.name}: not delivered: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{destination.name}: test notification sent", messages.SUCCESS)
