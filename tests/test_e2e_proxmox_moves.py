"""A Proxmox cluster (the fake PVE) in a real browser: the maintenance panel lists the moves
Proxmox's own HA manager makes, one row each (guest, from, to, why with the rule), and follows
them as they change: a rule fix first, then, once its node enters maintenance, the evacuation.

Screenshots are kept in tests/artifacts/ (proxmox-moves-*.png)."""

import pytest
from test_e2e_dashboard import ARTIFACTS, browser, own_cluster, wait_until  # noqa: F401  (a fixture)
from test_e2e_page import VIEWPORTS, open_page, overflow, serious_violations

from harness.fakepve import TOKEN, FakePve

pytestmark = pytest.mark.e2e
ROW = "#proxmox-moves tbody tr[data-guest='vm:104']"


@pytest.fixture(scope="module")
def pve(tmp_path_factory):
    fake = FakePve(tmp_path_factory.mktemp("pve"))
    fake.port = fake.start()
    fake.entry("qemu/104")["node"] = "node2"  # HA guest vm:104 on node2; its rule prefers node3
    fake.services["vm:104"]["node"] = "node2"
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def server(embedded_server, pve):
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    create = (
        "from dashboard.models import Cluster;"
        f"print(Cluster.objects.create(name='pve', source_kind='proxmox', source_config={config!r}).pk)"
    )
    with own_cluster(embedded_server, create) as served:
        yield served


def cells(page) -> list[str]:
    return page.eval_on_selector_all(f"{ROW} td", "(cells) => cells.map((c) => c.textContent)")


def test_proxmox_s_own_moves_are_listed_and_followed(browser, server, pve):  # noqa: F811
    page = open_page(browser, server.cluster)
    page.wait_for_selector(ROW)
    assert cells(page) == [
        "vm:104",
        "node2",
        "node3",
        "node affinity rule 'db-prefers-node3' prefers node3 for vm:104 over node2",
    ]
    page.screenshot(path=str(ARTIFACTS / "proxmox-moves-desktop.png"), full_page=True)
    assert (overflow(page), serious_violations(page)) == (0, [])

    pve.lrm_mode["node2"] = "maintenance"  # the admin ran ha-manager's command: Proxmox evacuates vm:104
    wait_until(page, f"document.querySelector(\"{ROW}\")?.dataset.kind === 'evacuation'")
    assert cells(page)[:3] == ["vm:104", "node2", "node3"] and cells(page)[3].startswith("node2 is in maintenance")
    assert page.locator("#proxmox-moves tbody tr").count() == 1
    assert not page.errors

    phone = browser.new_context(viewport=VIEWPORTS["phone"], storage_state=page.context.storage_state()).new_page()
    phone.goto(server.cluster)
    phone.wait_for_selector(ROW)
    assert overflow(phone) == 0  # the rows stack on a phone
    phone.locator("#proxmox-moves").screenshot(path=str(ARTIFACTS / "proxmox-moves-phone.png"))
