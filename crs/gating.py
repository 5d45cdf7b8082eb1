"""When a pressure move may happen: at most once a minute, and only a minute after the last
state change, in the source's own clock (the seed's `loadbalance` gating, reference/vm-balancer.md §6).

A migration that just finished, a guest that started or stopped, changes what the stall
figures mean: the seed waits a quiet minute before trusting them again, and so does the
product. The times live in `RoundState`, so any worker runs the next round; the cluster's
state is remembered as a digest of every guest's (id, node, state), which changes exactly
when the seed's "service state change" would be logged.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime

from .decision import RoundState
from .model import Snapshot

QUIET_S = 60.0  # the seed's `< 60` checks, both of them


def clock(snapshot: Snapshot) -> float | None:
    """The source's clock at this snapshot: its `clock_s`, else `taken_at`; None for a file without either."""
    if snapshot.clock_s is not None:
        return snapshot.clock_s
    if snapshot.taken_at:
        try:
            return datetime.fromisoformat(snapshot.taken_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def digest(snapshot: Snapshot) -> str:
    """What a state change changes: every guest's id, node and state (and where it is going)."""
    text = "\n".join(sorted(f"{g.sid} {g.node} {g.state} {g.target or ''}" for g in snapshot.guests))
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def gate(snapshot: Snapshot, state: RoundState) -> tuple[str | None, RoundState]:
    """(why a pressure move must wait, or None; the state for the next round). As the seed: the
    once-a-minute check is spent even when the quiet minute then stops the move. Without a
    clock (a snapshot file) nothing waits: `crs plan` answers what the round would do now."""
    now = clock(snapshot)
    if now is None:
        return None, state
    seen = digest(snapshot)
    changed = now if state.digest and state.digest != seen else state.changed_s
    state = replace(state, digest=seen, changed_s=changed)
    checked = state.checked_s if state.checked_s is not None else now
    if now - checked < QUIET_S:
        return (
            f"pressure moves are looked for once a minute; the last look was {now - checked:.0f} s ago",
            replace(state, checked_s=checked),
        )
    if changed is None:  # the seed starts the quiet minute at its first look
        changed = now
    state = replace(state, checked_s=now, changed_s=changed)
    if now - changed < QUIET_S:
        return f"the cluster changed {now - changed:.0f} s ago; pressure moves wait a quiet minute", state
    return None, state
