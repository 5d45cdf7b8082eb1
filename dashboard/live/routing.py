from django.urls import path

from .consumers import ClusterConsumer, OverviewConsumer

websocket_urlpatterns = [
    path("ws/clusters/<int:cluster_id>/", ClusterConsumer.as_asgi()),
    path("ws/overview/", OverviewConsumer.as_asgi()),
]
