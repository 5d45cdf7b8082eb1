"""A cluster: where its snapshot comes from (its source adapter), its round leases, and its guards."""

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

import crs.guards
import crs.model
import crs.snapshot
import crs.sources

from .. import crypt
from .validators import SOURCE_CHOICES, printable_name

log = logging.getLogger(__name__)
WHATIF_QUEUE = "whatif"  # read-only what-if clusters' collects and rounds (settings.CELERY_TASK_QUEUES)
PROXMOX_QUEUE = "proxmox"  # Proxmox clusters' collects, on a worker of threads


def with_cluster(queryset: models.QuerySet, *related: str) -> models.QuerySet:
    """Rows with their cluster joined (`select_related`), but not the cluster's stored snapshot and
    N+1 verdict: a list shows the cluster's name, and the join decodes those once per row (at
    1000 nodes megabytes each; ClusterManager's own `defer` does not reach a join). A row that
    does need them loads them on first access."""
    return queryset.select_related("cluster", *related).defer("cluster__snapshot", "cluster__n1")


class ClusterManager(models.Manager):
    # Longer than the longest round seen (1000 nodes × 20 000 guests when rounds still computed
    # the minute's N+1 and the hour's capacity counts: about 15 s on a loaded machine); short
    # enough that a worker killed mid-round on another host stops its cluster's rounds for a
    # minute at most. One killed on this host frees its leases at once (lease_round).
    ROUND_LEASE = timedelta(seconds=60)

    def get_queryset(self) -> models.QuerySet:
        """Rows without the stored N+1 verdict: only the pages and the API that show it read it,
        and it grows with what goes wrong (a loss per node, with its overloaded nodes and up to
        n1.EXAMPLES guests: 10.8 kB at 1000 nodes when every loss is survived, far more when
        many fail). They still get it as before: Django loads a deferred field on first
        access, with one query."""
        return super().get_queryset().defer("n1")

    def lease_round(self, pk: int) -> bool:
        """True if this caller may run the cluster's round now; two rounds never overlap.

        A lease rather than a lock held open: no transaction spans the engine call, and a
        lease its holder never releases lapses after ROUND_LEASE. The lease names its holder
        (host and process): a worker process killed mid-round (SIGKILL, the OOM killer; a
        prefork child dies with its parent) is seen gone by any worker on its host, which
        takes the lease over at once instead of leaving the cluster without rounds for a
        minute. A stopped (hung) process still exists and keeps its lease until it lapses.
        """
        holder = lease_holder()
        if self.lease(pk, "round_lease_until", self.ROUND_LEASE, round_lease_holder=holder):
            return True
        held_by = self.filter(pk=pk).values_list("round_lease_holder", flat=True).first()
        if not held_by or not holder_gone(held_by):
            return False
        until = timezone.now() + self.ROUND_LEASE
        taken = self.filter(pk=pk, round_lease_holder=held_by)
        if not taken.update(round_lease_until=until, round_lease_holder=holder):
            return False
        log.warning("cluster %s: round lease taken over from %s, gone mid-round (killed?)", pk, held_by)
        return True

    def release_round(self, pk: int) -> None:
        self.filter(pk=pk, round_lease_holder=lease_holder()).update(round_lease_until=None, round_lease_holder="")

    def queue_round(self, pk: int, interval: timedelta) -> bool:
        """True if the caller may queue the cluster's round: none is queued. The mark lapses after
        one round interval, as the queued message does (it expires), so a lost one blocks nothing."""
        return self.lease(pk, "round_queued_until", interval)

    def lease(self, pk: int, field: str, length: timedelta, **also) -> bool:
        """True if the caller took the cluster's `field` lease for `length` (and set `also`): it
        was free (never taken, released, or lapsed). One conditional UPDATE, so of two callers
        one wins, and a lease its holder never releases (a worker killed, a message lost) lapses
        by itself."""
        now = timezone.now()
        free = models.Q(**{f"{field}__isnull": True}) | models.Q(**{f"{field}__lt": now})
        return self.filter(free, pk=pk).update(**{field: now + length}, **also) == 1

    def release(self, pk: int, field: str) -> None:
        self.filter(pk=pk).update(**{field: None})

    @contextmanager
    def opened_source(self, pk: int) -> Iterator[tuple["Cluster", crs.sources.Source]]:
        """Yield (cluster, adapter) for a call that changes the cluster (a migration's start or
        poll, an abort, maintenance, a shutdown); on a clean exit the adapter's new state is stored.

        Such calls of one cluster take turns under the cluster row's lock; a collect takes no
        lock (opened_for_collect) and yields to them (store_collected). If the adapter raises,
        the transaction rolls back and the stored state stays as it was. The stored snapshot is
        not read (a caller that wants it gets it on first access, with one query).
        """
        with transaction.atomic():
            cluster = cast("Cluster", self.select_for_update().defer("snapshot").get(pk=pk))
            source = crs.sources.open_source(
                cluster.source_kind, cluster.effective_source_config(), cluster.source_state or None
            )
            yield cluster, source
            if (state := source.state()) != cluster.source_state:  # no UPDATE of what did not change
                self.filter(pk=pk).update(source_state=state, source_state_version=models.F("source_state_version") + 1)

    def opened_for_collect(self, pk: int) -> tuple["Cluster", crs.sources.Source]:
        """The cluster (with its policy, without its stored snapshot) and its adapter, opened on
        the stored state in one read: no transaction and no lock while the adapter reads the
        cluster over the network (a Proxmox collect waits seconds on it). store_collected then
        stores what it read, unless another collect stored first."""
        cluster = cast("Cluster", self.select_related("policy").defer("snapshot").get(pk=pk))
        state = cluster.source_state or None
        return cluster, crs.sources.open_source(cluster.source_kind, cluster.effective_source_config(), state)

    def store_collected(self, cluster: "Cluster", source: crs.sources.Source, started: datetime, **fields) -> bool:
        """Store `fields` (the snapshot and what goes with it) and the adapter's new state in
        one UPDATE, for a collect that began reading the cluster at `started`, if no other
        collect stored since `cluster` was read (a compare-and-set on collect_started_at and
        source_state_version). If one did that began later, this one's older result is dropped
        and counted (collects_dropped); if it began earlier, this one's is the fresher
        snapshot: its adapter state is merged into the stored one (merged()) and the store
        tried again, as it is after a change of a migration's call (opened_source). True if stored."""
        base, state = cluster.source_state, source.state()
        version, stored = cluster.source_state_version, cluster.collect_started_at
        while True:
            changed = {"source_state": state, "source_state_version": version + 1} if state != base else {}
            unchanged = self.filter(pk=cluster.pk, source_state_version=version, collect_started_at=stored)
            if unchanged.update(**fields, **changed, collect_started_at=started):
                cluster.source_state_version, cluster.collect_started_at = version + bool(changed), started
                return True
            now = self.filter(pk=cluster.pk).values("collect_started_at", "source_state", "source_state_version").get()
            if now["collect_started_at"] is not None and now["collect_started_at"] > started:
                self.filter(pk=cluster.pk).update(collects_dropped=models.F("collects_dropped") + 1)
                log.info("cluster %s: collect dropped: a later one stored first", cluster.pk)
                return False
            state = cast(dict, merged(base, state, now["source_state"]))
            base, version, stored = now["source_state"], now["source_state_version"], now["collect_started_at"]


