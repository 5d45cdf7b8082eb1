"""One unit per concept, and "recommendation" for the proposed move (issue 10).

Percent settings become fractions, minute settings durations, `suggestion_expiry` becomes
`recommendation_expiry`; the audit trail's recorded settings changes follow (the API's
units: fractions and seconds), and a round's `hold_count` means the rounds of the hold
served, as in its explanation. New settings of this wave; `moves_per_round` is 1 for
existing clusters (what they did before) and 5 for new ones. Reversible.
"""

import datetime

import django.core.validators
from django.db import migrations, models

PERCENT = ("threshold", "margin", "automatic_margin")
MINUTES = {"cooldown": "cooldown", "rejection_memory": "rejection_memory", "recommendation_expiry": "suggestion_expiry"}
# Decisions whose round restarted the hold: stored 0 ("after the round") before, the served count now.
ACTING = ("migrate", "below-margin", "no-candidate")


def to_fractions_and_durations(apps, schema_editor):
    Policy = apps.get_model("dashboard", "Policy")
    for policy in Policy.objects.all():
        for name in PERCENT:
            setattr(policy, name, getattr(policy, name) / 100)
        for name in MINUTES:
            setattr(policy, name, datetime.timedelta(minutes=getattr(policy, f"{name}_minutes")))
        policy.save()
    Round = apps.get_model("dashboard", "Round")
    for round_ in Round.objects.filter(decision__in=ACTING).only("explanation"):
        Round.objects.filter(pk=round_.pk).update(hold_count=round_.explanation["hold_count"])
    convert_audit(apps, percent=lambda v: v / 100, minutes=lambda v: v * 60, names=MINUTES)


def to_percent_and_minutes(apps, schema_editor):
    Policy = apps.get_model("dashboard", "Policy")
    for policy in Policy.objects.all():
        for name in PERCENT:
            setattr(policy, name, round(getattr(policy, name) * 100, 9))
        for name in MINUTES:
            setattr(policy, f"{name}_minutes", round(getattr(policy, name).total_seconds() / 60))
        policy.save()
    apps.get_model("dashboard", "Round").objects.filter(decision__in=ACTING).update(hold_count=0)
    old_names = {old: new for new, old in MINUTES.items()}
    convert_audit(apps, percent=lambda v: round(v * 100, 9), minutes=lambda v: round(v / 60), names=old_names)


