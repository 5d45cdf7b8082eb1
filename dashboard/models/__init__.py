"""Clusters, their balancing settings, round samples, migrations and the audit trail, one module
per concept; every model and helper is importable from `dashboard.models` as before (the
migrations name some validators by that path).

One unit per concept: fractions (0–1) and durations, as the engine and the JSON API
read them. `Policy.engine_settings()` is the one bridge to the engine. The API token model
lives in dashboard/tokens.py, beside the token's issue and lookup; imported here so Django finds it.
"""

from ..tokens import ApiToken
from .audit import AuditEvent, AuditEventQuerySet, AuditTrailError
from .capacity import (
    DEFAULT_CAPACITY_SIZES,
    DEFAULT_IDLE_WATTS,
    CapacitySample,
    CapacitySettings,
    PowerDown,
    default_capacity_sizes,
)
from .cluster import Cluster, ClusterManager, with_cluster
from .ha import HaRule, RebalanceOptOut, rule_id_validator
from .maintenance import Maintenance, RollingMaintenance, RollingNode
from .migration import Migration, MigrationManager
from .notifications import EVENTS, NotificationDestination, apprise_url, known_events
from .policy import Policy
from .rounds import GuestSample, NodeSample, Round, last_round
from .validators import (
    MAX_MEMORY_RESERVE,
    METHOD_CHOICES,
    MODE_CHOICES,
    SCALE_CHOICES,
    SOURCE_CHOICES,
    TIME_ZONE_CHOICES,
    duration_validators,
    fraction_validators,
    known_time_zone,
    printable_name,
    whole_number_validators,
)
from .whatif import WhatIf
from .windows import WEEKDAYS, Blackout, ChangeWindow, weekdays

__all__ = [
    "MODE_CHOICES",
    "METHOD_CHOICES",
    "SCALE_CHOICES",
    "SOURCE_CHOICES",
    "TIME_ZONE_CHOICES",
    "known_time_zone",
    "MAX_MEMORY_RESERVE",
    "fraction_validators",
    "duration_validators",
    "whole_number_validators",
    "printable_name",
    "with_cluster",
    "ClusterManager",
    "Cluster",
    "Policy",
    "Round",
    "last_round",
    "NodeSample",
    "GuestSample",
    "MigrationManager",
    "Migration",
    "AuditTrailError",
    "AuditEventQuerySet",
    "AuditEvent",
    "Maintenance",
    "RollingMaintenance",
    "RollingNode",
    "EVENTS",
    "apprise_url",
    "known_events",
    "NotificationDestination",
    "rule_id_validator",
    "HaRule",
    "RebalanceOptOut",
    "WEEKDAYS",
    "weekdays",
    "ChangeWindow",
    "Blackout",
    "WhatIf",
    "default_capacity_sizes",
    "DEFAULT_CAPACITY_SIZES",
    "DEFAULT_IDLE_WATTS",
    "CapacitySettings",
    "CapacitySample",
    "PowerDown",
    "ApiToken",
]
