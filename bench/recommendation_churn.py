"""How long recommendations stay: manual mode on the demo with its defaults, nobody deciding.

Starts the product as `make run` does (runembedded: a fresh SQLite file, the demo cluster
with its default settings and round interval), logs in and reads the page's own JSON
(/api/v1/clusters/<id>/state/) every few seconds for `--minutes`. A recommendation "disappears"
when it leaves `suggested` (expired: replaced, overdue, outdated) without anybody deciding.
Reported: recommendations made, how many of those made at least 3 minutes before the end
disappeared within 3 minutes of being made (issue 11's target: at most 10 %), the reasons,
and the median time pending.

    .venv/bin/python -m bench.recommendation_churn [--minutes 7] [--poll 2]
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

from harness.stack import free_port, start, stop, wait_for_port
from harness.wsclient import login

PASSWORD = "bench-password"
WINDOW_S = 180  # "disappears within 3 minutes of being made"


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
    args = parser.parse_args()
    port = args.port or free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DATABASE_URL": f"sqlite:///{tmp}/churn.sqlite3", "REDIS_URL": "", "CRS_ADMIN_PASSWORD": PASSWORD}
        command = ["manage.py", "runembedded", "--port", str(port), "--source-config", args.source_config]
        process = start(command, env, Path(tmp) / "server.log")
        try:
            wait_for_port(port, process, timeout=600)  # a fresh database migrates first; slow on a busy machine
            base = f"http://127.0.0.1:{port}"
            seen = watch(base, login(base, "admin", PASSWORD), args.minutes * 60, args.poll)
        finally:
            stop(process)
    report(seen, args.minutes)


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


def report(seen: dict, minutes: float) -> None:
    end = seen.pop("end")["at"]
    judged = [e for e in seen.values() if e["made"] <= end - WINDOW_S]
    gone = [e for e in judged if e["gone"] is not None and e["gone"] - e["made"] <= WINDOW_S]
    pending = [(e["gone"] or end) - e["made"] for e in seen.values()]
    print(f"{minutes:g} minutes, manual mode, demo defaults, nobody deciding")
    print(f"recommendations made: {len(seen)} ({len(judged)} made at least 3 minutes before the end)")
    share = len(gone) / len(judged) if judged else 0.0
    print(f"disappeared within 3 minutes: {len(gone)} of {len(judged)} = {share:.0%} (target ≤ 10 %)")
    if pending:
        print(f"median time pending: {statistics.median(pending):.0f} s (still pending at the end counted to the end)")
    for reason, count in Counter(e["reason"].split(":")[0] for e in seen.values() if e["gone"]).most_common():
        print(f"  {count} × {reason}")


if __name__ == "__main__":
    main()
