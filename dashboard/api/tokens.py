"""Your API tokens: issued, listed and revoked (the authentication is authentication.py)."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from ..tokens import DEFAULT_LIFETIME, ApiToken
from .base import ApiViewSet


class Username(serializers.SlugRelatedField):
    """A user by username; one with a NUL byte (which PostgreSQL cannot even look up) is simply unknown."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\x00"))
        return super().to_internal_value(data)

    def get_value(self, dictionary):
        """`user=` in a form body is refused as JSON's "" is, not read as omitted (DRF's HTML-form rule)."""
        return "" if dictionary.get(self.field_name) == "" else super().get_value(dictionary)


class TokenSerializer(serializers.ModelSerializer):
    user = Username(
        slug_field="username",
        queryset=ApiToken._meta.get_field("user").related_model._default_manager.all(),
        required=False,
        help_text="Whose token (admins only); yourself when omitted.",
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text=f"Default: in {DEFAULT_LIFETIME.days} days; null: never."
    )
    revoked = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "name", "user", "prefix", "created_at", "expires_at", "last_used_at", "revoked", "revoked_at"]

    def get_revoked(self, token) -> bool:
        return token.revoked_at is not None

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise ValidationError("expires_at must be in the future")
        return value


class IssuedTokenSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown this once; store it now.")

    class Meta(TokenSerializer.Meta):
        fields = TokenSerializer.Meta.fields + ["token"]


class TokenViewSet(ApiViewSet):
    """Your API tokens (admins: everyone's). The secret is shown once, in the answer to its creation.

    Revoking keeps the row (name, when created and last used), so a leak can be traced."""

    serializer_class = TokenSerializer
    permission_classes = [IsAuthenticated]
    queryset = ApiToken.objects.select_related("user")

    def get_queryset(self):
        tokens = super().get_queryset()
        return (
            tokens
            if self.request.user.has_perm("dashboard.manage_all_tokens")
            else tokens.filter(user=self.request.user)
        )

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=TokenSerializer, responses={201: IssuedTokenSerializer})
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = data.get("user", request.user)
        if user != request.user and not request.user.has_perm("dashboard.manage_all_tokens"):
            raise PermissionDenied("only admins create tokens for other users (permission dashboard.manage_all_tokens)")
        expires_at = data["expires_at"] if "expires_at" in data else timezone.now() + DEFAULT_LIFETIME
        token, secret = ApiToken.objects.issue(user, data["name"], expires_at, actor=request.user)
        token.token = secret  # type: ignore[attr-defined]  # shown once, by IssuedTokenSerializer
        return Response(IssuedTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Revoke: the token is refused from now on. Audited, as its creation is."""
        ApiToken.objects.revoke(request.user, pk=self.get_object().pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
