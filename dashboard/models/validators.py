"""The validators and choices the models share: fractions, durations, whole numbers, names."""

from datetime import timedelta
from zoneinfo import available_timezones

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator

import crs.model
import crs.sources

MODE_CHOICES = [(m, m) for m in crs.model.MODES]
METHOD_CHOICES = [(m, m) for m in crs.model.METHODS]
SCALE_CHOICES = [(s, s) for s in crs.model.SCALES]
SOURCE_CHOICES = [(kind, kind) for kind in crs.sources.KINDS]
# The zones this machine's tz database knows; a form's choices, never a field's (they differ by machine).
TIME_ZONE_CHOICES = [(zone, zone) for zone in sorted(available_timezones())]


def known_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError("time zone must be an IANA zone name, e.g. Europe/Berlin or UTC")


MAX_MEMORY_RESERVE = 2**40  # bytes per node (1 TiB)


def fraction_validators(field: str) -> list:
    message = f"{field} must be between 0 and 1"
    return [MinValueValidator(0, message=message), MaxValueValidator(1, message=message)]


def duration_validators(field: str, low: timedelta, high: timedelta) -> list:
    message = f"{field} must be between {low.total_seconds():g} and {high.total_seconds():g} seconds"
    return [MinValueValidator(low, message=message), MaxValueValidator(high, message=message)]


def whole_number_validators(field: str, low: int, high: int, unit: str) -> list:
    message = f"{field} must be between {low} and {high} {unit}".rstrip()
    return [MinValueValidator(low, message=message), MaxValueValidator(high, message=message)]


# A name goes into file names and headers (the snapshot download): no line breaks or other
# control characters.
printable_name = RegexValidator(
    r"\A[^\x00-\x1f\x7f]+\Z", "name must not contain line breaks, tabs or other control characters"
)
