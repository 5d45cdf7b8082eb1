"""The control loop's state machines replayed from fixtures, without a database.

tests/fixtures/rolling/*.json: a rolling maintenance's queue, what the latest look says of each
node and the N+1 answers (nodes joined by "," → the warning; absent: N+1 holds), and the steps
crs.rolling.next_steps must take. tests/fixtures/power/*.json: the open power-downs, the standby
list, and the steps crs.power.next_steps must take. Each file's `shows` says what it pins.
"""

import json
from pathlib import Path

import pytest

import crs.migration
import crs.power
import crs.rolling
from crs.machine import InvalidTransition, Machine

FIXTURES = Path(__file__).parent / "fixtures"


def cases(kind: str) -> list[Path]:
    return sorted((FIXTURES / kind).glob("*.json"))


@pytest.mark.parametrize("path", cases("rolling"), ids=lambda p: p.stem)
def test_rolling_next_steps(path: Path) -> None:
    case = json.loads(path.read_text())
    queue = tuple(crs.rolling.Queued(**e) for e in case["queue"])
    seen = {node: crs.rolling.Seen(**look) for node, look in case["seen"].items()}
    asked = []

    def breaks(nodes: list[str]) -> str:
        asked.append(nodes)
        return case.get("n1", {}).get(",".join(nodes), "")

    got = crs.rolling.next_steps(queue, seen, case["proxmox"], breaks)
    assert [c.to_dict() for c in got.changes] == case["expected"]["changes"], case["shows"]
    assert got.done == case["expected"]["done"], case["shows"]
    assert len(asked) <= 1, "N+1 is asked at most once a step (a verdict is costly)"


@pytest.mark.parametrize("path", cases("power"), ids=lambda p: p.stem)
def test_power_next_steps(path: Path) -> None:
    case = json.loads(path.read_text())
    downs = tuple(crs.power.PowerDown(**d) for d in case["downs"])
    got = crs.power.next_steps(downs, tuple(case["standby"]), case["proxmox"])
    assert [c.to_dict() for c in got] == case["expected"], case["shows"]


def test_each_machine_has_its_fifteen_cases() -> None:
    assert len(cases("rolling")) >= 15 and len(cases("power")) >= 15


@pytest.mark.parametrize(
    "machine", [crs.rolling.RUN, crs.rolling.QUEUE, crs.power.POWER_DOWN, crs.migration.MIGRATION], ids=lambda m: m.name
)
def test_a_change_outside_the_table_is_refused(machine: Machine) -> None:
    states = list(machine.labels)
    invalid = [(b, a) for b in states for a in states if not machine.allows(b, a)]
    assert invalid, "a machine that allows everything checks nothing"
    for before, after in invalid:
        with pytest.raises(InvalidTransition, match=f"{before} → {after} is not a valid transition"):
            machine.change("x", before, after, "test")


def test_done_is_final_and_steps_only_go_forward() -> None:
    """No way back from done, cancelled or standby: a replayed step cannot undo one taken."""
    for machine, final in ((crs.rolling.RUN, ("cancelled", "done")), (crs.power.POWER_DOWN, ("standby", "cancelled"))):
        assert not [pair for pair in machine.transitions if pair[0] in final]
    assert crs.rolling.RUN.sources("cancelled") == ("running", "paused")


def test_a_transition_to_an_unlabelled_state_is_a_broken_table() -> None:
    with pytest.raises(ValueError, match="without a label"):
        Machine("broken", {"a": "a"}, frozenset({("a", "b")}))
