"""The REST API (/api/v1/, /api/, /metrics): viewsets, serializers, schema; they use the domain."""
