"""Proxmox's config locks: a locked guest stays where it is until its lock is gone.

A backup (`vzdump` locks every guest in turn, nightly), a snapshot, a clone or a suspend
locks the guest's config, and Proxmox refuses to migrate it: qemu-server's migrate answers
"VM is locked (backup)" at once, a container's migration task ends "CT is locked (backup)"
(PVE::AbstractConfig::check_lock). Plans never propose a locked guest (crs.bundles,
crs.pressure); a move already decided, approved or owed, waits for the lock instead of failing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .model import Guest, Snapshot

REFUSAL = re.compile(r"\b(?:VM|CT) is locked \(([^)]+)\)")


def reason(guest: Guest) -> str:
    """Why the guest stays put, as the page says it ("locked: backup"); "" when Proxmox would move it."""
    return f"locked: {guest.lock}" if guest.locked else ""


def waits(snapshot: Snapshot, sids: Iterable[str]) -> str:
    """Why a decided move of `sids` waits on this snapshot ("waits: vm:101 is locked: backup"),
    or "" when none of them is locked."""
    wanted = set(sids)
    held = [f"{g.sid} is {reason(g)}" for g in snapshot.guests if g.sid in wanted and g.locked]
    return f"waits: {', '.join(held)}" if held else ""


def refused(message: str) -> str:
    """The lock Proxmox named in refusing a migration ("backup"), or "" for any other error and
    for `migrate`: another migration of the guest under way is no lock to wait for here."""
    found = REFUSAL.search(message)
    return found[1] if found and found[1] != "migrate" else ""
