"""The trend's range selector and migration markers in a real browser, against `make run`'s embedded mode."""

import pytest
from test_e2e_dashboard import (  # noqa: F401  (a fixture)
    ARTIFACTS,
    PASSWORD,
    WAIT_MS,
    browser,
    decide,
    own_cluster,
    simulated,
    wait_until,
)

pytestmark = pytest.mark.e2e

# The trend is an SVG until the admin reaches for it (trend.js); then Plotly with the same markers.
# The pointer resting where the chart moves to (a card gone, a line rewrapped) reaches for it too:
# Chromium sends a pointer event after a layout change. The markers' texts, in whichever is drawn.
MARKER_TEXTS = """(() => { const chart = document.getElementById('chart');
  return chart.data ? (chart.data[2]?.text ?? [])
                    : [...chart.querySelectorAll('svg path.marker title')].map((t) => t.textContent); })()"""
SVG_SHOWN = "document.querySelector('#chart svg')"


@pytest.fixture(scope="module")
def server(embedded_server):
    with own_cluster(embedded_server, simulated("e2e-history", {"migration_mib_s": 65536})) as served:
        yield served


def logged_in(browser, server, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.cluster)
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    wait_until(page, "document.getElementById('ws-state')?.textContent === 'open'")
    return context, page, errors


def test_switching_the_range_fetches_it_and_shows_who_moved_what(browser, server):
    context, page, errors = logged_in(browser, server, 1440, 900)
    wait_until(page, SVG_SHOWN)
    assert page.get_attribute("#ranges button[data-range='3h']", "aria-pressed") == "true"
    decide(page, ".approve")
    wait_until(page, f"{MARKER_TEXTS}.length >= 1", 120_000)  # marked live when it starts

    page.click("#ranges button[data-range='7d']")
    wait_until(page, "document.querySelector(\"#ranges button[data-range='7d']\").ariaPressed === 'true'")
    wait_until(page, f"{MARKER_TEXTS}.length >= 1")  # this time from the API's markers
    tooltip = page.evaluate(MARKER_TEXTS)[0]
    assert "→" in tooltip and "approved by admin" in tooltip, tooltip
    page.hover("#chart")  # the admin reaches for the chart: Plotly takes over, same range and markers
    wait_until(page, "document.getElementById('chart').layout?.xaxis.tickformat === '%b %d'")  # drawn for 7 d
    hover = page.evaluate("document.getElementById('chart').data[2].text[0]")
    assert "→" in hover and "approved by admin" in hover, hover
    page.screenshot(path=str(ARTIFACTS / "history-1440.png"), full_page=True)
    context.close()
    assert errors == []


def test_the_range_selector_fits_a_phone(browser, server):
    context, page, errors = logged_in(browser, server, 390, 844)
    page.click("#ranges button[data-range='24h']")
    wait_until(page, "document.querySelector(\"#ranges button[data-range='24h']\").ariaPressed === 'true'")
    wait_until(page, SVG_SHOWN)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(ARTIFACTS / "history-390.png"), full_page=True)
    page.goto(server.cluster + "whatif")
    wait_until(page, "document.getElementById('methods')")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(ARTIFACTS / "whatif-390.png"), full_page=True)
    context.close()
    assert errors == []
