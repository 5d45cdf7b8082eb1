"""The stored N+1 verdict keeps per lost node what goes wrong, not every node's load after it
(dashboard/ha.py): old verdicts are cut down to the new shape here, so the page and the API
read one shape, and the good → bad notice still compares with the last verdict. A round
recomputes the verdict within a minute (ha.N1_EVERY) anyway."""

from django.db import migrations

EXAMPLES = 10  # ha.EXAMPLES when this was written


def cut(loss: dict) -> dict:
    lost, down = loss.get("lost", []), loss.get("down", [])
    return {
        "node": loss["node"],
        "survived": loss["survived"],
        "summary": loss["summary"],
        "overloaded": loss.get("overloaded", []),
        "lost": lost[:EXAMPLES],
        "lost_count": len(lost),
        "recovered": sum(1 for r in loss.get("recoveries", []) if r.get("target")),
        "down": down[:EXAMPLES],
        "down_count": len(down),
    }


def forwards(apps, schema_editor):
    Cluster = apps.get_model("dashboard", "Cluster")
    for pk, verdict in Cluster.objects.exclude(n1=None).values_list("pk", "n1").iterator():
        if any("recoveries" in loss for loss in verdict.get("losses", [])):
            Cluster.objects.filter(pk=pk).update(n1={**verdict, "losses": [cut(x) for x in verdict["losses"]]})


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0020_powerexec")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
