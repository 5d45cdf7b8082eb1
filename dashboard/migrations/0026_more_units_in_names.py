"""Fields whose unit is not obvious carry it in their name (after 0023): the settings' round
interval, memory reserve and usage period, and the history rows' span; the data stays.

The (span, at) indexes follow their column: PostgreSQL and SQLite rename a column inside its
indexes, so nothing is rebuilt and the indexes keep their names; only the migration state
learns the index's new field (state_operations). The settings keep their words ("round
interval") as verbose names: no change to the database."""

import django.core.validators
from django.db import migrations, models

SPAN_INDEXES = [("nodesample", "dashboard_n_span_88fce9_idx"), ("guestsample", "dashboard_g_span_85664e_idx")]


def whole_number(label: str, low: int, high: int, unit: str) -> list:
    message = f"{label} must be between {low} and {high} {unit}"
    return [
        django.core.validators.MinValueValidator(low, message=message),
        django.core.validators.MaxValueValidator(high, message=message),
    ]


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0025_overview")]

    operations = [
        migrations.RenameField("policy", "round_interval", "round_interval_s"),
        migrations.RenameField("policy", "memory_reserve", "memory_reserve_bytes"),
        migrations.RenameField("policy", "usage_period", "usage_period_s"),
        migrations.AlterField(
            model_name="policy",
            name="round_interval_s",
            field=models.IntegerField(
                default=10,
                help_text="Seconds between rounds.",
                validators=whole_number("round interval", 1, 86400, "seconds"),
                verbose_name="round interval",
            ),
        ),
        migrations.AlterField(
            model_name="policy",
            name="memory_reserve_bytes",
            field=models.PositiveBigIntegerField(
                default=0,
                help_text="Memory per node kept free of guests (bytes).",
                validators=whole_number("memory reserve", 0, 1099511627776, "bytes"),
                verbose_name="memory reserve",
            ),
        ),
        migrations.AlterField(
            model_name="policy",
            name="usage_period_s",
            field=models.IntegerField(
                default=300,
                help_text="Seconds of the source's clock over which usage is averaged; 0 = the latest value.",
                validators=whole_number("usage period", 0, 86400, "seconds"),
                verbose_name="usage period",
            ),
        ),
        migrations.RenameField("round", "span", "span_s"),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.RemoveIndex(model, name) for model, name in SPAN_INDEXES]
        ),
        migrations.RenameField("nodesample", "span", "span_s"),
        migrations.RenameField("guestsample", "span", "span_s"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(model, models.Index(fields=["span_s", "at"], name=name))
                for model, name in SPAN_INDEXES
            ]
        ),
    ]
