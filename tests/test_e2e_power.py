"""Power down in a real browser, on an underused simulated cluster (runembedded: its worker and
beat are real): a power-down that would break N+1 is refused on the page with the reason; a
suggested node powered down drains through its maintenance, its moves listed on the cluster page,
until the page says it is empty and to power it off by hand; marked standby, it shows as powered
down, and the audit trail names the admin who did each step."""

import pytest
from test_e2e_dashboard import (  # noqa: F401  (a fixture)
    ARTIFACTS,
    browser,
    own_cluster,
    shell,
    simulated,
    wait_for_first_round,
    wait_until,
)
from test_e2e_page import open_page, overflow, serious_violations

pytestmark = pytest.mark.e2e
# Twelve large nodes: four carry nine guests in ten, so each other holds a handful, quick to move
# off (about a second a migration), and any node's loss is recovered: N+1 refuses only what a
# rule makes it refuse.
QUIET = {"migration_mib_s": 65536, "nodes": 12, "hot_nodes": 4, "node_sizes": [{"cpus": 256, "memory_gib": 2048}]}


@pytest.fixture(scope="module")
def stack(embedded_server):
    with own_cluster(embedded_server, simulated("e2e-power", QUIET)) as served:
        yield served


def power_down_state(page, node: str) -> str | None:
    return page.evaluate(f"document.getElementById('power-down-{node}')?.dataset.state")


def reload_until(page, node: str, state: str, timeout_s: int = 60) -> None:
    """The capacity page is drawn by the server: reload it until the power-down reached `state`."""
    for _ in range(timeout_s):
        if power_down_state(page, node) == state:
            return
        page.wait_for_timeout(1000)
        page.reload()
    raise TimeoutError(f"{node} not {state} after {timeout_s} s: {power_down_state(page, node)}")


def check_page(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"power-{name}.png"), full_page=True)
    assert (overflow(page), serious_violations(page)) == (0, []), name


def test_a_node_powered_down_on_the_page_drains_waits_for_the_admin_and_is_standby(browser, stack):  # noqa: F811
    page = open_page(browser, stack.cluster)
    wait_for_first_round(page)
    page.click("#capacity-link")
    page.wait_for_selector("#power-down-buttons")
    capacity = page.url
    suggested = page.evaluate(
        "[...document.querySelectorAll('#power-down-buttons input[name=node]')].map(i => i.value)"
    )
    assert len(suggested) >= 2, suggested
    node, other = suggested[:2]

    # A strict rule keeps one of the node's guests on it or `other`: with the node emptied, losing
    # `other` would leave that guest nowhere to go.
    rule = (
        f"from dashboard import ha; from dashboard.models import Cluster; c = Cluster.objects.get(pk={stack.pk}); "
        f"sid = next(g.sid for g in c.latest_snapshot().guests if g.node == {node!r}); "
        f"ha.save_rule({stack.pk}, {{'rule': 'two-homes', 'type': 'node-affinity', 'resources': [sid], "
        f"'nodes': [{{'node': {node!r}}}, {{'node': {other!r}}}], 'strict': True}}, None, None)"
    )
    shell(stack.env, rule)
    page.click(f"text=Power down {node}")
    refusal = page.inner_text("#power-error")
    assert refusal.startswith(f"powering {node} down breaks N+1: with {node} in maintenance, N+1 fails"), refusal
    assert power_down_state(page, node) is None  # nothing started
    # the page drawn now knows the rule: no second click sure to be refused
    assert page.is_disabled(f"text=Power down {node}") and refusal in page.inner_text("#power-refused")
    check_page(page, "refused")
    shell(
        stack.env,
        "from dashboard import ha; from dashboard.models import HaRule; "
        f"ha.delete_rule(HaRule.objects.get(cluster_id={stack.pk}), None)",
    )

    page.goto(capacity)
    page.click(f"text=Power down {node}")
    assert f"{node}: powering down." in page.inner_text(".message")
    row = f"#power-down-{node}"
    assert power_down_state(page, node) == "draining"
    assert "draining: its guests are moved off" in page.inner_text(row)
    assert "by admin" in page.inner_text(row)
    check_page(page, "draining")

    page.goto(stack.cluster)  # the evacuation's moves, run at once without an approval
    rows = "[...document.querySelectorAll('#migrations tbody tr')]"
    moves_off = f"{rows}.filter((r) => r.cells[3].textContent.startsWith('{node} → '))"
    wait_until(page, f"{moves_off}.length > 0")
    assert page.evaluate(f"{moves_off}.every((r) => r.cells[6].textContent === 'automatic')")

    page.goto(capacity)
    reload_until(page, node, "emptied")
    assert "empty: power it off by hand, then mark it standby" in page.inner_text(row)
    assert "power it off by hand" in page.inner_text(f"{row} td[data-label=next]")
    check_page(page, "emptied")
    page.click(f"text=Mark {node} standby")
    assert f"{node} is standby." in page.inner_text(".message")
    assert power_down_state(page, node) == "standby"
    assert "standby (powered down)" in page.inner_text(row)
    assert page.get_attribute("#f-standby", "value") == node  # on the standby list: no guest goes there

    page.goto(f"{stack.url}/audit/?cluster={stack.pk}&action=")
    trail = page.evaluate(
        "[...document.querySelectorAll('#audit tbody tr')].filter((r) => r.dataset.action.startsWith('power-down-'))"
        ".map((r) => [r.dataset.action, r.cells[1].textContent, r.cells[5].textContent])"
    )
    assert trail[::-1] == [
        ["power-down-started", "admin", node],
        ["power-down-emptied", "system", node],
        ["power-down-standby", "admin", node],
    ]
    check_page(page, "audit")
    assert page.errors == []
