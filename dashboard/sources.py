"""Opening a cluster's source adapter with the state it asked us to keep."""

from contextlib import contextmanager

from django.db import transaction

import crs.sources

from .models import Cluster


@contextmanager
def opened_source(cluster_id: int):
    """Yield (cluster, adapter); on a clean exit the adapter's new state is stored.

    The simulator is stateful and workers may be separate processes, so every adapter
    call of one cluster is load-modify-persist under the cluster row's lock. If the
    adapter raises, the transaction rolls back and the stored state stays as it was.
    The stored snapshot is not read: the adapter collects a fresh one (a caller that wants
    the stored one still gets it on first access, with one query).
    """
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().defer("snapshot").get(pk=cluster_id)
        source = crs.sources.open_source(
            cluster.source_kind, cluster.effective_source_config(), cluster.source_state or None
        )
        yield cluster, source
        Cluster.objects.filter(pk=cluster_id).update(source_state=source.state())
