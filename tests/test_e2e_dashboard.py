"""The dashboard in a real browser, against `manage.py runembedded` (the `make run` path).

Run on their own (`pytest -m e2e`): Playwright's sync API and pytest-django's database
setup do not mix in one process, so these tests touch no database themselves. The browser tests
share one embedded server (conftest's embedded_server), each module on clusters of its own.
"""

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from conftest import E2E_PASSWORD as PASSWORD

from harness.stack import ARTIFACTS, ROOT, shell

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 60_000
# Archives every cluster still shown: no rounds, hidden from the pages, history kept.
RETIRE = """
from dashboard.models import Cluster
for cluster in Cluster.objects.filter(archived=False):
    cluster.archived = True
    cluster.save(update_fields=["archived"])
"""


@dataclass(frozen=True)
class Served:
    """A module's cluster on the run's embedded server."""

    url: str  # the server's
    pk: int
    env: dict  # the server's, to run `shell` beside it

    @property
    def cluster(self) -> str:
        """The cluster's page."""
        return f"{self.url}/clusters/{self.pk}/"


@contextmanager
def own_cluster(embedded_server, create: str):
    """A cluster of the module's own on the run's one embedded server (conftest), made by `create`
    (Python for `manage.py shell` that prints its pk). Every cluster still shown is archived
    before and after: the demo cluster runembedded made, the previous module's, what a test
    imported. So a module's settings, moves and rules are its own, and its rounds run alone on
    the server's one worker thread."""
    url, env = embedded_server
    pk = int(shell(env, RETIRE + create).strip().splitlines()[-1])
    try:
        yield Served(url, pk, env)
    finally:
        shell(env, RETIRE)


def simulated(name: str, source_config: dict | None = None) -> str:
    """Python for own_cluster: a simulated cluster as `make run`'s demo, with one-second rounds
    and the simulator's `source_config`."""
    return (
        "from dashboard.management.commands.demo import demo_cluster\n"
        f"print(demo_cluster({name!r}, 1, {source_config or {}!r}).pk)"
    )


@pytest.fixture(scope="module")
def server(embedded_server):
    """A cluster with migrations that take seconds."""
    with own_cluster(embedded_server, simulated("e2e-dashboard", {"migration_mib_s": 65536})) as served:
        yield served


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (never `playwright install`)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # through scripts/chromium: it keeps the run's priority instead of raising its own
        browser = p.chromium.launch(executable_path=ROOT / "scripts" / "chromium", headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, server, request):
    """A logged-in page with its WebSocket open; a screenshot is kept whatever the outcome."""
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # the page runs under its Content-Security-Policy: anything it blocks is an error here
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(server.cluster)
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    wait_until(page, "document.getElementById('ws-state')?.textContent === 'open'")
    yield page
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert errors == []


def wait_until(page, expression: str, timeout: float = WAIT_MS):
    """The expression's value once truthy, polled from here: Playwright's wait_for_function
    compiles its predicate with eval inside the page, which the page's CSP forbids."""
    deadline = time.monotonic() + timeout / 1000
    while not (value := page.evaluate(expression)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout / 1000:.0f} s: {expression}")
        page.wait_for_timeout(100)
    return value


def wait_for_first_round(page, timeout: float = 4 * WAIT_MS):
    """The first round's time on the cluster page: the pages beside it (rolling maintenance, capacity)
    read the collected snapshot, which a busy machine may take a few minutes to give."""
    wait_until(page, "document.getElementById('last-round')?.dateTime", timeout)


# Rounds on the trend: the SVG's first view (data-points), or Plotly's trace once it took over.
CHART_POINTS = (
    "(c => c.data ? c.data[0].x.length : +(c.querySelector('svg')?.dataset.points || 0))"
    "(document.getElementById('chart'))"
)


def chart_points(page, at_least: int = 1) -> int:
    return wait_until(page, f"{CHART_POINTS} >= {at_least} && {CHART_POINTS}")


