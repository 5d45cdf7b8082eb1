"""Maintenance in a real browser: an admin puts a node into maintenance and watches it drain,
then takes it out and watches its guests come back (runembedded, a simulated cluster as the demo)."""

import pytest
from test_e2e_dashboard import ARTIFACTS, browser, own_cluster, page, simulated, wait_until  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(embedded_server):
    """A cluster with migrations that take about a second."""
    with own_cluster(embedded_server, simulated("e2e-maintenance", {"migration_mib_s": 65536})) as served:
        yield served


ROWS = "[...document.querySelectorAll('#maintenance-nodes tbody tr')]"


def guests_on(page, node: str) -> int:
    text = page.inner_text(f"#maintenance-nodes tr[data-node='{node}'] .guests-left")
    return int(text.split()[0])


def test_a_node_put_into_maintenance_drains_and_its_guests_come_back(page):  # noqa: F811
    wait_until(page, f"{ROWS}.length === 12")
    counts = page.evaluate(
        f"{ROWS}.map((r) => [r.dataset.node, parseInt(r.querySelector('.guests-left').textContent)])"
    )
    node, held = min(((n, c) for n, c in counts if c > 0), key=lambda item: (item[1], item[0]))
    row = f"#maintenance-nodes tr[data-node='{node}']"
    page.check("#maintenance-at-once")
    page.click(f"{row} .enter-maintenance")
    wait_until(page, f"document.querySelector(\"{row}\").dataset.maintenance === 'true'")
    assert "in maintenance" in page.inner_text(f"{row} td")
    page.screenshot(path=str(ARTIFACTS / "maintenance-draining.png"), full_page=True)
    wait_until(page, f"document.querySelector(\"{row} .guests-left\").textContent.startsWith('0 guests')")
    assert "in maintenance, empty" in page.inner_text(f"{row} td")
    assert page.locator("#migrations tbody tr").count() >= held  # the evacuation's migrations are listed
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        # no sideways scroll, once the chart has followed the resize
        wait_until(page, "document.documentElement.scrollWidth <= window.innerWidth", 10_000)
        page.screenshot(path=str(ARTIFACTS / f"maintenance-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.click(f"{row} .leave-maintenance")
    wait_until(page, f"document.querySelector(\"{row}\").dataset.maintenance === 'false'")
    wait_until(page, f'parseInt(document.querySelector("{row} .guests-left").textContent) === {held}')
    assert guests_on(page, node) == held
