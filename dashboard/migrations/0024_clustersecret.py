"""The Proxmox token secret moves out of the source config into its own field, encrypted."""

from django.db import migrations, models

from dashboard import crypt


def seal(apps, schema_editor):
    Cluster = apps.get_model("dashboard", "Cluster")
    # Only the columns it changes: a later migration may drop others (tests call this on today's schema).
    for cluster in Cluster.objects.filter(source_kind="proxmox").only("source_config", "token_secret"):
        config, secret = crypt.split_secret(cluster.source_config)
        if secret is not None:
            cluster.source_config, cluster.token_secret = config, crypt.encrypt(secret)
            cluster.save(update_fields=["source_config", "token_secret"])


def unseal(apps, schema_editor):
    Cluster = apps.get_model("dashboard", "Cluster")
    for cluster in (
        Cluster.objects.filter(source_kind="proxmox").exclude(token_secret="").only("source_config", "token_secret")
    ):
        cluster.source_config = {**cluster.source_config, "token_value": crypt.decrypt(cluster.token_secret)}
        cluster.save(update_fields=["source_config"])


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0023_units_in_names")]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="token_secret",
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.RunPython(seal, unseal),
    ]
