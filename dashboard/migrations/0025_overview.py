from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0024_clustersecret"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="trend",
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
    ]
