"""The cluster's minimum dwell: how long a waiting recommendation stands before a better plan
may replace it. The existing clusters take their preset's value: 10 minutes under `product`,
0 under `proxmox` (Proxmox replaces a plan as soon as another beats it by the margin).
"""

import datetime

import django.core.validators
from django.db import migrations, models


def preset_values(apps, schema_editor):
    apps.get_model("dashboard", "Policy").objects.filter(preset="proxmox").update(minimum_dwell=datetime.timedelta(0))


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0028_round_lease_holder")]

    operations = [
        migrations.AddField(
            model_name="policy",
            name="minimum_dwell",
            field=models.DurationField(
                default=datetime.timedelta(seconds=600),
                help_text="How long a waiting recommendation stands before a better plan may replace it; "
                "at most the recommendation expiry.",
                validators=[
                    django.core.validators.MinValueValidator(
                        datetime.timedelta(0), message="minimum dwell must be between 0 and 604800 seconds"
                    ),
                    django.core.validators.MaxValueValidator(
                        datetime.timedelta(days=7), message="minimum dwell must be between 0 and 604800 seconds"
                    ),
                ],
            ),
        ),
        migrations.RunPython(preset_values, migrations.RunPython.noop),
    ]
