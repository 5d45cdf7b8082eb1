"""Fields whose unit is not obvious carry it in their name, as the engine's do; the data stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0022_n1task")]

    operations = [
        migrations.RenameField("migration", "downtime", "downtime_s"),
        migrations.RenameField("round", "duration", "duration_s"),
    ]
