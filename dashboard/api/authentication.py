"""The API's authentication: `Authorization: Bearer crs_…`, a per-user token (the model is dashboard/tokens.py)."""

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from ..tokens import ApiToken

SCHEME = "Bearer"


class TokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer crs_…`; without the header the next authentication (the session) is tried."""

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].decode(errors="replace").lower() != SCHEME.lower():
            return None
        if len(words) != 2:
            raise AuthenticationFailed(f"Authorization: give '{SCHEME}', one space, and the token")
        token = ApiToken.objects.holding(words[1].decode(errors="replace"))
        if token is None:
            raise AuthenticationFailed("the token is unknown, expired or revoked")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return f'{SCHEME} realm="api"'  # makes a missing login a 401, not a 403
