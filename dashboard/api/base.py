"""The REST API (/api/v1/): what the page shows and does, for scripts, with an OpenAPI 3 schema.

Django REST framework with drf-spectacular. Authentication by the session (the page, with
CSRF) or a per-user API token (tokens.py); either way the user's role (roles.py) decides,
with the same permissions the page's views ask for. Serializers are ModelSerializers over
the model fields, so the stored units (fractions, durations) are the API's units. Query
filters are Django forms (the audit page's own, for the trail), so a bad filter is refused
with the field named, and the schema's parameters are read off the same forms.

This module: what every API view shares, the role permission, paging, filter forms read as
query parameters, and the one place the domain's refusals (errors.py) become answers. The views
are one module per concept beside it; urls.py routes them.
"""

from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..errors import Refused


def exception_handler(exc, context) -> Response | None:
    """A domain refusal answers its status (400 bad input, 409 not now) with its reason, as the
    views' own checks do: field → messages, or {"detail": the reason}. Nothing is rolled back:
    the domain left nothing half-done. Everything else as DRF answers it."""
    if isinstance(exc, Refused):
        return Response(exc.body(), status=exc.status)
    return drf_exception_handler(exc, context)


# --- the schema's query parameters ----------------------------------------------------------------


def form_parameters(form_class) -> list[OpenApiParameter]:
    """The query parameters of a filter form, for the schema: the form stays the one definition."""
    types = {
        forms.ModelChoiceField: OpenApiTypes.INT,
        forms.DateTimeField: OpenApiTypes.DATETIME,
        forms.DateField: OpenApiTypes.DATE,
    }
    parameters = []
    for name, field in form_class.base_fields.items():
        kind = next((t for cls, t in types.items() if isinstance(field, cls)), OpenApiTypes.STR)
        choices = None
        if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.ModelChoiceField):
            choices = [value for value, _ in field.choices if value != ""]  # type: ignore[misc,union-attr]  # a list
        parameters.append(
            OpenApiParameter(name, kind, required=field.required, enum=choices, description=str(field.help_text or ""))
        )
    return parameters


def errors_of(form) -> dict:
    """A form's errors as the API gives them: field → messages (each naming the field)."""
    return {f: [e["message"] for e in errs] for f, errs in form.errors.get_json_data().items()}


def filtered(form_class, request) -> dict:
    """The filter form's cleaned values, or a 400 naming each bad field."""
    return valid_filter(form_class, request).cleaned_data


def valid_filter(form_class, request):
    """The filter form, valid, or a 400 naming each bad field. A parameter given empty is
    refused rather than read as absent: the schema says what each one takes."""
    form = form_class(request.query_params)
    empty = {
        name: [f"{name}: give a value or leave the parameter out"]
        for name in form.fields
        if request.query_params.get(name) == ""
    }
    if empty:
        raise ValidationError(empty)
    if not form.is_valid():
        raise ValidationError(errors_of(form))
    return form


# --- access ---------------------------------------------------------------------------------------


class RolePermission(BasePermission):
    """Reads need the view's `read_permission`, changes its `write_permission` (roles.py's names)."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        wanted = view.read_permission if request.method in SAFE_METHODS else view.write_permission
        self.message = f"your role lacks the permission {wanted}"
        return request.user.has_perm(wanted)


class Pages(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        """A page_size that is not a whole number of 1 or more is refused (DRF would use the default)."""
        given = request.query_params.get(self.page_size_query_param)
        if given is not None and not (given.isdigit() and int(given) >= 1):
            raise ValidationError({"page_size": [f"page_size must be a whole number of 1 or more, not {given!r}"]})
        return super().get_page_size(request)


class ApiViewSet(viewsets.GenericViewSet):
    """The API answers for itself (401 as JSON), so the login-required middleware lets it through."""

    permission_classes = [RolePermission]
    lookup_value_regex = "[^/]+"  # any id reaches the view, which answers 404 in JSON for a malformed one
    read_permission = "dashboard.view_cluster"
    write_permission = "dashboard.change_cluster"

    @classmethod
    def as_view(cls, *args, **kwargs):
        view = super().as_view(*args, **kwargs)
        view.login_required = False  # type: ignore[attr-defined]  # read by LoginRequiredMiddleware
        return view


def by_cluster(queryset, cluster):
    return queryset.filter(cluster=cluster) if cluster else queryset
