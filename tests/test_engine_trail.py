"""Which audit events a round's outcome writes (crs.trail), as a table, without a database."""

from types import SimpleNamespace

import pytest

from crs.trail import Previous, events, reads


def outcome(decision="migrate", waiting="", kept="", kept_plan=None, held="", new_plan=None):
    return SimpleNamespace(
        held=held,
        new_plan=SimpleNamespace(number=new_plan) if new_plan else None,
        result=SimpleNamespace(decision=decision),
        waiting=waiting,
        verdict=SimpleNamespace(kept=kept),
        kept_plan=kept_plan,
    )


WAIT = "an evacuation goes first (plan 4): no balancing plan until it is done"


@pytest.mark.parametrize(
    ("shows", "got", "previous", "written"),
    [
        ("a quiet round writes nothing", outcome(decision="hold"), Previous(), ()),
        (
            "a held plan says why",
            outcome(held="outside the change windows", new_plan=7),
            Previous(),
            (("automation-held", {"plan": 7, "reason": "outside the change windows"}),),
        ),
        (
            "a new wait is written",
            outcome(waiting=WAIT),
            Previous(waiting="something else"),
            (("waiting", {"reason": WAIT}),),
        ),
        ("the same wait as the last round is not written again", outcome(waiting=WAIT), Previous(waiting=WAIT), ()),
        (
            "a kept plan is written once",
            outcome(waiting=WAIT, kept="kept: still gains 12 %", kept_plan=3),
            Previous(),
            (("waiting", {"reason": "kept: still gains 12 %", "kept_plan": 3}),),
        ),
        ("not twice", outcome(waiting=WAIT, kept="kept", kept_plan=3), Previous(kept_logged=True), ()),
        ("no wait outside a migrate round", outcome(decision="balanced", waiting=WAIT), Previous(waiting=""), ()),
    ],
)
def test_round_trail(shows, got, previous, written) -> None:
    assert events(got, previous) == written, shows


def test_only_the_previous_state_needed_is_read() -> None:
    assert reads(outcome(decision="hold")) == ""
    assert reads(outcome(waiting=WAIT)) == "waiting"
    assert reads(outcome(waiting=WAIT, kept="kept", kept_plan=3)) == "kept"