_ABSENT = object()


def merged(base: object, ours: object, theirs: object) -> object:
    """A three-way merge of two JSON states that both started from `base`: what only one side
    changed is taken from it, dictionaries changed by both are merged key by key, and a value
    both changed is ours. A collect's adapter changes its caches and finishes tasks; a
    migration's call adds or updates its own task: both are kept."""
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if isinstance(base, dict) and isinstance(ours, dict) and isinstance(theirs, dict):
        out = {}
        for key in {**theirs, **ours, **base}:
            value = merged(base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT))
            if value is not _ABSENT:
                out[key] = value
        return out
    return ours


def lease_holder() -> str:
    """This process, as a lease names it: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_gone(holder: str) -> bool:
    """True if `holder` (lease_holder's form) was a process on this host that exists no more.
    A holder on another host cannot be checked from here: its lease lapses by itself. A
    process id reused since only delays the takeover until the lapse."""
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, another user's
        return False
    return False


class Cluster(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[printable_name])
    source_kind = models.CharField(max_length=20, choices=SOURCE_CHOICES, default="simulator")
    source_config = models.JSONField(default=dict, blank=True, help_text="Options for the source adapter.")
    # The Proxmox API token's secret, Fernet-encrypted (dashboard/crypt.py); never shown again.
    token_secret = models.TextField(blank=True, editable=False)
    # What the adapter asked us to keep between calls (the simulator's clock and placements).
    source_state = models.JSONField(default=dict, blank=True, editable=False)
    # Bumped with every change of source_state: a collect stores what it read only if nobody
    # stored meanwhile (ClusterManager.store_collected), so no lock is held while it reads.
    source_state_version = models.PositiveBigIntegerField(default=0, editable=False)
    # Collects whose result was dropped because another collect of the cluster stored first, and
    # collects not started because the last one was still running when the next came due.
    collects_dropped = models.PositiveIntegerField(default=0, editable=False)
    collects_skipped = models.PositiveIntegerField(default=0, editable=False)
    snapshot = models.JSONField(null=True, blank=True, editable=False, help_text="Latest crs-snapshot/1.")
    collected_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the collect whose snapshot is stored began reading the cluster (store_collected).
    collect_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Why the last collection was refused (cluster unreachable, bad data); empty once one works.
    source_error = models.TextField(blank=True, editable=False)
    source_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Clusters with a history are never deleted (the audit trail keeps its subject); retiring one
    # archives it: no more rounds, gone from the page's list, history and trail kept.
    archived = models.BooleanField(default=False, help_text="No rounds, hidden from the page; history is kept.")
    hold_count = models.PositiveIntegerField(default=0, editable=False)
    pressure_gate = models.JSONField(default=dict, editable=False)  # crs.gating's round state
    # The emergency stops, stored apart: this cluster's own ("here") and the one "Stop all" set on
    # every cluster ("all"). Either pauses automation and nothing approved starts; "Lift all" lifts
    # only the latter, so a stop set on one cluster outlives it. When each was set, and by whom
    # (the username, kept if the user is deleted); None: that stop does not hold.
    stop_here_at = models.DateTimeField(null=True, blank=True, editable=False)
    stop_here_by = models.CharField(max_length=150, blank=True, editable=False)
    stop_all_at = models.DateTimeField(null=True, blank=True, editable=False)
    stop_all_by = models.CharField(max_length=150, blank=True, editable=False)
    last_round_at = models.DateTimeField(null=True, blank=True, editable=False)
    round_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    round_lease_holder = models.CharField(max_length=300, blank=True, editable=False)  # lease_holder()
    # A round is queued and not yet started (ClusterManager.queue_round): never two in the queue.
    round_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    # A capacity count or an N+1 refresh queued or running beside the rounds (tasks.queue_beside):
    # a round queues no second one meanwhile.
    capacity_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    n1_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The last N+1 verdict (dashboard/n1.py, crs.n1) and when it was computed: a task the rounds
    # queue (tasks.n1_refresh) recomputes it on a slower cadence than theirs, since it places
    # every HA guest once per node.
    n1 = models.JSONField(null=True, blank=True, editable=False)
    n1_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Proxmox's own balancer (crs.coexistence.ProxmoxBalancer) as the last collect read it; None
    # for other sources. While it rebalances by itself, automation here is held (windows.py).
    proxmox_balancer = models.JSONField(null=True, blank=True, editable=False)
    # Since when every round measured the imbalance above the threshold (None: the last one did
    # not): the "imbalance above the threshold for longer than …" notification's episode.
    above_threshold_since = models.DateTimeField(null=True, blank=True, editable=False)
    # The overview's 24-hour sparkline (dashboard/overview.py): [[bucket start, Unix s], highest
    # imbalance], one per half hour, kept by each round in the UPDATE it makes anyway, so the
    # overview reads one row per cluster rather than a day of rounds (17 280 at 5-s rounds).
    trend = models.JSONField(default=list, blank=True, editable=False)

    objects = ClusterManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def effective_source_config(self) -> dict:
        """`source_config` as the adapter gets it: the cluster's own options over the site's
        Proxmox defaults (read from the environment in settings.py, so an API token need not
        be stored), with its token secret decrypted."""
        period = {"usage_period": self.policy.usage_period_s} if hasattr(self, "policy") else {}
        if self.is_proxmox:
            config, secret = crypt.split_secret(self.source_config)  # not saved yet: still in it
            if secret is None and self.token_secret:
                secret = crypt.decrypt(self.token_secret)
            if secret is None:
                return {**settings.CRS_PVE_DEFAULTS, **config, **period}
            # its own token: the site's default one would clash with it
            defaults = {k: v for k, v in settings.CRS_PVE_DEFAULTS.items() if k != "token"}
            return {**defaults, **config, "token_value": secret, **period}
        if self.source_kind == "simulator":
            return {**self.source_config, **period}
        return self.source_config

    def save(self, *args, **kwargs) -> None:
        """A token secret given in the source config (the admin site's JSON box) is taken out
        and stored encrypted, so the config never holds it."""
        if self.is_proxmox:
            config, secret = crypt.split_secret(self.source_config)
            if secret is not None:
                self.source_config, self.token_secret = config, crypt.encrypt(secret)
                if kwargs.get("update_fields") is not None:
                    kwargs["update_fields"] = {*kwargs["update_fields"], "source_config", "token_secret"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """Refuse a source config the adapter would refuse, naming the key, before it is stored."""
        try:
            crs.sources.open_source(self.source_kind, self.effective_source_config())
        except crs.sources.ConfigError as exc:
            raise ValidationError({"source_config": str(exc)}) from exc

    def guards(self) -> crs.model.Guards:
        """The engine's anti-thrashing sets (crs.guards), from this cluster's migration history.

        One place for rounds, approvals and executions alike, so what the page recommends and
        what a worker agrees to run never disagree.
        """
        policy = self.policy
        now = timezone.now()
        since = now - max(policy.cooldown, policy.rejection_memory)
        recent = self.migrations.filter(
            models.Q(state__in=["done", "failed"], finished_at__gte=since)
            | models.Q(state="rejected", decided_at__gte=since)
        ).only("guests", "source", "target", "state", "finished_at", "decided_at")
        history = [
            crs.guards.PastMove(
                tuple(m.guests), m.source, m.target, m.state, cast(datetime, m.finished_at or m.decided_at).timestamp()
            )
            for m in recent
        ]
        return crs.guards.guards_from(
            history, now.timestamp(), policy.cooldown.total_seconds(), policy.rejection_memory.total_seconds()
        )

    def under_policy(self, snapshot: crs.model.Snapshot) -> crs.model.Snapshot:
        """`snapshot` judged by this cluster's current settings, not the ones it was taken with."""
        return snapshot.with_settings(self.policy.engine_settings())

    def latest_snapshot(self) -> crs.model.Snapshot | None:
        """The last collected snapshot under the current settings; None before the first collection."""
        return None if self.snapshot is None else self.under_policy(crs.snapshot.parse(self.snapshot))

    @property
    def read_only(self) -> bool:
        """An imported snapshot: rounds and plans run on it, but nothing can be migrated."""
        return self.source_kind == "snapshot"

    @property
    def stopped(self) -> bool:
        """An emergency stop holds, this cluster's own or "Stop all"'s."""
        return self.stop_here_at is not None or self.stop_all_at is not None

    def stop(self) -> dict:
        """The stops as the API and the page show them: which hold, and who set the first that
        still holds and when (the moment automation paused), or null by and at."""
        held = sorted(
            (at, by) for at, by in ((self.stop_here_at, self.stop_here_by), (self.stop_all_at, self.stop_all_by)) if at
        )
        at, by = held[0] if held else (None, None)
        return {"here": self.stop_here_at is not None, "all": self.stop_all_at is not None, "by": by, "at": at}

    @property
    def task_queue(self) -> str:
        """The Celery queue of the cluster's collects and rounds (settings.CELERY_TASK_QUEUES): a
        what-if cluster's have their own, so a heavy imported snapshot cannot delay the live ones."""
        return WHATIF_QUEUE if self.read_only else "celery"

    @property
    def collect_queue(self) -> str:
        """The Celery queue of the cluster's collects: a Proxmox cluster's have their own, served
        by a worker of threads (they wait on the network); the others collect in task_queue."""
        return PROXMOX_QUEUE if self.is_proxmox else self.task_queue

    @property
    def collect_task(self) -> str:
        """Beat's task for the cluster: a collect that waits on no network runs the round in the
        same task (tasks.collect_and_round); a Proxmox collect queues it (tasks.collect)."""
        return "dashboard.tasks.collect" if self.is_proxmox else "dashboard.tasks.collect_and_round"

    @property
    def is_proxmox(self) -> bool:
        """A real Proxmox cluster: Proxmox keeps its HA rules and maintenance and runs its own
        commands (shutdowns, maintenance mode); the product only reads and migrates."""
        return self.source_kind == "proxmox"
