"""The overview's Largest Contentful Paint with 200 clusters, at 390 px and 1440 px.

    .venv/bin/python -m bench.overview_lcp [--clusters 200] [--loads 5]

Starts `manage.py runembedded` on a fresh SQLite file (the demo cluster at one-second rounds)
and adds clusters with a made-up day of history (harness/clusters.py, as the browser test
does), logs Chromium in through the login form, then loads `/` `--loads` times per width and
reads the LCP the browser reports (PerformanceObserver, `largest-contentful-paint`) and the
time the table's last row was parsed. It prints the figures and records the median.
"""

import argparse
import statistics

from bench.results import record
from harness.clusters import with_history
from harness.stack import embedded, shell

PASSWORD = "lcp-only"
WIDTHS = {390: 844, 1440: 900}
LCP = """() => new Promise((resolve) => {
  new PerformanceObserver((list) => {
    const entries = list.getEntries();
    resolve(entries[entries.length - 1].startTime);
  }).observe({type: "largest-contentful-paint", buffered: true});
})"""
LOADED = "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"


def measure(base: str, loads: int) -> dict[int, dict[str, list[float]]]:
    from playwright.sync_api import sync_playwright

    figures: dict[int, dict[str, list[float]]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        for width, height in WIDTHS.items():
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            page.goto(base + "/accounts/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_selector("#overview")
            lcp, loaded = [], []
            for _ in range(loads):
                page.goto(base + "/")
                page.wait_for_selector("#overview tbody tr:last-child")
                lcp.append(page.evaluate(LCP))
                loaded.append(page.evaluate(LOADED))
            figures[width] = {"lcp": lcp, "domcontentloaded": loaded}
            context.close()
        browser.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    with embedded("lcp.log", PASSWORD, start_timeout=600) as (url, env):
        shell(env, with_history(args.clusters - 1))
        figures = measure(url, args.loads)
    parts = []
    for width, f in figures.items():
        lcp = [round(x) for x in f["lcp"]]
        print(f"{width} px: LCP {lcp} ms, DOMContentLoaded {[round(x) for x in f['domcontentloaded']]} ms")
        parts.append(f"{width} px {statistics.median(lcp):.0f} ms (runs {min(lcp)}–{max(lcp)})")
    worst = max(statistics.median(f["lcp"]) for f in figures.values())
    record(
        "web-6-overview-lcp",
        f"the overview with {args.clusters} clusters (embedded server, Chromium headless), median LCP of "
        f"{args.loads} loads",
        ", ".join(parts),
        f"LCP < 1 s: {'met' if worst < 1000 else 'not met'}",
    )


if __name__ == "__main__":
    main()
