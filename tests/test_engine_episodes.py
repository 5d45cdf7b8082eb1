"""The "imbalance above the threshold" episode (crs.episodes), as a table: who is told, without a database."""

from datetime import UTC, datetime, timedelta

import pytest

from crs.episodes import Destination, above, lasted_words, notice

SINCE = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
EARLIER = SINCE - timedelta(hours=3)
M = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("shows", "destinations", "lasted", "due"),
    [
        ("told once the episode lasted its wait", [Destination(1, True, 15 * M)], 15 * M, (1,)),
        ("not before its wait", [Destination(1, True, 15 * M)], 14 * M, ()),
        ("not twice in one episode", [Destination(1, True, 15 * M, SINCE)], 40 * M, ()),
        ("again in a new episode", [Destination(1, True, 15 * M, EARLIER)], 15 * M, (1,)),
        ("not a destination that did not choose it", [Destination(1, False, 0 * M)], 60 * M, ()),
        (
            "each destination at its own wait",
            [Destination(1, True, 5 * M), Destination(2, True, 30 * M), Destination(3, True, 10 * M)],
            10 * M,
            (1, 3),
        ),
    ],
)
def test_who_is_told(shows: str, destinations: list[Destination], lasted: timedelta, due: tuple[int, ...]) -> None:
    assert notice("c1", 0.4, 0.3, SINCE, SINCE + lasted, tuple(destinations)).due == due, shows


def test_the_threshold_itself_is_not_above_it() -> None:
    assert above(0.31, 0.3) and not above(0.3, 0.3)


def test_the_message_says_how_long_and_since_when() -> None:
    told = notice("c1", 0.412, 0.3, SINCE, SINCE + 150 * M, (Destination(1, True, M),))
    assert told.title == "c1: imbalance above the threshold for 2.5 hours"
    assert told.body == "Imbalance 41.2%, threshold 30.0%; above it since 2026-12-06 10:00 UTC, in every round since."
    assert lasted_words(M) == "1 minute" and lasted_words(119 * M) == "119 minutes"
