"""Two beat processes do not double the rounds: the second waits, saying why, and takes over
when the first stops."""

import time

import psycopg
import pytest
from conftest import own_database

from harness.stack import ARTIFACTS, BEAT, VENV_BIN, distributed_stack, start, stop

PASSWORD = "beat-password"


def rounds_of_demo(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM dashboard_round").fetchone()[0]


@pytest.mark.servers
def test_a_second_beat_waits_and_the_rounds_are_not_doubled(redis_url):
    with own_database("beat") as database_url, distributed_stack(database_url, redis_url, PASSWORD, "beat"):
        env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRS_SECRET_KEY": "beat-test"}
        log = ARTIFACTS / "beat-second.log"
        second = start([str(VENV_BIN / BEAT[0]), *BEAT[1:]], env, log)
        try:
            time.sleep(8)  # both beats up; the rounds settle at one a second
            before, begun = rounds_of_demo(database_url), time.monotonic()
            time.sleep(20)
            per_second = (rounds_of_demo(database_url) - before) / (time.monotonic() - begun)
            assert "another beat is running (it holds the beat lease)" in log.read_text()
        finally:
            stop(second)
    assert 0.5 <= per_second <= 1.3  # one-second rounds, not two a second
