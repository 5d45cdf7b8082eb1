"""Write docs/settings.md, the settings reference, from the settings model itself (its fields'
names, help texts, defaults, limits and choices), so the page cannot drift from the code:
tests/test_docs.py fails when the committed file differs from what this writes.

Run: .venv/bin/python scripts/settings_reference.py   (`make settings-reference`)
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "settings.md"

HEADER = """\
# Settings reference

<!-- Written by scripts/settings_reference.py from the settings model; do not edit by hand. -->

Each cluster has one set of settings: on the cluster page (its settings form), at
`/api/v1/clusters/{{id}}/settings/` (read, or `PATCH` the fields to change) and in `/admin/`.
A change applies from the next round and restarts the hold counter. The API and the
database use one unit per concept: fractions (0–1), seconds and bytes; the page's form
shows and takes percent, minutes and GiB. Switching the preset sets
{preset_fields} to that preset's values.
"""


SUFFIXES = {"_bytes_s": "bytes per second", "_s": "seconds", "_bytes": "bytes"}


def unit(model: type, field) -> str:
    """The unit the API speaks for a field: from its name's suffix, its type, the unit its range
    check names, or the model's list of fractions."""
    for suffix, name in SUFFIXES.items():
        if field.name.endswith(suffix):
            return name
    if field.get_internal_type() == "DurationField":
        return "seconds"
    for validator in field.validators:
        high = getattr(validator, "limit_value", None)
        message = str(getattr(validator, "message", ""))
        if type(validator).__name__ == "MaxValueValidator" and f"and {shown(high)} " in message:
            return message.rsplit(f"and {shown(high)} ", 1)[1]
    if field.name in getattr(model, "FRACTIONS", ()):
        return "fraction (0–1)"
    return ""


def api_key(model: type, field) -> str:
    """The JSON key: the setting's key (Policy.key_of; the API's keys carry no unit)."""
    key_of = getattr(model, "key_of", None)
    return key_of(field.name) if key_of else field.name


def shown(value: object) -> str:
    """A default or limit as the API spells it (durations in seconds)."""
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}"
    if value is None:
        return "empty"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def limits(field) -> str:
    low = high = None
    for validator in field.validators:
        kind = type(validator).__name__
        if kind == "MinValueValidator":
            low = validator.limit_value
        elif kind == "MaxValueValidator":
            high = validator.limit_value
    if low is None and high is None:
        return ""
    return f"{shown(low) if low is not None else '…'} to {shown(high) if high is not None else '…'}"


def choice(value: object, label: object) -> str:
    """A choice as `value`: what it means (the label without the value repeated in front)."""
    meaning = str(label).removeprefix(f"{value}: ")
    return f"`{value}`" if meaning == str(value) else f"`{value}`: {meaning}"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference() -> str:
    """The page's Markdown."""
    from dashboard.models import Policy

    fields = [f for f in Policy._meta.get_fields() if getattr(f, "editable", False) and not f.is_relation]
    fields = [f for f in fields if not f.primary_key]
    preset_fields = ", ".join(f"`{name}`" for name in getattr(Policy, "PRESET_SETTINGS", ()))
    lines = [HEADER.format(preset_fields=preset_fields or "its fields"), ""]
    lines += [
        "| setting | API key | unit | default | allowed | what it does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for field in fields:
        default = field.get_default() if field.has_default() else None
        if field.choices:
            allowed = "<br>".join(choice(value, label) for value, label in field.choices)
        else:
            allowed = limits(field)
        row = [
            str(field.verbose_name),
            f"`{api_key(Policy, field)}`",
            unit(Policy, field),
            f"`{shown(default)}`" if field.has_default() else "",
            allowed,
            str(field.help_text) or "",
        ]
        lines.append("| " + " | ".join(cell(part) for part in row) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.path.insert(0, str(ROOT))  # run as a file: the checkout's dashboard, not an installed one
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.test_settings")
    import django

    django.setup()
    OUTPUT.write_text(reference())
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
