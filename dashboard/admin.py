from django.contrib import admin

from .forms import PolicyForm
from .models import AuditEvent, Cluster, Migration, Policy


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "source_kind", "hold_count", "last_round_at"]
    readonly_fields = ["hold_count", "collected_at", "last_round_at"]
    # A new cluster gets default settings (signals.py); edit them under Settings.


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    form = PolicyForm
    list_display = ["cluster", "mode", "automation", "threshold", "hold_duration", "margin", "method",
                    "round_interval"]

    def has_add_permission(self, request):
        return False  # every cluster gets its settings when it is created

    def save_model(self, request, obj, form, change):
        form.save_by(request.user)


@admin.register(Migration)
class MigrationAdmin(admin.ModelAdmin):
    # State changes go through Migration.objects.transition (page or API), never a raw edit.
    list_display = ["pk", "cluster", "leader", "source", "target", "state", "automatic", "decided_by",
                    "suggested_at"]
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
