"""The page on a cluster with a guest Proxmox will not move everywhere and a container: the
pinned guest shows its reason and is never recommended; the container's recommendation says
it is a restart, with its downtime."""

import json

import pytest
from test_e2e_dashboard import ARTIFACTS, PASSWORD, WAIT_MS, browser, own_cluster, wait_until  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e
GIB = 2**30
SNAPSHOT = {
    "format": "crs-snapshot/1",
    "cluster": "pinned",
    "nodes": [
        {"name": "n1", "cpus": 16, "memory_bytes": 64 * GIB},
        {"name": "n2", "cpus": 16, "memory_bytes": 64 * GIB},
    ],
    "guests": [
        {
            "sid": "vm:101",
            "node": "n1",
            "cores": 8,
            "memory_bytes": 16 * GIB,
            "allowed_nodes": ["n1"],
            "pinned_reason": "local disk local-lvm:vm-101-disk-0",
        },
        {"sid": "ct:200", "node": "n1", "cores": 4, "memory_bytes": 4 * GIB},
        {"sid": "vm:102", "node": "n1", "cores": 1, "memory_bytes": 1 * GIB},
    ],
}


@pytest.fixture(scope="module")
def server(embedded_server):
    """A what-if cluster of SNAPSHOT whose settings let containers restart."""
    create = (
        "import json; from dashboard.models import Cluster;"
        f"c = Cluster.objects.create(name='pinned', source_kind='snapshot', "
        f"source_config={{'snapshot': json.loads({json.dumps(SNAPSHOT)!r})}});"
        "p = c.policy; p.mode = 'static'; p.threshold = 0.05; p.hold_duration = 0; p.margin = 0.0;"
        "p.target_imbalance = None; p.containers = 'restart'; p.save(); print(c.pk)"
    )
    with own_cluster(embedded_server, create) as served:
        yield served


@pytest.mark.parametrize("viewport", [{"width": 1440, "height": 900}, {"width": 390, "height": 844}])
def test_pinned_guest_shows_its_reason_and_a_container_move_says_restart(browser, server, viewport):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(server.cluster)
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    item = page.wait_for_selector("#recommendations li")
    # the page renders the pinned list with the snapshot: load it again once a round has run
    page.reload()
    wait_until(page, "document.querySelector('#recommendations li') !== null")
    pinned = page.inner_text("#pinned")
    assert "vm:101" in pinned and "local disk local-lvm:vm-101-disk-0" in pinned and "only to n1" in pinned
    items = [li.inner_text() for li in page.query_selector_all("#recommendations li")]
    assert not any("vm:101" in text for text in items)  # never recommended
    container = next(text for text in items if "ct:200" in text)
    assert "restart, ~18 s downtime" in container, container  # 10 s + 2 s per GiB of its 4 GiB
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") == 0
    page.screenshot(path=str(ARTIFACTS / f"page-pressure-{viewport['width']}.png"), full_page=True)
    assert item is not None
    context.close()
