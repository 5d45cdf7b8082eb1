"""The pages as an admin, an operator or a viewer sees them: from a small phone (360 px) to a
large desktop (2560 px), in the browser's time zone, with errors next to what caused them.

Screenshots of every page at every width are kept in tests/artifacts/ (CI keeps them).
"""

import re

import pytest
from playwright.sync_api import Error as PlaywrightError
from test_e2e_dashboard import (  # noqa: F401  (a fixture)
    ARTIFACTS,
    PASSWORD,
    WAIT_MS,
    browser,
    chart_points,
    own_cluster,
    simulated,
    wait_until,
)

pytestmark = pytest.mark.e2e
VIEWPORTS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1440, "height": 900}}
# Every page of the product (Django's own admin aside), each checked at every width of WIDTHS;
# {pk} is the module's cluster, the one the live page shows (the only one not archived).
PAGES = {
    "live": "/",
    "cluster": "/clusters/{pk}/",
    "audit": "/audit/",
    "plan": "/clusters/{pk}/plan",
    "import": "/clusters/import",
    "tokens": "/tokens/",
    "guests": "/clusters/{pk}/guests/",
    "rules": "/clusters/{pk}/rules/",
    "whatif": "/clusters/{pk}/whatif",
    "rolling": "/clusters/{pk}/rolling/",
    "capacity": "/clusters/{pk}/capacity/",
    "password": "/accounts/password_change/",
    "not-found": "/clusters/999/",
}
# A small phone, a common phone, a laptop and a large desktop: one load per page, then resized.
WIDTHS = {360: 740, 390: 844, 1440: 900, 2560: 1440}
VIEWER = "watcher"


@pytest.fixture(scope="module")
def server(embedded_server):
    """A simulated cluster with one-second rounds, and a viewer account besides the admin."""
    create_viewer = (
        "from django.contrib.auth.models import Group, User\n"
        f"u = User.objects.create_user({VIEWER!r}, password={PASSWORD!r})\n"
        "u.groups.add(Group.objects.get(name='viewer'))\n"
    )
    with own_cluster(embedded_server, create_viewer + simulated("e2e-page")) as served:
        yield served


def open_page(browser, url, viewport="desktop", user="admin", **context_options):
    """`url` (a page with the live socket) in a new context, logged in as `user`, its socket open."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], **context_options)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    page.fill("#id_username", user)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    wait_until(page, "document.getElementById('ws-state')?.textContent === 'open'")
    return page


def overflow(page) -> int:
    """How many pixels the page is wider than the window (0: no sideways scroll)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def serious_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    violations = Axe().run(page).response["violations"]
    return [
        f"{v['id']}: {v['help']} at {[node['target'] for node in v['nodes']]}: {v['nodes'][0]['failureSummary']}"
        for v in violations
        if v["impact"] in ("serious", "critical")
    ]


def fits_and_passes_axe_at_every_width(page, name: str) -> None:
    """The loaded page, resized to each of WIDTHS: no sideways scroll, no serious axe violation."""
    for width, height in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(ARTIFACTS / f"page-{name}-{width}.png"), full_page=True)
        assert overflow(page) == 0, (name, width)
        assert serious_violations(page) == [], (name, width)


def header_folds_on_a_phone(page) -> None:
    """At 390 px the links fold behind one button and the imbalance is on the first screen; at
    1440 px the header, links and account included, is one line."""
    page.set_viewport_size({"width": 390, "height": 844})
    box = page.locator("header.top").bounding_box()
    assert box["height"] <= 100, box
    assert page.locator("#imbalance").bounding_box()["y"] < 844 / 2
    page.click("header .menu-button")
    assert page.is_visible("header nav a#audit-link") and page.is_visible("header .logout button")
    page.click("header .menu-button")
    assert not page.is_visible("header nav a#audit-link")
    page.set_viewport_size({"width": 1440, "height": 900})
    tops = page.evaluate(
        "[...document.querySelectorAll('header .brand, header nav a, header .logout button')]"
        ".map((e) => Math.round(e.getBoundingClientRect().top + e.getBoundingClientRect().height / 2))"
    )
    assert max(tops) - min(tops) <= 4, tops  # one line: every item on the same middle


def test_every_page_fits_every_width_and_passes_axe(browser, server):
    context = browser.new_context(viewport=VIEWPORTS["phone"])
    login = context.new_page()
    login.goto(server.url + "/accounts/login/")
    login.fill("#id_username", "admin")
    login.fill("#id_password", "wrong")
    login.click("button[type=submit]")
    assert login.locator(".error").count() == 1  # the failed login said once
    fits_and_passes_axe_at_every_width(login, "login")
    context.close()

    page = open_page(browser, server.url + "/", "phone")
    chart_points(page, 3)
    for name, path in PAGES.items():
        if name != "live":
            page.goto(server.url + path.format(pk=server.pk))
        fits_and_passes_axe_at_every_width(page, name)
        if name == "cluster":
            header_folds_on_a_phone(page)
    assert page.errors == []
    page.context.close()