def test_chart_grows_from_live_pushes(page):
    before = chart_points(page)
    chart_points(page, before + 3)
    assert page.locator("#nodes tbody tr").count() == 12
    imbalance, threshold, hold = (page.inner_text(f"#{i}") for i in ("imbalance", "threshold", "hold"))
    above = float(imbalance.rstrip(" %")) > float(threshold.rstrip(" %"))
    expected = (
        rf"\d+ of \d+ rounds above {threshold}|above {threshold}, hold duration \d+ rounds? served"
        rf"|above {threshold}, plan \d+ waiting; compared with a fresh plan every \d+ rounds?"
    )
    assert re.fullmatch(expected if above else f"at or below {threshold}", hold), (imbalance, hold)


def test_the_chart_is_drawn_without_plotly_and_turns_interactive_when_pointed_at(page):
    """The first view costs no 1.2 MB script; pointing at the chart brings zoom and hover values
    (Plotly), with the same rounds, and it goes on growing."""
    shown = chart_points(page, 2)
    assert page.evaluate("typeof Plotly") == "undefined"
    assert page.locator("#chart svg polyline.threshold").count() == 1
    assert re.fullmatch(r"imbalance \d+\.\d % *threshold \d+\.\d %", page.text_content("#chart svg .legend").strip())
    page.hover("#chart")
    wait_until(page, "document.getElementById('chart').data")
    assert page.locator("#chart .main-svg").count() >= 1 and page.locator("#chart svg.trend-svg").count() == 0
    assert page.evaluate("document.getElementById('chart').data[0].x.length") >= shown
    assert page.evaluate("document.getElementById('chart').data[1].name") == "threshold"
    now = chart_points(page)
    chart_points(page, now + 2)  # live pushes extend Plotly's traces too


def test_changed_setting_is_applied_at_the_next_round(page):
    page.fill("#id_threshold", "20")
    page.fill("#id_hold_duration", "1")
    page.click("#save-settings")
    page.wait_for_selector("text=Settings saved")
    wait_until(page, "document.getElementById('ws-state')?.textContent === 'open'")
    wait_until(
        page,
        "document.getElementById('threshold').textContent === '20.0 %'"
        " && ['above 20.0 %, hold duration 1 round served', 'compared with a fresh plan every 1 round']"
        ".some(words => document.getElementById('hold').textContent.endsWith(words))",
    )
    wait_until(page, "document.querySelector('#chart svg .legend')?.textContent.includes('threshold 20.0 %')")


def test_bad_setting_shows_the_field_error(page):
    page.fill("#id_margin", "150")
    page.click("#save-settings")
    assert page.inner_text("[data-field=margin]") == "margin must be between 0 and 100 %"


def decide(page, button: str, reason: str = "") -> str:
    """Click a pending recommendation's button; retry with the next one if a round expired it first
    (a plan is kept while it holds, but a guest's own motion can still break it). A card whose
    click came too late stays on top, saying so (`.lost`): the next try takes the next pending one."""
    from playwright.sync_api import Error

    for _ in range(10):
        item = page.wait_for_selector("#recommendations li:not(.lost)")
        migration_id = item.get_attribute("data-id")
        try:
            if reason:
                item.query_selector(".reason").fill(reason, timeout=2000)
            item.query_selector(button).click(timeout=2000)
        except (Error, AttributeError):
            continue  # replaced and gone from the list before the click
        state = wait_until(
            page, f"document.querySelector('#migrations tr[data-id=\"{migration_id}\"]')?.className", WAIT_MS
        )
        if state != "state-expired":
            return migration_id
    pytest.fail("ten recommendations in a row expired before the click")


def test_approved_recommendation_runs_to_done(page):
    migration_id = decide(page, ".approve")
    row = f'#migrations tr[data-id="{migration_id}"]'
    page.wait_for_selector(f"{row}.state-done", timeout=120_000)
    assert page.inner_text(f"{row} td:last-child") == "admin"


def test_rejected_recommendation_keeps_its_reason(page):
    migration_id = decide(page, ".reject", reason="maintenance window tonight")
    row = page.wait_for_selector(f'#migrations tr[data-id="{migration_id}"].state-rejected')
    assert row.get_attribute("title") == "maintenance window tonight"


