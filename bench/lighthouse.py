"""Lighthouse (desktop profile) on the live page as `make run` serves it, after a minute of rounds.

    npm install --prefix /tmp/lh lighthouse          # once, outside the repository
    CHROME_PATH=/usr/bin/chromium .venv/bin/python bench/lighthouse.py --lighthouse /tmp/lh/node_modules/.bin/lighthouse

Starts `manage.py runembedded` on a fresh SQLite file and a free port (plain http, so
gzip/Brotli as a browser gets them), logs in as its admin, waits `--warmup` seconds of
two-second rounds, then prints the figures bench/README.md records. `--root` measures
another checkout (e.g. `git archive` of an older commit) with the same procedure.
"""

import argparse
import http.cookiejar
import json
import os
import re
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


def session_cookie(base: str) -> str:
    """Log in through the login form, as a browser does, and return the session cookie."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(base + "/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    data = urllib.parse.urlencode({"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token})
    opener.open(urllib.request.Request(base + "/accounts/login/", data.encode(), headers={"Referer": base + "/"}))
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        sys.exit("login failed")
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lighthouse", required=True, help="path of the lighthouse executable (npm package)")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent), help="checkout to serve")
    parser.add_argument("--warmup", type=float, default=60, help="seconds of rounds before measuring")
    parser.add_argument("--json", help="also keep Lighthouse's JSON report here")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    port = free_port()
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
        with open(Path(tmp) / "server.log", "w") as log:
            server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_for(base + "/healthz", server)
                cookie = session_cookie(base)
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
                        "--chrome-flags=--headless=new --no-sandbox --disable-gpu",
                        "--extra-headers",
                        json.dumps({"Cookie": cookie}),
                    ],
                    check=True,
                )
            finally:
                server.terminate()
                server.wait(timeout=30)
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
