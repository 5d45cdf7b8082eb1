"""The API's OpenAPI schema class: drf-spectacular's, plus the error answers and the token scheme.

Its own module because REST framework imports it by name from the settings, while the
views (api.py) are still being imported.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

ERRORS = {
    "400": "Bad input: an object of field name → list of messages naming the field and what it accepts.",
    "401": "No session and no valid token.",
    "403": "The role lacks the permission named in `detail`.",
    "404": "No such object (or page).",
}
ERROR_SCHEMA = {"type": "object", "additionalProperties": True, "description": "`detail`, or field → messages"}


# A cluster's sub-resources, each its own group in the docs (not 42 operations under "clusters").
GROUPS = {
    "settings": "settings",
    "maintenance": "maintenance",
    "rolling": "maintenance",
    "proxmox-moves": "maintenance",
    "ha": "HA",
    "rules": "HA",
    "n1": "HA",
    "n1-loss": "HA",
    "capacity": "capacity",
    "capacity-settings": "capacity",
    "power-down": "capacity",
    "automation": "settings",
    "recommendations": "recommendations",
    "emergency-stop": "emergency stop",
}


class Schema(AutoSchema):
    """drf-spectacular's schema, with the error answers every operation may give, grouped by what
    each operation acts on (the path's first part after /api/v1/, or a cluster's sub-resource)."""

    def get_tags(self) -> list[str]:
        tags = super().get_tags()
        parts = [p for p in self.path.split("/") if p and not p.startswith("{")]
        if tags == ["clusters"]:
            group = next((GROUPS[p] for p in parts[3:] if p in GROUPS), None)
            return [group] if group else tags
        return tags

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        json_error = {"application/json": {"schema": ERROR_SCHEMA}}
        for code, description in ERRORS.items():
            responses.setdefault(code, {"description": description, "content": json_error})
        return responses


class TokenScheme(OpenApiAuthenticationExtension):
    """Tells the schema (and Swagger UI's Authorize button) how tokens are sent."""

    target_class = "dashboard.api.authentication.TokenAuthentication"
    name = "token"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API token (crs_…), see /api/v1/tokens/"}
