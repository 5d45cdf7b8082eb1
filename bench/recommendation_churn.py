"""How long recommendations stay: manual mode on the demo with its defaults, nobody deciding.

Starts the product as `make run` does (runembedded: a fresh SQLite file, the demo cluster
with its default settings and round interval), sets the margin (`--margin`), logs in and reads
the page's own JSON (/api/v1/clusters/<id>/state/) every few seconds for `--minutes`. A
recommendation "disappears" when it leaves `suggested` (expired: replaced, overdue, outdated)
without anybody deciding. Reported: recommendations made; how many of those made at least 3
minutes before the end disappeared within 3 minutes of being made (issue 11's target: at most
10 %); how many of those made at least 10 minutes before the end a better plan (or their own
gain below the margin) replaced within 10 minutes, while still valid (issue 35's target: none);
the reasons, and the median time pending. With `--record`, the figure goes to bench/results/.

    .venv/bin/python -m bench.recommendation_churn [--minutes 30] [--margin 0.05] [--poll 2] [--record]
"""

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path

from bench.results import record
from harness.stack import free_port, start, stop, wait_for_port
from harness.wsclient import login

PASSWORD = "bench-password"
WINDOW_S = 180  # "disappears within 3 minutes of being made"
DWELL_S = 600  # "replaced within 10 minutes of being suggested": the minimum dwell's default
# The words of an expiry that replaced a still valid recommendation (crs.verdict): a better plan,
# or its own gain below the margin. Illegal, pointless, unwarranted, outranked or overdue ones go at once.
REPLACED_WHILE_VALID = ("a new plan gains", "its total gain fell to")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7.0)
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between reads of the JSON API")
    parser.add_argument(
        "--source-config",
        default="{}",
        help="simulator options of the demo cluster, e.g. '{\"seconds_per_sample\": 300}' for the trace at its "
        "real pace (the demo's default plays one 5-minute sample per round)",
    )
    parser.add_argument("--port", type=int, default=0, help="port for the server (default: any free one)")
    parser.add_argument("--margin", type=float, default=0.05, help="the cluster's margin, a fraction (issue 35: 5 %%)")
    parser.add_argument("--record", action="store_true", help="write the figure to bench/results/")
    args = parser.parse_args()
    port = args.port or free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DATABASE_URL": f"sqlite:///{tmp}/churn.sqlite3", "REDIS_URL": "", "CRS_ADMIN_PASSWORD": PASSWORD}
        command = ["manage.py", "runembedded", "--port", str(port), "--source-config", args.source_config]
        process = start(command, env, Path(tmp) / "server.log")
        try:
            wait_for_port(port, process, timeout=600)  # a fresh database migrates first; slow on a busy machine
            base = f"http://127.0.0.1:{port}"
            cookie = login(base, "admin", PASSWORD)
            set_margin(base, cookie, args.margin)
            seen = watch(base, cookie, args.minutes * 60, args.poll)
        finally:
            stop(process)
    report(seen, args.minutes, args.margin, args.record)


def set_margin(base: str, cookie: str, margin: float) -> None:
    """The margin as an admin sets it, through the JSON API (the session's CSRF token, as the page sends it)."""
    csrf = dict(part.split("=", 1) for part in cookie.split("; "))["csrftoken"]
    request = urllib.request.Request(
        f"{base}/api/v1/clusters/1/settings/",
        json.dumps({"margin": margin}).encode(),
        {"Cookie": cookie, "X-CSRFToken": csrf, "Content-Type": "application/json", "Referer": base},
        method="PATCH",
    )
    urllib.request.urlopen(request, timeout=30).read()


def watch(base: str, cookie: str, seconds: float, poll: float) -> dict[int, dict]:
    """Every recommendation seen: when it was made, and when and why it left `suggested`."""
    seen: dict[int, dict] = {}
    end = time.time() + seconds
    while time.time() < end:
        request = urllib.request.Request(f"{base}/api/v1/clusters/1/state/", headers={"Cookie": cookie})
        for m in json.load(urllib.request.urlopen(request, timeout=30))["migrations"]:
            made = datetime.fromisoformat(m["recommended_at"]).timestamp()
            entry = seen.setdefault(m["id"], {"made": made, "gone": None, "state": m["state"], "reason": ""})
            if m["state"] != "suggested" and entry["gone"] is None:
                entry.update(gone=time.time(), state=m["state"], reason=m["reason"])
        time.sleep(poll)
    seen["end"] = {"at": end}
    return seen


def report(seen: dict, minutes: float, margin: float, keep: bool) -> None:
    end = seen.pop("end")["at"]
    judged = [e for e in seen.values() if e["made"] <= end - WINDOW_S]
    gone = [e for e in judged if e["gone"] is not None and e["gone"] - e["made"] <= WINDOW_S]
    stood = [e for e in seen.values() if e["made"] <= end - DWELL_S]
    replaced = [
        e
        for e in stood
        if e["gone"] is not None and e["gone"] - e["made"] < DWELL_S and e["reason"].startswith(REPLACED_WHILE_VALID)
    ]
    pending = [(e["gone"] or end) - e["made"] for e in seen.values()]
    print(f"{minutes:g} minutes, manual mode, demo defaults, margin {margin:.0%}, nobody deciding")
    print(f"recommendations made: {len(seen)} ({len(judged)} made at least 3 minutes before the end)")
    share = len(gone) / len(judged) if judged else 0.0
    print(f"disappeared within 3 minutes: {len(gone)} of {len(judged)} = {share:.0%} (target ≤ 10 %)")
    print(
        f"replaced while valid within 10 minutes: {len(replaced)} of {len(stood)} made at least 10 minutes "
        "before the end (target: none)"
    )
    median = statistics.median(pending) if pending else 0.0
    if pending:
        print(f"median time pending: {median:.0f} s (still pending at the end counted to the end)")
    reasons = Counter(e["reason"].split(":")[0] for e in seen.values() if e["gone"]).most_common()
    for reason, count in reasons:
        print(f"  {count} × {reason}")
    if keep:
        record(
            "recommendation-churn-demo",
            f"waiting recommendations on the demo cluster, manual, margin {margin:.0%}, {minutes:g} minutes "
            "under `make run`: replaced while still valid within 10 minutes of being suggested",
            f"{len(replaced)} of {len(stood)} (made ≥ 10 min before the end); {len(seen)} made, "
            f"{len(gone)} of {len(judged)} gone within 3 minutes, median {median:.0f} s pending",
            "none: " + ("met" if not replaced else "not met"),
            {"reasons": dict(reasons)},
        )


if __name__ == "__main__":
    main()
