from django.contrib import admin
from django.urls import include, path

from . import views

app_patterns = [
    path("", views.home, name="home"),
    path("clusters/<int:pk>/", views.cluster, name="cluster"),
    path("clusters/<int:pk>/settings", views.change_settings, name="settings"),
    path("api/clusters/<int:pk>/", views.api_cluster, name="api-cluster"),
    path("api/clusters/<int:pk>/settings", views.api_settings, name="api-settings"),
    path("api/migrations/<int:pk>/approve", views.approve, name="approve"),
    path("api/migrations/<int:pk>/reject", views.reject, name="reject"),
]

urlpatterns = [
    path("", include((app_patterns, "dashboard"))),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
