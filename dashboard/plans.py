"""Deciding on a plan's recommendations: what approving or rejecting one step does to the others.

A step was computed on the snapshot with the steps it is `after` applied, so its math
holds only with them: approving step n approves the steps it was computed behind (first
first), and rejecting it expires the steps computed behind it (the next round re-plans).
The page's buttons, the JSON API and the automation levels all decide through here.
"""

from . import expiry
from .models import Migration, Policy


def approve(migration: Migration, actor, automatic: bool = False, details: dict | None = None) -> list[int]:
    """Approve `migration` and the suggested steps it was computed behind, in plan order.

    Each is re-checked on the latest snapshot first (a stale one expires, and the steps
    after it stay pending). Returns the migrations this call approved.
    """
    approved = []
    for step in [*migration.behind(), migration]:
        if step.state in ("approved", "running", "done"):
            continue
        if step.state != "suggested" or (not automatic and expiry.stale(step, actor)):
            break
        who = {} if automatic else {"decided_by": actor}
        if not Migration.objects.transition(
            step.pk, "suggested", "approved", actor, details, automatic=automatic, **who
        ):
            break
        approved.append(step.pk)
    return approved


def approve_all(cluster, actor) -> list[int]:
    """Apply all: every pending recommendation of the cluster, plan by plan, in plan order."""
    approved = []
    for migration in cluster.migrations.filter(state="suggested").order_by("plan", "step"):
        migration.refresh_from_db()
        if migration.state == "suggested":
            approved += approve(migration, actor)
    return approved


def reject(migration: Migration, actor, reason: str) -> list[int]:
    """Reject one step with its reason (the rejection memory bars the move); the steps
    computed behind it expire. Returns the migrations this call changed."""
    if not Migration.objects.transition(migration.pk, "suggested", "rejected", actor, decided_by=actor, reason=reason):
        return []
    return [migration.pk, *expiry.behind_rejected(migration)]


def approve_by_automation(steps: list[Migration], policy: Policy) -> list[int]:
    """The automation level decides for a new plan: `automatic` approves every step,
    `partial` the steps whose own gain clears the automatic margin (with the steps they
    were computed behind), `manual` none."""
    details = {"automation": policy.automation}
    approved: list[int] = []
    for step in steps:
        if policy.approves_itself(step.relative_gain) and step.pk not in approved:
            step.refresh_from_db()
            approved += approve(step, None, automatic=True, details=details)
    return approved
