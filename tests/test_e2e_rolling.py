"""Rolling maintenance in a real browser: an admin starts one over two nodes, pauses it while the
first node drains, resumes it, says the node is back and sees it done (runembedded, a simulated
cluster as the demo)."""

import pytest
from test_e2e_dashboard import (  # noqa: F401 (fixtures)
    ARTIFACTS,
    browser,
    own_cluster,
    page,
    simulated,
    wait_for_first_round,
    wait_until,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(embedded_server):
    """A cluster with migrations that take about a second."""
    with own_cluster(embedded_server, simulated("e2e-rolling", {"migration_mib_s": 65536})) as served:
        yield served


def step(node: str) -> str:
    return f"document.querySelector(\"#rolling-queue tr[data-node='{node}']\")?.dataset.step"


def rounds_after(ms: float, count: int) -> str:
    """Whether the cluster of the rolling page has had `count` rounds since `ms` (ms since the epoch)."""
    state = "location.pathname.replace('/clusters/', '/api/v1/clusters/').replace('rolling/', 'state/')"
    since = f"s.rounds.filter((r) => Date.parse(r.at) > {ms}).length >= {count}"
    return f"fetch({state}).then((a) => a.json()).then((s) => {since})"


def test_start_pause_resume_and_node_is_back(page):  # noqa: F811
    wait_for_first_round(page)
    page.click("#rolling-link")
    page.wait_for_selector("#rolling-start-form")
    assert "No rolling maintenance yet" in page.inner_text("#rolling")
    for node in ("node11", "node12"):
        page.check(f"#rolling-start-form input[value='{node}']")
    page.click("#rolling-start")
    wait_until(page, "document.getElementById('rolling-state')?.dataset.state === 'running'")
    order = page.evaluate("[...document.querySelectorAll('#rolling-queue tbody tr')].map((r) => r.dataset.node)")
    assert sorted(order) == ["node11", "node12"]
    first, second = order
    assert "N+1 now:" in page.inner_text("#rolling-n1")
    # The first node goes down at once, unless emptying it would break N+1: then the admin chooses.
    wait_until(page, f"['draining', 'flagged'].includes({step(first)})")
    if page.evaluate(step(first)) == "flagged":
        assert "N+1 fails" in page.inner_text(f"#rolling-queue tr[data-node='{first}'] .rolling-warning")
        page.click(f"#rolling-queue tr[data-node='{first}'] .go-on")
        wait_until(page, f"{step(first)} === 'draining'")
    page.screenshot(path=str(ARTIFACTS / "rolling-draining.png"), full_page=True)
    page.click("#rolling-pause")
    wait_until(page, "document.getElementById('rolling-state')?.dataset.state === 'paused'")
    # Rounds go on (one a second), but the queue waits: once four rounds have run since the pause
    # (a marker, not a clock), the page read afresh still shows the node draining.
    paused = page.evaluate("Date.now()")
    wait_until(page, rounds_after(paused, 4))
    page.reload()
    assert page.evaluate(step(first)) == "draining"
    assert page.evaluate(step(second)) == "waiting"
    page.click("#rolling-resume")
    wait_until(page, "document.getElementById('rolling-state')?.dataset.state === 'running'")
    wait_until(page, f"{step(first)} === 'waiting-admin'")  # refreshed in place, no reload
    assert "waiting for admin" in page.inner_text(f"#rolling-queue tr[data-node='{first}'] .rolling-step")
    assert page.inner_text(f"#rolling-queue tr[data-node='{second}'] .rolling-step") == "next"
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        wait_until(page, "document.documentElement.scrollWidth <= window.innerWidth", 10_000)  # no sideways scroll
        page.screenshot(path=str(ARTIFACTS / f"rolling-waiting-for-admin-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.click(f"#rolling-queue tr[data-node='{first}'] .node-back")
    wait_until(page, f"{step(first)} === 'done'")
    wait_until(page, f"{step(second)} !== 'waiting'")  # the second node's turn
    page.click("#rolling-cancel")
    wait_until(page, "document.getElementById('rolling-state')?.dataset.state === 'cancelled'")
    page.wait_for_selector("#rolling-start-form")  # a new one may start