def convert_audit(apps, percent, minutes, names):
    """The settings changes the trail recorded, in the other units (`names`: the name after → the name before)."""
    AuditEvent = apps.get_model("dashboard", "AuditEvent")
    renamed = {old: new for new, old in names.items()}
    for event in AuditEvent.objects.filter(action="settings-changed"):
        changes = {}
        for name, values in event.details.get("changes", {}).items():
            convert = percent if name in PERCENT else minutes if name in renamed else None
            if convert:
                values = [convert(v) if isinstance(v, int | float) else v for v in values]
            changes[renamed.get(name, name)] = values
        AuditEvent.objects.filter(pk=event.pk).update(details={**event.details, "changes": changes})


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0005_cluster_archived'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='migration',
            options={'ordering': ['-suggested_at', '-pk'], 'permissions': [('approve_migration', 'Can approve or reject recommended migrations')]},
        ),
        migrations.RenameField(model_name='policy', old_name='cooldown', new_name='cooldown_minutes'),
        migrations.RenameField(model_name='policy', old_name='rejection_memory', new_name='rejection_memory_minutes'),
        migrations.RenameField(model_name='policy', old_name='suggestion_expiry', new_name='recommendation_expiry_minutes'),
        migrations.AddField(
            model_name='policy',
            name='cooldown',
            field=models.DurationField(default=datetime.timedelta(seconds=1800), help_text='How long a guest stays put after a migration; it is not moved back meanwhile either.', validators=[django.core.validators.MinValueValidator(datetime.timedelta(0), message='cooldown must be between 0 and 604800 seconds'), django.core.validators.MaxValueValidator(datetime.timedelta(days=7), message='cooldown must be between 0 and 604800 seconds')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='rejection_memory',
            field=models.DurationField(default=datetime.timedelta(seconds=3600), help_text='How long a rejected guest → node move is not recommended again.', validators=[django.core.validators.MinValueValidator(datetime.timedelta(0), message='rejection memory must be between 0 and 604800 seconds'), django.core.validators.MaxValueValidator(datetime.timedelta(days=7), message='rejection memory must be between 0 and 604800 seconds')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='recommendation_expiry',
            field=models.DurationField(default=datetime.timedelta(seconds=900), help_text='How long a recommendation waits for a decision before it expires.', validators=[django.core.validators.MinValueValidator(datetime.timedelta(seconds=60), message='recommendation expiry must be between 60 and 604800 seconds'), django.core.validators.MaxValueValidator(datetime.timedelta(days=7), message='recommendation expiry must be between 60 and 604800 seconds')]),
        ),
        migrations.AlterField(
            model_name='policy',
            name='automatic_margin',
            field=models.FloatField(default=0.25, help_text='Partial automation: recommendations gaining at least this much approve themselves.', validators=[django.core.validators.MinValueValidator(0, message='automatic margin must be between 0 and 1'), django.core.validators.MaxValueValidator(1, message='automatic margin must be between 0 and 1')]),
        ),
        migrations.AlterField(
            model_name='policy',
            name='margin',
            field=models.FloatField(default=0.1, help_text='Minimum relative gain of the imbalance for a recommendation.', validators=[django.core.validators.MinValueValidator(0, message='margin must be between 0 and 1'), django.core.validators.MaxValueValidator(1, message='margin must be between 0 and 1')]),
        ),
        migrations.AlterField(
            model_name='policy',
            name='threshold',
            field=models.FloatField(default=0.3, help_text='Imbalance above which a round looks for a migration.', validators=[django.core.validators.MinValueValidator(0, message='threshold must be between 0 and 1'), django.core.validators.MaxValueValidator(1, message='threshold must be between 0 and 1')]),
        ),
        migrations.AlterField(
            model_name='policy',
            name='automation',
            field=models.CharField(choices=[('manual', 'manual: every recommendation waits for approval'), ('partial', 'partial: automatic when the gain reaches the automatic margin'), ('automatic', 'automatic (auto-rebalance on): rounds approve their own recommendations')], default='manual', max_length=10),
        ),
        migrations.AlterField(
            model_name='policy',
            name='hold_duration',
            field=models.IntegerField(default=3, help_text='Rounds the imbalance must stay above the threshold before a recommendation.', validators=[django.core.validators.MinValueValidator(0, message='hold duration must be between 0 and 1000 rounds'), django.core.validators.MaxValueValidator(1000, message='hold duration must be between 0 and 1000 rounds')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='cpu_overcommit',
            field=models.FloatField(default=4.0, help_text='Configured cores a node may carry per CPU thread.', validators=[django.core.validators.MinValueValidator(1, message='cpu overcommit must be between 1 and 64'), django.core.validators.MaxValueValidator(64, message='cpu overcommit must be between 1 and 64')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='load_floor',
            field=models.FloatField(default=0.0, help_text='Below this load on every node the cluster counts as balanced.', validators=[django.core.validators.MinValueValidator(0, message='load floor must be between 0 and 1'), django.core.validators.MaxValueValidator(1, message='load floor must be between 0 and 1')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='max_migrations_per_node',
            field=models.IntegerField(default=1, help_text='Migrations one node may take part in at once.', validators=[django.core.validators.MinValueValidator(1, message='max migrations per node must be between 1 and 16'), django.core.validators.MaxValueValidator(16, message='max migrations per node must be between 1 and 16')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='memory_reserve',
            field=models.PositiveBigIntegerField(default=0, help_text='Memory per node kept free of guests (bytes).', validators=[django.core.validators.MinValueValidator(0, message='memory reserve must be between 0 and 1099511627776 bytes'), django.core.validators.MaxValueValidator(1099511627776, message='memory reserve must be between 0 and 1099511627776 bytes')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='objective',
            field=models.CharField(choices=[('even', 'even: spread the load evenly'), ('pressure', 'pressure: relieve nodes short of CPU or memory'), ('both', 'both: relieve pressure first, then spread evenly')], default='even', max_length=10),
        ),
        migrations.AddField(
            model_name='policy',
            name='target_imbalance',
            field=models.FloatField(blank=True, help_text="Imbalance a round's moves aim for, at most the threshold; empty = the threshold.", null=True, validators=[django.core.validators.MinValueValidator(0, message='target imbalance must be between 0 and 1'), django.core.validators.MaxValueValidator(1, message='target imbalance must be between 0 and 1')]),
        ),
        migrations.AddField(
            model_name='policy',
            name='moves_per_round',
            field=models.IntegerField(default=1, help_text='Migrations one round may recommend at most.', validators=[django.core.validators.MinValueValidator(1, message='moves per round must be between 1 and 50'), django.core.validators.MaxValueValidator(50, message='moves per round must be between 1 and 50')]),
        ),
        migrations.RunPython(to_fractions_and_durations, to_percent_and_minutes),
        migrations.RemoveField(model_name='policy', name='cooldown_minutes'),
        migrations.RemoveField(model_name='policy', name='rejection_memory_minutes'),
        migrations.RemoveField(model_name='policy', name='recommendation_expiry_minutes'),
        migrations.AlterField(
            model_name='policy',
            name='moves_per_round',
            field=models.IntegerField(default=5, help_text='Migrations one round may recommend at most.', validators=[django.core.validators.MinValueValidator(1, message='moves per round must be between 1 and 50'), django.core.validators.MaxValueValidator(50, message='moves per round must be between 1 and 50')]),
        ),
    ]