def test_times_are_in_the_browsers_zone_labelled_with_utc_in_the_tooltip(browser, server):
    page = open_page(browser, server.cluster, timezone_id="America/New_York", locale="en-US")
    wait_until(page, "document.getElementById('last-round').dateTime")
    chart_points(page)
    last_round = page.locator("#last-round")
    assert re.fullmatch(r"\d\d:\d\d:\d\d UTC-[45] \(\d+ s ago\)", last_round.inner_text())
    utc = re.fullmatch(r"\d{4}-\d\d-\d\d (\d\d):(\d\d):\d\d UTC", last_round.get_attribute("title"))
    local = last_round.inner_text()[:5]
    offset = (int(utc.group(1)) - int(local[:2])) % 24
    assert offset in (4, 5) and utc.group(2) == local[3:5]  # New York is UTC-5 (UTC-4 in summer)
    assert re.fullmatch(r".* UTC-[45] \(\d+ s ago\)", page.inner_text("#last-collected"))
    # The chart's axis is in the same zone: its last point is the last round's local time.
    chart = page.locator("#chart svg")
    assert re.search(r" at (\d\d:\d\d):\d\d UTC-[45], ", chart.get_attribute("aria-label")).group(1) == local
    assert chart.locator(".axis-title").first.text_content() in ("time (UTC-5)", "time (UTC-4)")
    page.context.close()


def test_invalid_save_shows_the_error_at_the_form_and_keeps_what_was_typed(browser, server):
    page = open_page(browser, server.cluster, "phone")
    page.fill("#id_threshold", "150")
    page.fill("#id_hold_duration", "4")
    page.click("#save-settings")
    page.wait_for_selector("#settings-failed")
    assert page.url == server.cluster + "#settings"  # not the POST target: a reload re-submits nothing
    assert page.inner_text("[data-field=threshold]") == "threshold must be between 0 and 100 %"
    assert page.input_value("#id_threshold") == "150" and page.input_value("#id_hold_duration") == "4"
    # The message is on screen, at the form, not 2 000 px below the top.
    assert page.locator("#settings-failed").is_visible()
    box = page.locator("#settings-failed").bounding_box()
    assert 0 <= box["y"] < VIEWPORTS["phone"]["height"]
    page.screenshot(path=str(ARTIFACTS / "page-settings-error-phone.png"))
    page.context.close()


def test_reject_without_reason_is_refused_next_to_the_field(browser, server):
    page = open_page(browser, server.cluster, "phone")
    for _ in range(3):  # a 1-s round may replace the plan under the click: then take its new first card
        item = page.wait_for_selector("#recommendations li:not(.lost)")
        assert "required" in item.query_selector("label").inner_text()
        try:
            item.query_selector(".reject").click()
            break
        except PlaywrightError as error:
            assert "not attached to the DOM" in str(error), error
    else:
        raise AssertionError("three cards in a row were replaced before their Reject could be clicked")
    error = item.query_selector(".error")
    assert error.is_visible() and error.inner_text() == "A reason is required: say why, for the audit trail."
    assert item.query_selector(".reason").get_attribute("aria-invalid") == "true"
    page.screenshot(path=str(ARTIFACTS / "page-reject-error-phone.png"))
    page.context.close()


def test_viewer_is_offered_no_write_control(browser, server):
    page = open_page(browser, server.cluster, "phone", user=VIEWER)
    page.wait_for_selector("#recommendations li")
    for control in ("button.approve", "button.reject", "input.reason", "#settings-form", "#import-link"):
        assert page.locator(control).count() == 0, control
    assert page.locator("#settings-values").is_visible()
    page.screenshot(path=str(ARTIFACTS / "page-viewer-phone.png"), full_page=True)
    page.context.close()


def test_logging_out_in_another_tab_closes_the_socket(browser, server):
    page = open_page(browser, server.cluster)
    other = page.context.new_page()
    other.goto(server.url + "/audit/")
    other.click("header .logout button")
    other.wait_for_url("**/accounts/login/")
    wait_until(page, "document.getElementById('ws-state').textContent === 'signed out'", 30_000)
    assert page.locator("#signed-out").is_visible()
    page.screenshot(path=str(ARTIFACTS / "page-signed-out.png"))
    page.context.close()


def test_dark_mode_follows_the_system_setting(browser, server):
    page = open_page(browser, server.cluster, "desktop", color_scheme="dark")
    chart_points(page, 2)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(13, 17, 23)"  # the dark scheme's background, not the light #f6f8fa
    page.screenshot(path=str(ARTIFACTS / "page-live-dark.png"), full_page=True)
    assert serious_violations(page) == []  # contrast holds in the dark scheme too
    page.context.close()


def test_what_if_chart_has_whole_second_ticks_and_a_visible_threshold(browser, server):
    """An imported snapshot's first rounds still get a minute of axis, ticks without fractions of
    a second and the threshold as a line across the plot; a read-only cluster offers no decision."""
    page = open_page(browser, server.cluster, "phone")
    snapshot = page.request.get(server.cluster + "snapshot.json").body()
    page.goto(server.url + "/clusters/import")
    page.fill("#id_name", "what-if")
    page.set_input_files(
        "#id_snapshot", files=[{"name": "lab.json", "mimeType": "application/json", "buffer": snapshot}]
    )
    page.click("#import-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/clusters/\d+/$"))
    wait_until(page, "document.getElementById('ws-state')?.textContent === 'open'")
    chart_points(page)
    ticks = [t for t in page.locator("#chart svg text.tick").all_text_contents() if ":" in t]
    assert len(ticks) >= 2 and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks), ticks
    xs = [float(p.split(",")[0]) for p in page.locator("#chart svg polyline.threshold").get_attribute("points").split()]
    assert max(xs) - min(xs) > 200  # a line across the 390 px plot, not a dot
    assert page.locator("button.approve, button.reject, #apply-all:visible").count() == 0
    assert overflow(page) == 0
    page.screenshot(path=str(ARTIFACTS / "page-what-if-phone.png"), full_page=True)
    page.context.close()
