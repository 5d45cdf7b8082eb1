from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0021_n1size"),
    ]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="n1_queued_until",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
