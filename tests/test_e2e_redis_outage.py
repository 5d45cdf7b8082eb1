"""A Redis outage as the browser sees it under the distributed mode (daphne, worker and
beat as processes): the live page tells the user that live updates are paused instead of
showing a chart that silently stops, and comes back by itself when Redis does.

Run with the other browser tests (`pytest -m e2e`): the servers own the database, the
test process touches none.
"""

import pytest
from conftest import own_database
from test_e2e_dashboard import (  # noqa: F401 (fixtures)
    CHART_POINTS,
    PASSWORD,
    Served,
    browser,
    chart_points,
    page,
    wait_until,
)

from harness.stack import ARTIFACTS, distributed_stack

pytestmark = pytest.mark.e2e
OUTAGE_WAIT_MS = 90_000  # reconnects back off; beat and the worker reconnect to Redis on their own pace


@pytest.fixture
def server(redis_server):
    """The stack on a Redis of the test's own, which the test stops and starts again; its demo cluster."""
    with own_database("e2e_outage") as database_url:
        with distributed_stack(database_url, redis_server.url, PASSWORD, "e2e-outage") as (url, _):
            yield Served(url, 1, {"DATABASE_URL": database_url, "REDIS_URL": redis_server.url})


def wait_for_growth(page, points: int = 2) -> None:
    before = chart_points(page)
    wait_until(page, f"{CHART_POINTS} >= {before + points}", timeout=OUTAGE_WAIT_MS)


def test_page_says_live_updates_are_paused_while_redis_is_down_and_resumes(page, redis_server):
    wait_for_growth(page)

    redis_server.stop()
    wait_until(
        page,
        "!document.getElementById('live-paused').hidden"
        " && document.getElementById('ws-state').textContent.startsWith('paused')",
        timeout=OUTAGE_WAIT_MS,
    )
    assert page.inner_text("#live-paused").startswith("Live updates are paused")
    page.screenshot(path=str(ARTIFACTS / "redis-outage-paused.png"), full_page=True)

    redis_server.start()
    wait_until(page, "document.getElementById('ws-state').textContent === 'open'", timeout=OUTAGE_WAIT_MS)
    assert page.locator("#live-paused").is_hidden()
    wait_for_growth(page)
