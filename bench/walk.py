"""The walk of a balancing round and of a rolling-maintenance step: which project modules each
visits, and its crossings between dashboard/ and crs/ (a call whose nearest project caller is
on the other side), traced with sys.setprofile. Shows where the loop decides: after issue 37 a
decision is a dashboard → crs crossing (the web side loads, the engine decides, the web side
applies), not dashboard code between ORM calls.

On the demo cluster (manage.py demo) in a scratch SQLite database; two rounds first, so what is
due once (the N+1 verdict, the capacity counts) is behind; then a third round, and the first
step of a rolling maintenance of one node (it enters maintenance). Generated code (a
dataclass's __init__, Celery's argument check) is left out: it runs in our modules' namespace
but is neither's code. Each tree runs in its own process, from its own root:

    git worktree add /tmp/before cbd9656
    .venv/bin/python -m bench.walk /tmp/before .     (a tree's walk each, as JSON; --functions)
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SIDES = ("crs", "dashboard")


def side(frame) -> str | None:
    """crs or dashboard for our own code, else None (libraries, generated code)."""
    head = (frame.f_globals.get("__name__") or "").split(".")[0]
    return head if head in SIDES and frame.f_code.co_filename.startswith(os.getcwd()) else None


class Walk:
    def __init__(self) -> None:
        self.modules: collections.Counter[str] = collections.Counter()  # module → calls into it
        self.functions: collections.Counter[str] = collections.Counter()  # module.function → calls
        self.crossings: collections.Counter[tuple[str, str]] = collections.Counter()  # (caller, callee) module

    def profile(self, frame, event, arg) -> None:
        if event != "call" or (here := side(frame)) is None:
            return
        module = frame.f_globals["__name__"]
        self.modules[module] += 1
        self.functions[f"{module}.{frame.f_code.co_qualname}"] += 1
        caller = frame.f_back
        while caller is not None and side(caller) is None:
            caller = caller.f_back
        if caller is not None and side(caller) != here:
            self.crossings[(caller.f_globals["__name__"], module)] += 1

    def run(self, fn, *args) -> None:
        sys.setprofile(self.profile)
        try:
            fn(*args)
        finally:
            sys.setprofile(None)

    def figures(self, functions: bool) -> dict:
        return {
            "modules": {s: sorted(m for m in self.modules if m.split(".")[0] == s) for s in SIDES},
            "crossings": sum(self.crossings.values()),
            "edges": {f"{a} -> {b}": n for (a, b), n in sorted(self.crossings.items())},
            **({"functions": sorted(self.functions)} if functions else {}),
        }


def walk(functions: bool) -> dict:
    """In this process, from the tree in the working directory (the parent put it on PYTHONPATH
    and named the scratch database)."""
    os.environ.update(DJANGO_SETTINGS_MODULE="project.settings", CRS_SECRET_KEY="walk-" + "x" * 50)
    os.environ.pop("REDIS_URL", None)  # the embedded mode: in-process broker and channel layer
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("demo", password="walk", stdout=open(os.devnull, "w"))
    from dashboard import rolling, tasks
    from dashboard.models import Cluster

    cluster = Cluster.objects.get(name="demo")
    for _ in range(2):
        tasks.collect(cluster.pk)
        tasks.balancing_round(cluster.pk)
    tasks.collect(cluster.pk)
    round_walk, step_walk = Walk(), Walk()
    round_walk.run(tasks.balancing_round, cluster.pk)
    cluster.refresh_from_db()
    node = sorted(n.name for n in cluster.latest_snapshot().nodes)[0]
    rolling.start(cluster, [node], 1, False, get_user_model().objects.get(username="admin"))
    step_walk.run(tasks.rolling_round, cluster.pk)
    return {"round": round_walk.figures(functions), "rolling step": step_walk.figures(functions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", default=["."], help="checkouts to walk (default: this one)")
    parser.add_argument("--functions", action="store_true", help="list every project function visited")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # the child: walk the cwd
    args = parser.parse_args()
    if args.here:
        print(json.dumps(walk(args.functions)))
        return
    walks = {}
    command = [sys.executable, str(Path(__file__).resolve()), "--here"] + ["--functions"] * args.functions
    with tempfile.TemporaryDirectory(prefix="walk-") as scratch:
        for n, tree in enumerate(args.trees):
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            env["DATABASE_URL"] = f"sqlite:///{scratch}/{n}.sqlite3"
            child = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
            walks[tree] = json.loads(child.stdout.splitlines()[-1])
    print(json.dumps(walks, indent=1))


if __name__ == "__main__":
    main()