def test_the_list_shows_each_step_with_its_math_and_what_it_was_computed_after(page):
    wait_until(page, "document.querySelectorAll('#recommendations li').length >= 2", 120_000)
    first, second = page.query_selector_all("#recommendations li")[:2]
    text = second.inner_text()
    assert f"computed after #{first.get_attribute('data-id')}" in text
    assert "priority " in text and "step gain " in text and " → " in text
    assert second.get_attribute("data-priority") in {"2", "3", "4", "5"}
    assert "margin" in page.inner_text("#plan-summary")
    # Gain and cost side by side, from the stored figures (issue 35: every benefit names its cost).
    gain, cost = (second.query_selector(f".payoff .{part}").inner_text() for part in ("gain", "cost"))
    assert re.fullmatch(r"gain [\d.]+ %·h of imbalance over ~\S+ (h|min)", gain), gain
    assert re.fullmatch(r"cost [\d.e-]+ %·h to copy [\d.]+ GiB at \d+ MiB/s and switch over", cost), cost


def test_apply_all_approves_every_recommendation_of_the_list(page):
    wait_until(page, "document.querySelectorAll('#recommendations li').length >= 2", 120_000)
    ids = [li.get_attribute("data-id") for li in page.query_selector_all("#recommendations li")]
    page.click("#apply-all")
    for migration_id in ids:
        row = page.wait_for_selector(f'#migrations tr[data-id="{migration_id}"]')
        assert row.get_attribute("class") in {"state-approved", "state-running", "state-done"}, migration_id
    assert page.inner_text(f'#migrations tr[data-id="{ids[0]}"] td:last-child') == "admin"


def test_emergency_stop_is_one_click_and_a_second_lifts_it(page):
    # A colleague's tab, open on the same cluster, is told at once: no reload.
    other = page.context.new_page()
    other.goto(page.url)
    wait_until(other, "document.getElementById('ws-state')?.textContent === 'open'")
    lifted = "document.getElementById('emergency-stop').textContent === 'Emergency stop'"
    set_ = "document.getElementById('emergency-stop').textContent === 'Lift the emergency stop'"
    page.click("#emergency-stop")
    wait_until(page, set_)
    wait_until(other, set_)
    assert other.inner_text("#stop-state").startswith("Emergency stop (this cluster's own)")
    # Said first in the status box, with who and when; no round's words (nor their green) beside it.
    first = page.evaluate("document.querySelector('#status h1').nextElementSibling.id")
    assert first == "stop-state" and page.is_visible("#stop-state") and not page.is_visible("#decision")
    said = page.inner_text("#stop-state")
    assert re.fullmatch(
        r"Emergency stop \(this cluster's own\): automation paused, nothing starts\."
        r" Set by admin at \d\d:\d\d:\d\d UTC\S*\.",
        said,
    ), said
    # Lifted at once after a reload, before the state the opening socket fetched (read while
    # still stopped) has arrived: that older state must not put the stop back on show.
    held = []
    page.route(re.compile(r"/state/\?rounds=1$"), lambda route: held.append((route, route.fetch())))
    page.reload()
    page.wait_for_selector("text=Lift the emergency stop")  # stored, not just shown
    assert page.inner_text("#stop-state") == said
    while not held:
        page.wait_for_timeout(100)
    page.click("#emergency-stop")
    wait_until(page, lifted)
    route, stale = held[0]
    assert stale.json()["stop"]["here"] is True
    route.fulfill(response=stale)
    wait_until(page, "document.getElementById('ws-state').textContent === 'open'")  # the state was loaded
    assert page.evaluate(lifted) and not page.is_visible("#stop-state") and page.is_visible("#decision")
    wait_until(other, lifted)
    assert not other.is_visible("#stop-state") and other.is_visible("#decision")


