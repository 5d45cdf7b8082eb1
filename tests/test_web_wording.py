"""Every engine decision and every coded setting has plain words on the page; the codes stay in the API."""

import json
import re
import typing
from pathlib import Path

import pytest
from django.urls import reverse

import crs.decision
import crs.model
import crs.precedence
from dashboard import wording
from dashboard.models import Policy

CONTRACT = Path(__file__).parent.parent / "docs" / "snapshot-format.md"


def contract_decisions() -> set[str]:
    """The codes docs/snapshot-format.md promises readers of crs-plan/1 ("`decision` is one of …")."""
    text = CONTRACT.read_text()
    listing = text[text.index("`decision` is one of") : text.index("`move` is null")]
    return set(re.findall(r"`([a-z]+(?:-[a-z]+)*)`", listing)) - {
        "decision",
        "move",
        "plan",
        "pressure",
        "load_floor",
        "both",
    }


def test_every_decision_the_engine_can_make_has_plain_words():
    codes = set(typing.get_args(crs.decision.Decision)) | contract_decisions()
    assert codes - set(wording.DECISIONS) == set(), "add the new decision's words to dashboard/wording.py"
    assert set(wording.DECISIONS) <= codes, "words for a decision the engine no longer makes"
    for code, words in wording.DECISIONS.items():
        assert code not in words and words[0].isupper(), code  # a sentence, not the code again


def test_every_kind_of_recommendation_has_plain_words():
    assert list(wording.KINDS) == list(crs.precedence.KINDS)  # highest precedence first, as the list sorts
    assert all(words[0].isupper() for words in wording.KINDS.values())  # words, not the code


def test_every_coded_setting_value_has_plain_words():
    engine = {"mode": crs.model.MODES, "method": crs.model.METHODS, "imbalance_scale": crs.model.SCALES}
    for name, values in engine.items():
        assert [value for value, _ in wording.CHOICES[name]] == list(values), name
    coded = [
        ("automation", Policy.AUTOMATION_CHOICES),
        ("objective", Policy.OBJECTIVE_CHOICES),
        ("containers", Policy.CONTAINER_CHOICES),
    ]
    for name, choices in coded:
        assert [value for value, _ in wording.CHOICES[name]] == [value for value, _ in choices], name
    for name, choices in wording.CHOICES.items():
        assert all(words.startswith(f"{value}: ") for value, words in choices), name  # the code, then words
        assert name in wording.HELP or name == "mode", name  # the help below the field says the rest


@pytest.mark.django_db
def test_the_pages_say_decisions_and_settings_in_words_and_the_api_keeps_codes(client, viewer, collected):
    Policy.objects.filter(cluster=collected).update(threshold=0.01, margin=0.01, mode="dynamic", imbalance_scale="raw")
    client.force_login(viewer)
    page = client.get(reverse("dashboard:cluster", args=[collected.pk])).content.decode()
    table = re.search(r'<script id="decision-words" type="application/json">(.*?)</script>', page)
    assert json.loads(table.group(1)) == wording.DECISIONS  # what dashboard.js shows for a round's decision
    kinds = re.search(r'<script id="kind-words" type="application/json">(.*?)</script>', page)
    assert json.loads(kinds.group(1)) == wording.KINDS  # what it says a recommendation is for
    values = re.search(r'<dl class="settings-values".*?</dl>', page, re.S).group(0)
    assert "<dd>dynamic: measured usage</dd>" in values
    assert "<dd>raw: coefficient of variation</dd>" in values and "<dd>raw</dd>" not in values
    assert re.search(r'id="preset" data-preset="(proxmox|product)">(proxmox|product): ', page)

    plan = client.get(reverse("dashboard:plan", args=[collected.pk])).content.decode()
    code = client.get(reverse("dashboard:plan", args=[collected.pk]), {"format": "json"}).json()["decision"]
    assert f'data-decision="{code}">{wording.DECISIONS[code]}</strong>' in plan
    api = client.get(reverse("api:cluster-state", args=[collected.pk])).json()
    assert api["settings"]["mode"] == "dynamic" and api["settings"]["imbalance_scale"] == "raw"
