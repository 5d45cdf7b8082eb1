"""Create the demo cluster and the admin account; safe to run again (`make run` does each time)."""

import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from dashboard.models import Cluster, Policy

DEMO_CLUSTER = "demo"
DEMO_ROUND_SECONDS = 5  # short, so a first-time user sees a recommendation within two minutes
# A 5-minute trace sample plays over twenty rounds (100 s at the default interval): the trace
# at 3× its real pace, each round between two samples seeing the load shift part of the way,
# so the page moves every round. One sample per round (60×) aged a recommendation by three
# hours of load in the three minutes an admin takes to read it: the Bitbrains VMs' usage is
# bursty, and a plan computed on one sample was beaten by the margin within a minute or two
# (bench/README.md, recommendation churn).
DEMO_ROUNDS_PER_SAMPLE = 20


class Command(BaseCommand):
    help = "Create the simulated demo cluster and the admin user (password from CRS_ADMIN_PASSWORD)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--password",
            default=settings.CRS_ADMIN_PASSWORD,
            help="admin password (default: CRS_ADMIN_PASSWORD); generated when empty and new",
        )
        parser.add_argument(
            "--round-interval", type=int, default=None, help="seconds between rounds of a newly created demo cluster"
        )
        parser.add_argument(
            "--source-config",
            type=json.loads,
            default={},
            help='JSON options for a newly created demo simulator, e.g. {"migration_mib_s": 8192}',
        )

    def handle(self, *args, password: str, round_interval: int | None, source_config: dict, **options):
        demo_cluster(DEMO_CLUSTER, round_interval, source_config)
        self.stdout.write(self.admin_login(password))

    def admin_login(self, password: str) -> str:
        user, created = get_user_model().objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        if password:
            user.set_password(password)
            user.save()
            return "login: admin / (the password given in CRS_ADMIN_PASSWORD)"
        if created:
            password = secrets.token_urlsafe(12)
            user.set_password(password)
            user.save()
            return f"login: admin / {password}"
        return "login: admin / (the password printed on the first run; set CRS_ADMIN_PASSWORD to change it)"


def demo_cluster(name: str, round_interval: int | None = None, source_config: dict | None = None) -> Cluster:
    """The simulated cluster `name` as the demo runs it, created if new with rounds every
    `round_interval` seconds and the simulator's `source_config` (the browser tests make
    one per test module on a shared server)."""
    interval = round_interval or DEMO_ROUND_SECONDS
    source_config = {
        "round_interval_s": interval,
        "seconds_per_sample": interval * DEMO_ROUNDS_PER_SAMPLE,
        **(source_config or {}),
    }
    cluster, created = Cluster.objects.get_or_create(
        name=name, defaults={"source_kind": "simulator", "source_config": source_config}
    )
    if created:
        policy = Policy.objects.get(cluster=cluster)
        policy.mode = "dynamic"  # measured usage, so the trend moves as the simulated load shifts
        policy.round_interval_s = interval
        policy.save()  # the beat schedule follows the saved settings
    return cluster