def test_a_round_that_keeps_the_plan_describes_the_plan_the_list_shows(page):
    # Read in one go, so a round in between cannot pair one plan's status with another's list.
    read = """(() => {
        const line = document.querySelector('#decision strong')?.textContent;
        const why = document.querySelector('#decision details')?.textContent || '';
        const first = document.querySelector('#recommendations li');
        const hold = document.getElementById('hold').textContent;
        const marks = [...document.querySelectorAll('#nodes i.after')].map((i) => i.getAttribute('aria-label'));
        const text = (id) => document.getElementById(id).textContent;
        return why.includes(' is kept') && first && [line, why, first.innerText, hold, text('imbalance'),
            text('plan-summary'), marks];
    })()"""
    line, status, first, hold, headline, summary, marks = wait_until(page, read, 120_000)
    # One plan, one set of figures: the status line says them "now", from the headline's round;
    # its sentence (one click away) says the same; the plan's own line labels its "when computed".
    now = re.fullmatch(r"Plan (\d+): \d+ moves? take the imbalance (\S+) % → (\S+) % now, a gain of (\S+) %", line)
    assert now and now[2] + " %" == headline, (line, headline)
    kept = re.search(r"Plan (\d+) is kept: on fresh data its \d+ moves?, starting with (\S+) (\S+) → (\S+),", status)
    assert kept and kept[1] == now[1], status
    assert f"from {now[2]}% to {now[3]}%, a total gain of {now[4]}%" in status, (line, status)
    assert f"Plan {now[1]} (computed" in summary and "when computed: imbalance" in summary, summary
    # The plan drawn on the node bars: a mark, with its words, where a node's load will be.
    assert marks and all(re.fullmatch(rf"after plan {now[1]}: [\d.]+ %", m) for m in marks), marks
    # The hold line no longer counts "1 of 3 rounds" as if no plan were there.
    assert re.fullmatch(rf"above \d+\.\d %, plan {kept[1]} waiting; compared with a fresh plan every \d+ rounds?", hold)
    leader, source, target = kept[2], kept[3], kept[4]
    assert leader in first and source in first and target in first, (status, first)
    # Focusing a card draws the load it moves on its source's and target's bars, with words, at
    # both widths: the figures its own line says (plan_figures' moved_load, the round's now).
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 1100})
        card, line, marks, figures, rows = wait_until(page, POINTED, 120_000)
        guests, source, target = re.match(r"#\d+ priority \d · (.+): (\S+) → (\S+) · imbalance", card).groups()
        shares = re.fullmatch(
            rf"moves now: {source} {SHARE} CPU, {SHARE} memory → {target} {SHARE} CPU, {SHARE} memory", line
        )
        assert shares and sorted(rows) == sorted([f"{source} move-source", f"{target} move-target"]), (line, rows)
        out, out_mem, into, into_mem = shares.groups()
        assert sorted(marks) == sorted(
            [
                f"{guests} leaves {source}: {out} CPU",
                f"{guests} leaves {source}: {out_mem} memory",
                f"{guests} arrives on {target}: {into} CPU",
                f"{guests} arrives on {target}: {into_mem} memory",
            ]
        )
        assert sorted(figures) == sorted(
            [f"{out} leaves", f"{out_mem} leaves", f"{into} arrives", f"{into_mem} arrives"]
        )
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") == 0, width
        assert page.evaluate("document.activeElement.blur() || document.querySelectorAll('#nodes .moving').length") == 0


SHARE = r"([−+][\d.]+ %|under 0\.1 %)"
# The first card focused: its math and load line, then the node bars' stripes (their words), the
# figures under them and the rows marked; null until its line has figures (its plan's, this round's).
POINTED = """(() => {
    const card = document.querySelector('#recommendations li');
    card?.querySelector('.approve').focus();
    const line = card?.querySelector('.moved').textContent;
    const all = (selector, read) => [...document.querySelectorAll(selector)].map(read);
    return line && [card.querySelector('.math').textContent, line,
        all('#nodes i.moving', (i) => i.getAttribute('aria-label')), all('#nodes b.moving', (b) => b.textContent),
        all('#nodes tr.move-source, #nodes tr.move-target', (r) => `${r.dataset.node} ${r.className}`)];
})()"""
