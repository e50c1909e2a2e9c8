"""Bearer API-key authentication for the API (`Authorization: Bearer mh_…`)."""

from __future__ import annotations

from rest_framework import authentication, exceptions, permissions

from accounts.services import Principal, apikey_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Resolves the key to a `Principal` (request.auth); request.user is the key's user id."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise exceptions.AuthenticationFailed("Send the API key as `Authorization: Bearer <key>`.")
        principal = apikey_authenticate(raw=raw.strip())
        if principal is None:
            raise exceptions.AuthenticationFailed("The API key is unknown or revoked.")
        return (ApiUser(principal), principal)

    def authenticate_header(self, request):
        return 'Bearer realm="memoryhub"'


class ApiUser:
    """The minimal user object DRF wants; the principal is what the services use."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, principal: Principal):
        self.pk = self.id = principal.user_id
        self.principal = principal

    def __str__(self) -> str:
        return f"user {self.pk} via key {self.principal.api_key_id}"


class HasApiKey(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.auth, Principal)
