"""The automation panel in a real browser: a window added on the page pauses automatic moves,
said in the cluster's zone and the browser's, both labelled, at phone and desktop widths."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from test_e2e_dashboard import ARTIFACTS, browser, own_cluster, simulated, wait_until  # noqa: F401  (a fixture)
from test_e2e_page import VIEWPORTS, open_page, overflow, serious_violations

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(embedded_server):
    with own_cluster(embedded_server, simulated("e2e-windows")) as served:
        yield served


def test_a_window_added_on_the_page_pauses_automatic_moves_until_it_opens(browser, server):  # noqa: F811
    page = open_page(browser, server.cluster, "desktop", timezone_id="America/New_York")
    page.select_option("#id_automation", "automatic")
    page.click("#save-settings")
    page.wait_for_selector("text=Settings saved")
    opens = datetime.now(UTC) + timedelta(hours=2)
    for box in page.locator("#window-form input[type=checkbox]").all():
        box.check()
    page.fill("#id_start", f"{opens:%H:%M}")
    page.fill("#id_end", f"{opens + timedelta(hours=1):%H:%M}")
    page.click("#window-form button[type=submit]")
    page.wait_for_selector("#windows")
    gate = page.inner_text("#automation-gate")
    assert f"Automatic moves paused until {opens:%a %H:%M} UTC" in gate and "(window)" in gate
    local = opens.astimezone(ZoneInfo("America/New_York"))
    assert f"= {local:%a}" in gate and f"{local:%H:%M}" in gate and "your time" in gate
    assert page.errors == []
    page.close()
    for viewport in VIEWPORTS:
        shown = open_page(browser, server.cluster, viewport, color_scheme="dark" if viewport == "phone" else "light")
        shown.locator("#automation").scroll_into_view_if_needed()
        shown.screenshot(path=str(ARTIFACTS / f"page-automation-{viewport}.png"), full_page=True)
        assert overflow(shown) == 0 and serious_violations(shown) == []
        shown.close()
