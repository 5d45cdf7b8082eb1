"""Write a cluster's latest snapshot as crs-snapshot/1, for `python -m crs plan` or a bug report."""

from django.core.management.base import BaseCommand, CommandError

import crs.snapshot
from dashboard.models import Cluster


class Command(BaseCommand):
    help = "Export a cluster's latest snapshot (with its current settings) as crs-snapshot/1 JSON."

    def add_arguments(self, parser):
        parser.add_argument("cluster", help="cluster name")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, cluster: str, output: str | None, **options):
        try:
            found = Cluster.objects.select_related("policy").get(name=cluster)
        except Cluster.DoesNotExist:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"cluster: {cluster!r} does not exist; clusters: {names}") from None
        snapshot = found.latest_snapshot()
        if snapshot is None:
            raise CommandError(f"cluster {cluster!r} has no snapshot yet: it has not been collected")
        text = crs.snapshot.dumps(snapshot)
        if output:
            with open(output, "w") as handle:
                handle.write(text + "\n")
        else:
            self.stdout.write(text)
