"""Change windows and blackouts: created, edited and removed, each audited."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import viewsets
from rest_framework.exceptions import NotFound, ValidationError

from .. import automation
from ..models import (
    Blackout,
    ChangeWindow,
)
from .base import ApiViewSet
from .serializers import BlackoutSerializer, ChangeWindowSerializer


class WindowViewSetBase(ApiViewSet, viewsets.ModelViewSet):
    """Created, edited (PATCH: the fields sent) and removed, each audited."""

    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    write_permission = "dashboard.change_policy"

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = automation.add(self.get_queryset().model, self.request.user, **data)

    def perform_update(self, serializer):
        """Applied under the row's lock and checked again there (automation.change): a concurrent
        PATCH or removal is seen, never overwritten."""
        fields = {k: v for k, v in serializer.validated_data.items() if k != "cluster"}
        model = self.get_queryset().model
        try:
            serializer.instance = automation.change(model, serializer.instance.pk, self.request.user, **fields)
        except model.DoesNotExist:
            raise NotFound("removed meanwhile") from None
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None

    def perform_destroy(self, instance):
        automation.remove(instance, self.request.user)


class ChangeWindowViewSet(WindowViewSetBase):
    """Weekly change windows: when `automatic` and `partial` automation may start balancing moves
    (wall clock in the cluster's time zone, the `time_zone` setting). With none: any time."""

    serializer_class = ChangeWindowSerializer
    queryset = ChangeWindow.objects.all()


class BlackoutViewSet(WindowViewSetBase):
    """One-off blackouts: no automatic balancing moves from `starts_at` to `ends_at`, whatever the windows."""

    serializer_class = BlackoutSerializer
    queryset = Blackout.objects.all()
