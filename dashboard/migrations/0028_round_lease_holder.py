"""The round lease names its holder (host and process), so a worker killed mid-round frees
its cluster at once for the other workers on its host (ClusterManager.lease_round); leases
taken before this migration have no holder and lapse as before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0027_forecast"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="round_lease_holder",
            field=models.CharField(blank=True, editable=False, max_length=300),
        ),
    ]
