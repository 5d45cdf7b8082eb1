"""The round's decisions, replayed from tests/fixtures/rounds/ with no database and no clock.

Each folder holds a round's inputs, the outcome expected (written by tests/round_scenarios.py
after checking the decisions reasoned for it) and one line saying what it shows.
"""

import json
from dataclasses import replace

import pytest
from round_fixtures import ROOT, load, summary

import crs.round
import crs.usage
from crs.automation import Automation, self_approved
from crs.balancer import apply_move

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


@pytest.mark.parametrize(
    "name",
    ["kept-not-beaten", "kept-same-plan", "kept-beaten-within-dwell", "hold-served", "partly-carried-out-running"],
)
def test_the_plan_the_page_shows_comes_as_data_with_the_figures_its_words_say(name):
    """One plan, one set of figures: the status line and the node bars' marks read these, not the sentence."""
    inputs = load(json.loads((ROOT / name / "input.json").read_text()))
    # The bars show measured use; these fixtures plan on configured sizes: measured = configured.
    guests = tuple(replace(g, cpu_usage=g.cores, mem_usage_bytes=g.memory_bytes) for g in inputs.snapshot.guests)
    inputs = replace(inputs, snapshot=replace(inputs.snapshot, guests=guests))
    outcome = crs.round.decide(inputs)
    figures = outcome.explanation["plan_figures"]
    assert figures["imbalance"] == pytest.approx(outcome.result.imbalance)  # "now" is the headline's
    if outcome.verdict.kept:
        before, after, gain = figures["imbalance"], figures["imbalance_after"], figures["gain"]
        assert f"from {before:.1%} to {after:.1%}, a total gain of {gain:.1%}" in outcome.verdict.kept
        moves = [m.move for m in inputs.moves if m.plan == figures["plan"]]
    elif outcome.waiting:  # part of the plan runs: its waiting steps' figures, from where the rest leaves it
        moves = [m.move for m in inputs.moves if m.plan == figures["plan"] and m.state == "suggested"]
        assert figures["moves"] == len(moves) + 1 and not outcome.plans  # and the one under way
        for m in inputs.moves:
            if m.plan == figures["plan"] and m.state == "running":
                inputs = replace(inputs, snapshot=apply_move(inputs.snapshot, m.move))
    else:
        plan = outcome.new_plan
        assert figures["plan"] == plan.number and figures["moves"] == len(plan.steps)
        assert figures["imbalance_after"] == pytest.approx(plan.steps[-1].imbalance_after)
        moves = [s.move for s in plan.steps]
    now = {s.name: s.cpu_load for s in crs.usage.node_stats(inputs.snapshot, "dynamic")}
    after = {name: u["cpu"] for name, u in figures["node_usage_after"].items()}
    assert after.keys() == now.keys()
    assert after[moves[0].target] > now[moves[0].target]  # the bars' mark shows the load it takes on
    # Each move's own share (what its card draws when pointed at), in order; together they are the marks.
    moved = figures["moved_load"]
    assert [(m["leader"], m["source"], m["target"]) for m in moved] == [(m.leader, m.source, m.target) for m in moves]
    shifted = dict(now)
    for m in moved:
        assert m["leaves"]["cpu"] > 0 and m["arrives"]["cpu"] > 0, m
        shifted[m["source"]] -= m["leaves"]["cpu"]
        shifted[m["target"]] += m["arrives"]["cpu"]
    assert shifted == pytest.approx(after)
