"""The three roles, as Django groups: who may watch, who may decide, who may configure.

* viewer   sees every page, the API's reads and the audit trail; changes nothing;
* operator a viewer who approves and rejects recommendations;
* admin    an operator who changes settings and adds, changes or imports clusters
           (give the account staff status too, for the admin site).

Written on every `migrate` (post_migrate), so a new permission reaches its role by
itself and a deployment never has to click groups together.
"""

from django.contrib.auth.models import Group, Permission

VIEW = [
    "dashboard.view_cluster",
    "dashboard.view_policy",
    "dashboard.view_round",
    "dashboard.view_migration",
    "dashboard.view_auditevent",
]
DECIDE = ["dashboard.approve_migration"]
CONFIGURE = [
    "dashboard.change_policy",
    "dashboard.manage_all_tokens",
    "dashboard.add_cluster",
    "dashboard.change_cluster",
    "dashboard.delete_cluster",
    # HA rules and opt-outs in the Django admin (the page and the API ask for change_policy)
    "dashboard.view_harule",
    "dashboard.add_harule",
    "dashboard.change_harule",
    "dashboard.delete_harule",
    "dashboard.view_rebalanceoptout",
    "dashboard.add_rebalanceoptout",
    "dashboard.delete_rebalanceoptout",
    # notification destinations in the Django admin (the API asks for change_cluster)
    "dashboard.view_notificationdestination",
    "dashboard.add_notificationdestination",
    "dashboard.change_notificationdestination",
    "dashboard.delete_notificationdestination",
]
ROLES = {"viewer": VIEW, "operator": VIEW + DECIDE, "admin": VIEW + DECIDE + CONFIGURE}


def ensure_roles() -> None:
    """Create the groups and set their permissions to exactly the table above."""
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        wanted = [
            Permission.objects.get(content_type__app_label=app, codename=codename)
            for app, codename in (perm.split(".") for perm in codenames)
        ]
        group.permissions.set(wanted)
