"""What objective `both` costs in migrations against `even`, on a real trace window.

The admin's question before switching the objective: "how many more live migrations
will relieving stalls cost me?" Three hours of the Bitbrains day from noon (its
busiest stretch) on 6 nodes, crowded at the start as the pressure table in
bench/README.md sizes them, product defaults, the dashboard's 30-minute cooldown.
Before pressure moves needed a net relief (`crs.pressure.net_relief`), `both` spent
16 migrations here against `even`'s 10, five of them chasing a peak that ended on its own;
before its evenness plans stopped halfway to the target (`crs.balancer.evenness_target`), 11.
Since a CPU peak new at a round waits a round (`crs.lasting`), `both` leaves 10 360
guest-minutes under pressure here against `even`'s 13 150 (5 860 before): in three hours from a
crowded start every stall is new once. The issue's "at most half of `even`" is judged on days
2..N of the multi-day traces (`bench.forecast_targets`), where it holds (bench/README.md).
"""

import pytest

from crs.replay import replay, summary
from crs.snapshot import parse_settings

WINDOW = {"trace": "bitbrains", "nodes": 6, "hot_nodes": 3, "start_sample": 144}  # 12:00, 5-minute samples
ROUNDS = 36  # three hours, one round per sample
COOLDOWN_S = 1800.0


def window(objective: str) -> dict:
    settings = parse_settings({"mode": "dynamic", "preset": "product", "objective": objective}, "settings")
    return summary(replay(WINDOW | {"round_interval_s": 10.0}, settings, ROUNDS, cooldown_s=COOLDOWN_S))


@pytest.fixture(scope="module")
def compared() -> tuple[dict, dict]:
    return window("even"), window("both")


def test_both_relieves_stalls_that_even_leaves(compared):
    even, both = compared
    assert even["guest_minutes_under_pressure"] > 0  # the window does stall under `even`
    assert both["guest_minutes_under_pressure"] <= 0.8 * even["guest_minutes_under_pressure"]


def test_both_costs_no_more_migrations_than_even(compared):
    """The issue's target: no more migrations than `even` (here 10 each, bench/README.md,
    "Objective both: evenness plans stop halfway"). This fails as soon as pressure moves chase
    stalls they cannot end again, or `both`'s evenness plans spend moves that gain little."""
    even, both = compared
    assert both["migrations"]["started"] <= even["migrations"]["started"]
