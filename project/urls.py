from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView

from dashboard.api import capacity as capacity_api
from dashboard.api import ha as ha_api
from dashboard.api import metrics
from dashboard.api import rolling as rolling_api
from dashboard.pages import audit, connect, guests, overview, rolling, snapshots, tokens, views, whatif, windows
from dashboard.pages import capacity as capacity_views
from dashboard.pages import ha as ha_views

app_patterns = [
    path("", views.home, name="home"),
    path("clusters/", overview.page, name="overview"),
    path("api/overview", overview.rows, name="api-overview"),
    path("clusters/<int:pk>/", views.cluster, name="cluster"),
    path("clusters/<int:pk>/settings", views.change_settings, name="settings"),
    path("clusters/<int:pk>/preset", views.switch_preset, name="preset"),
    path("audit/", audit.audit, name="audit"),
    path("tokens/", tokens.tokens_page, name="tokens"),
    path("clusters/manage/", connect.clusters_page, name="clusters"),
    path("clusters/<int:pk>/edit", connect.clusters_page, name="cluster-edit"),
    path("tokens/<int:pk>/revoke", tokens.revoke_page, name="revoke-token"),
    path("clusters/<int:pk>/snapshot.json", snapshots.export, name="export"),
    path("clusters/<int:pk>/plan", snapshots.plan, name="plan"),
    path("clusters/import", snapshots.import_form, name="import-form"),
    path("clusters/import/new", snapshots.import_snapshot, name="import"),
    path("clusters/<int:pk>/rules/", ha_views.rules_page, name="rules"),
    path("clusters/<int:pk>/rules/new", ha_views.save_rule, name="rule-new"),
    path("clusters/<int:pk>/rules/<int:rule>/save", ha_views.save_rule, name="rule-save"),
    path("clusters/<int:pk>/rules/<int:rule>/delete", ha_views.delete_rule, name="rule-delete"),
    path("clusters/<int:pk>/opt-outs", ha_views.opt_out, name="opt-out"),
    path("clusters/<int:pk>/guests/", guests.guests_page, name="guests"),
    path("clusters/<int:pk>/windows", windows.add_window, name="add-window"),
    path("clusters/<int:pk>/blackouts", windows.add_blackout, name="add-blackout"),
    path("clusters/<int:pk>/windows/<int:item>/remove", windows.remove_item, {"kind": "window"}, name="remove-window"),
    path(
        "clusters/<int:pk>/blackouts/<int:item>/remove",
        windows.remove_item,
        {"kind": "blackout"},
        name="remove-blackout",
    ),
    path("clusters/<int:pk>/whatif", whatif.page, name="whatif"),
    path("clusters/<int:pk>/rolling/", rolling.page, name="rolling"),
    path("clusters/<int:pk>/rolling/<str:what>", rolling.act, name="rolling-act"),
    path("clusters/<int:pk>/capacity/", capacity_views.capacity_page, name="capacity"),
    path("clusters/<int:pk>/capacity/power/<str:what>", capacity_views.power_act, name="power"),
]


def moved(to: str):
    """An old session path of the page's JSON, which now lives in /api/v1/: a 308 there, method,
    body and query kept, for one release. Open to all and exempt from the CSRF check, as it does
    nothing: the new path asks for the login, the role and the token."""

    @csrf_exempt
    @login_not_required
    def redirect(request, **kwargs):
        query = request.META.get("QUERY_STRING", "")
        url = reverse(to, kwargs=kwargs) + (f"?{query}" if query else "")
        return HttpResponsePermanentRedirect(url, preserve_request=True)

    return redirect


# The session paths of the page's JSON before /api/v1/ served the page (README: upgrading).
moved_patterns = [
    path("api/clusters/<int:pk>/", moved("api:cluster-state")),
    path("api/clusters/<int:pk>/settings", moved("api:cluster-policy")),
    path("api/clusters/<int:pk>/approve-all", moved("api:cluster-approve-all")),
    path("api/clusters/<int:pk>/emergency-stop", moved("api:cluster-emergency-stop")),
    path("api/emergency-stop", moved("api:cluster-emergency-stop-all")),
    path("api/migrations/<int:pk>/approve", moved("api:recommendation-approve")),
    path("api/migrations/<int:pk>/reject", moved("api:recommendation-reject")),
    path("api/migrations/<int:pk>/fail", moved("api:migration-fail")),
]


class Favicon(RedirectView):
    permanent = True

    def get_redirect_url(self, *args, **kwargs) -> str:
        return static("favicon.svg")


handler400 = "dashboard.pages.errors.bad_request"
handler403 = "dashboard.pages.errors.forbidden"
handler404 = "dashboard.pages.errors.not_found"
handler500 = "dashboard.pages.errors.server_error"

urlpatterns = [
    path("", include((app_patterns, "dashboard"))),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico by themselves (the API docs, a JSON answer): the pages' own icon.
    path("favicon.ico", login_not_required(Favicon.as_view()), name="favicon"),
    path("api/", include("dashboard.api.urls")),
    *moved_patterns,
    path("api/v1/", include((ha_api.router.urls, "api-ha"))),
    path("api/v1/", include((rolling_api.router.urls, "api-rolling"))),
    path("api/v1/", include((capacity_api.router.urls, "api-capacity"))),
    path("metrics", metrics.metrics, name="metrics"),
    # Log in and out, change one's password; no password reset: it needs mail, which the product
    # does not send (an admin sets a new password in /admin/).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("admin/", admin.site.urls),
]
