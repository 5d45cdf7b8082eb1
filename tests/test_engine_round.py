"""The round's decisions, replayed from tests/fixtures/rounds/ with no database and no clock.

Each folder holds a round's inputs, the outcome expected (written by tests/round_scenarios.py
after checking the decisions reasoned for it) and one line saying what it shows.
"""

import json

import pytest
from round_fixtures import ROOT, load, summary

import crs.round
from crs.automation import Automation, self_approved

FIXTURES = sorted(p.name for p in ROOT.iterdir() if p.is_dir())


def test_there_are_enough_fixtures_and_each_says_what_it_shows():
    assert len(FIXTURES) >= 40
    for name in FIXTURES:
        assert (ROOT / name / "README").read_text().strip(), name


@pytest.mark.parametrize("name", FIXTURES)
def test_round_fixture(name):
    folder = ROOT / name
    outcome = crs.round.decide(load(json.loads((folder / "input.json").read_text())))
    expected = json.loads((folder / "expected.json").read_text())
    got = summary(outcome)
    for key in (
        "decision",
        "hold_count",
        "plans",
        "expired",
        "approved",
        "verdict",
        "waiting",
        "held",
        "opened",
        "closed",
    ):
        assert got[key] == expected[key], (name, key)
    assert got == expected


def test_partial_automation_approves_the_steps_clearing_the_automatic_margin_with_those_before_them():
    partial = Automation(level="partial", automatic_margin=0.25)
    assert self_approved(partial, (0.05, 0.3, 0.1), (None, 0, 1)) == (0, 1)
    assert self_approved(Automation(level="manual"), (0.9,), (None,)) == ()
    assert self_approved(Automation(level="automatic"), (0.0, 0.0), (None, 0)) == (0, 1)
