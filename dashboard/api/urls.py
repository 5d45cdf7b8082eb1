"""The REST API's routes (/api/v1/) and its schema and docs."""

from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from .audit import AuditViewSet
from .clusters import ClusterViewSet
from .notifications import DestinationViewSet
from .recommendations import MigrationViewSet, RecommendationViewSet
from .rounds import RoundViewSet
from .tokens import TokenViewSet
from .whatif import WhatIfViewSet
from .windows import BlackoutViewSet, ChangeWindowViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("rounds", RoundViewSet, basename="round")
router.register("migrations", MigrationViewSet, basename="migration")
router.register("recommendations", RecommendationViewSet, basename="recommendation")
router.register("audit", AuditViewSet, basename="audit")
router.register("tokens", TokenViewSet, basename="token")
router.register("notification-destinations", DestinationViewSet, basename="destination")
router.register("change-windows", ChangeWindowViewSet, basename="change-window")
router.register("blackouts", BlackoutViewSet, basename="blackout")
router.register("whatifs", WhatIfViewSet, basename="whatif")

# The schema and its docs describe and hold no data: readable without a login. The docs' script is
# a file of its own (the split view serves it at ?script): the pages' CSP runs no inline script.
urlpatterns = [
    path("v1/", include((router.urls, "api"))),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="api-schema"),
    path("docs/", login_not_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
]
