"""HaRule.affinity now also says a node-affinity rule's direction (negative: keep off these
nodes), as the rules page, the admin and the API take it; only its help text changes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0014_history"),
    ]

    operations = [
        migrations.AlterField(
            model_name="harule",
            name="affinity",
            field=models.CharField(
                choices=[("positive", "positive"), ("negative", "negative")],
                default="positive",
                help_text="Resource affinity: positive keeps the guests together, negative apart. Node affinity: "
                "positive keeps them on the listed nodes, negative off them.",
                max_length=10,
            ),
        ),
    ]
