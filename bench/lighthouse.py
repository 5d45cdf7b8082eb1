"""Lighthouse (desktop profile) on the live page as `make run` serves it, after a minute of rounds.

    npm install --prefix /tmp/lh lighthouse          # once, outside the repository
    CHROME_PATH=/usr/bin/chromium .venv/bin/python -m bench.lighthouse --lighthouse /tmp/lh/node_modules/.bin/lighthouse

Starts `manage.py runembedded` on a fresh SQLite file and a free port (plain http, so
gzip/Brotli as a browser gets them) and Chromium with a DevTools port, logs that browser
in as the admin through the login form (Lighthouse's --extra-headers reach neither the
page's fetch nor its WebSocket), waits `--warmup` seconds of two-second rounds, then runs
Lighthouse in the same browser (--port) and prints the figures bench/README.md records. `--root` measures
another checkout (e.g. `git archive` of an older commit) with the same procedure.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

PASSWORD = "lighthouse-only"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"runembedded exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"{url} did not answer within {timeout} s")


def log_in(base: str, devtools_port: int) -> None:
    """Log the running Chromium in, as a user would; Lighthouse's tab shares its cookies."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.connect_over_cdp(f"http://127.0.0.1:{devtools_port}")
        page = browser.contexts[0].new_page()
        page.goto(base + "/accounts/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("#ws-state")
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lighthouse", required=True, help="path of the lighthouse executable (npm package)")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent), help="checkout to serve")
    parser.add_argument("--warmup", type=float, default=60, help="seconds of rounds before measuring")
    parser.add_argument("--json", help="also keep Lighthouse's JSON report here")
    parser.add_argument(
        "--port", type=int, help="the server's port (and the browser's DevTools on the next); default: free ones"
    )
    args = parser.parse_args()
    root = Path(args.root).resolve()
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "DATABASE_URL": f"sqlite:///{tmp}/lighthouse.sqlite3",
            "REDIS_URL": "",
            "CRS_ADMIN_PASSWORD": PASSWORD,
            "CRS_SECRET_KEY": "lighthouse-only",
        }
        command = [sys.executable, "manage.py", "runembedded", "--port", str(port), "--round-interval", "2"]
        devtools = port + 1 if args.port else free_port()
        chrome = [
            os.environ.get("CHROME_PATH", "/usr/bin/chromium"),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--remote-debugging-port={devtools}",
            f"--user-data-dir={tmp}/profile",
            "about:blank",
        ]
        with open(Path(tmp) / "server.log", "w") as log:
            server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
            browser = subprocess.Popen(chrome, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for(base + "/healthz", server)
                wait_for(f"http://127.0.0.1:{devtools}/json/version", browser)
                log_in(base, devtools)
                time.sleep(args.warmup)
                report = Path(args.json or Path(tmp) / "report.json")
                subprocess.run(
                    [
                        args.lighthouse,
                        base + "/",
                        "--preset=desktop",
                        "--output=json",
                        f"--output-path={report}",
                        "--quiet",
                        f"--port={devtools}",
                    ],
                    check=True,
                )
            finally:
                for process in (browser, server):
                    process.terminate()
                    try:
                        process.wait(timeout=30)
                    except subprocess.TimeoutExpired:  # daphne may hang up on open sockets
                        process.kill()
        result = json.loads(report.read_text())
    scores = {name: result["categories"][name]["score"] for name in ("performance", "best-practices", "accessibility")}
    audits = result["audits"]
    print(
        json.dumps(
            {
                **scores,
                "largest_contentful_paint_ms": round(audits["largest-contentful-paint"]["numericValue"]),
                "total_blocking_time_ms": round(audits["total-blocking-time"]["numericValue"]),
                "transferred_kib": round(audits["total-byte-weight"]["numericValue"] / 1024),
                "url": result["finalDisplayedUrl"],
            }
        )
    )


if __name__ == "__main__":
    main()
