"""Two beat processes do not double the rounds: the second waits, saying why, and takes over
when the first stops."""

import psycopg
import pytest
from conftest import own_database, wait_until

from harness.stack import ARTIFACTS, BEAT, VENV_BIN, distributed_stack, start, stop

PASSWORD = "beat-password"
WAITS = "another beat is running (it holds the beat lease)"
TAKES_OVER = "the other beat stopped: this one schedules the rounds now"


def rounds_of_demo(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM dashboard_round").fetchone()[0]


def lease_holders(database_url: str) -> int:
    """Connections holding the beat lease (project/celery.py's advisory lock)."""
    with psycopg.connect(database_url) as conn:
        # advisory locks belong to a database: other test runs' beats hold the same key on theirs
        query = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return conn.execute(query, (0x637273,)).fetchone()[0]


@pytest.mark.servers
def test_a_second_beat_waits_and_the_rounds_are_not_doubled(redis_url):
    with own_database("beat") as database_url, distributed_stack(database_url, redis_url, PASSWORD, "beat") as stack:
        _, (_, _, first, _) = stack  # web, worker, beat, Proxmox worker
        env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRS_SECRET_KEY": "beat-test"}
        log = ARTIFACTS / "beat-second.log"
        second = start([str(VENV_BIN / BEAT[0]), *BEAT[1:]], env, log)
        try:
            wait_until(lambda: WAITS in log.read_text(), timeout=120)
            # The first beat goes on scheduling rounds while the second waits, and one holds the lease.
            before = rounds_of_demo(database_url)
            wait_until(lambda: rounds_of_demo(database_url) >= before + 3, timeout=120)
            assert lease_holders(database_url) == 1
            assert TAKES_OVER not in log.read_text()
            stop(first)  # the supervised first beat, whole: the second takes over
            wait_until(lambda: TAKES_OVER in log.read_text(), timeout=120)
            before = rounds_of_demo(database_url)
            wait_until(lambda: rounds_of_demo(database_url) >= before + 3, timeout=120)
            assert lease_holders(database_url) == 1
        finally:
            stop(second)
