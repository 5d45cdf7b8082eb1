"""Whether an approved step may start now (crs.starts), replayed from tests/fixtures/starts/*.json
without a database: a step and the queue beside it (`turn`), a fresh snapshot and the claims
ahead (`decide`), or the moves holding claims (`ahead`). Each file's `shows` says what it pins."""

import json
from pathlib import Path

import pytest

import crs.snapshot
import crs.starts
from crs.decision import Move

CASES = sorted((Path(__file__).parent / "fixtures" / "starts").glob("*.json"))


def step(raw: dict) -> crs.starts.Step:
    move = Move(raw["guests"][0], tuple(raw["guests"]), raw["source"], raw["target"], 0.0, 0.1)
    at = (raw["approved_at"][0], raw["approved_at"][1])
    return crs.starts.Step(raw["name"], move, raw["kind"], raw["state"], at, tuple(raw["alternatives"]))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_start(path: Path) -> None:
    case = json.loads(path.read_text())
    expected, me = case["expected"], step(case["step"])
    if "queue" in case:
        queue = case["queue"] | {
            "approved_kinds": frozenset(case["queue"].get("approved_kinds", ())),
            "running": tuple(tuple(pair) for pair in case["queue"].get("running", ())),
        }
        assert crs.starts.turn(me, crs.starts.Queue(**queue)) == expected["turn"], case["shows"]
    elif "holding" in case:
        got = crs.starts.ahead(me, [step(s) for s in case["holding"]])
        assert [name for name, _ in got] == expected["ahead"], case["shows"]
    else:
        ahead = [(s["name"], step(s).move) for s in case.get("ahead", [])]
        got = crs.starts.decide(me, crs.snapshot.parse(case["snapshot"]), ahead)
        assert (got.verdict, got.target) == (expected["verdict"], expected["target"]), case["shows"]
        if "reason_has" in expected:
            assert expected["reason_has"] in got.reason, (case["shows"], got.reason)
        else:
            assert got.reason == expected["reason"], case["shows"]


def test_fifteen_cases_at_least() -> None:
    assert len(CASES) >= 15
