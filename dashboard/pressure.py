"""The page's view of the pressure policy: guests that cannot move everywhere, and guest happiness.

Rendered with the page (it changes with the snapshot, not every second); the API carries the
same figures per guest (GuestSerializer.happiness) and per round (Round.happiness).
"""

from datetime import timedelta

from django.utils import timezone

import crs.happiness
import crs.locks

PINNED_SHOWN = 50  # the page lists this many; the API has them all


def pressure_context(cluster):
    """What the page says about guests that hurt or cannot move: pinned guests with their reason,
    guest happiness now and its trend over the last hour of rounds. Shares are fractions (0–1),
    as everywhere the server sends them: the page writes percent (static/units.js)."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return {"pinned": [], "pinned_more": 0, "happiness": None}
    pinned = [g for g in snapshot.guests if g.allowed_nodes is not None or g.requires or g.locked]
    now = crs.happiness.of_cluster(snapshot)
    hour_ago = (
        cluster.rounds.filter(at__lte=timezone.now() - timedelta(hours=1), happiness__isnull=False)
        .order_by("-at")
        .values_list("happiness", flat=True)
        .first()
    )
    scored = sorted((s, g.sid) for g in snapshot.guests if (s := crs.happiness.score(g)) is not None)
    return {
        "pinned": [{"sid": g.sid, "node": g.node, "reason": _why(g)} for g in pinned[:PINNED_SHOWN]],
        "pinned_more": max(0, len(pinned) - PINNED_SHOWN),
        "happiness": None
        if now.share is None
        else {
            "share": now.share,
            "happy": now.happy,
            "guests": now.guests,
            "trend": None if hour_ago is None else now.share - hour_ago,
            "least": [{"sid": sid, "score": score} for score, sid in scored[:5] if score < 1.0],
        },
    }


def _why(guest) -> str:
    where = f"only to {', '.join(sorted(guest.allowed_nodes))}" if guest.allowed_nodes is not None else ""
    needs = f"needs {', '.join(sorted(guest.requires))}" if guest.requires else ""
    return "; ".join(x for x in (crs.locks.reason(guest), guest.pinned_reason, where, needs) if x)
