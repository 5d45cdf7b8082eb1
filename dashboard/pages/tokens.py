"""The signed-in user's own API tokens page: create one (its secret shown this once), see when each was used, revoke."""

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from ..tokens import DEFAULT_LIFETIME, ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        error_messages={"required": "name is required: say what the token is for"},
        help_text="What the token is for, e.g. the script that uses it.",
    )
    days = forms.IntegerField(
        label="Expires in (days)",
        required=False,
        min_value=1,
        max_value=3650,
        initial=DEFAULT_LIFETIME.days,
        help_text="Empty: never expires.",
        error_messages={
            "invalid": "days must be a whole number",
            "min_value": "days must be between 1 and 3650",
            "max_value": "days must be between 1 and 3650",
        },
    )


@never_cache  # the page that shows a secret is not kept by any cache
@require_http_methods(["GET", "POST"])
def tokens_page(request):
    """The signed-in user's own tokens: create one (its secret shown this once), see when each was used, revoke."""
    form = TokenForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["days"]
        expires_at = timezone.now() + timedelta(days=days) if days else None
        _, secret = ApiToken.objects.issue(request.user, form.cleaned_data["name"], expires_at, actor=request.user)
        form = TokenForm()
    status = 400 if request.method == "POST" and secret is None else 200
    context = {"form": form, "secret": secret, "tokens": request.user.api_tokens.all(), "now": timezone.now()}
    return render(request, "dashboard/tokens.html", context, status=status)


@require_POST
def revoke_page(request, pk):
    if ApiToken.objects.revoke(request.user, pk=pk, user=request.user):
        messages.success(request, "Token revoked: it is refused from now on.")
    return redirect("dashboard:tokens")
