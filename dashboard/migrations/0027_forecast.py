"""The next hour's forecast: guests' peaks in the history, and the cluster's `forecast` setting.

A guest row older than this migration kept only its means, so its peaks start as its means
(the highest value a row covers is at least its mean: the forecast of those days reads low,
never high, until 28 days of rows with true peaks replace them). The existing clusters take
their preset's value of the setting: on under `product`, off under `proxmox`.
"""

from django.db import migrations, models


def preset_values(apps, schema_editor):
    apps.get_model("dashboard", "Policy").objects.filter(preset="proxmox").update(forecast="off")


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0026_more_units_in_names")]

    operations = [
        migrations.AddField(
            model_name="guestsample",
            name="cpu_peak",
            field=models.FloatField(default=0.0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="guestsample",
            name="mem_peak_bytes",
            field=models.FloatField(default=0.0),
            preserve_default=False,
        ),
        migrations.RunSQL(
            "UPDATE dashboard_guestsample SET cpu_peak = cpu_usage, mem_peak_bytes = mem_usage_bytes",
            migrations.RunSQL.noop,
        ),
        migrations.AddField(
            model_name="policy",
            name="forecast",
            field=models.CharField(
                choices=[
                    ("off", "off: rounds react to the usage measured now"),
                    ("on", "on: rounds also read each guest's next-hour peak, forecast from its past days"),
                ],
                default="on",
                help_text="Plans avoid nodes whose guests' daily peaks are due within the hour and move ahead "
                "of them; needs a day of guest history.",
                max_length=3,
            ),
        ),
        migrations.RunPython(preset_values, migrations.RunPython.noop),
    ]
