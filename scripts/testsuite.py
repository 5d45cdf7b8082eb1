"""`make test`: the whole suite as five pytest runs side by side, each on services of its own.

Run one after the other, the browser tests added 6-11 minutes after the rest, and on a slow
machine the suite took 36 minutes. Side by side the runs share two CPUs, but the browser
tests and the soak's ten minutes mostly wait, and so do the tests that start servers of
their own (`servers`: stacks, outages, killed workers), which took 9-10 of the rest's 23
minutes. So the long probes (`soak`), the browser tests (`e2e`, `e2e-b`), the server tests
and the rest run at once, each with its own PostgreSQL database name and Redis database number
(derived from CRS_TEST_DATABASE_URL and CRS_TEST_REDIS_URL when they are set) so that no run
flushes or drops another's. The rest streams to the terminal; the others are printed
when they end. The exit status is non-zero if any run failed.

The rest runs on two pytest-xdist workers: its tests mostly wait (on PostgreSQL, on the
in-process workers), and a subset of them took 136 s on two workers where it took 247 s on
one. A third took its wall alone from 6.5 to 5.7 minutes but its CPU from 6.4 to 8.6, which
the runs beside it pay; work stealing keeps one worker from idling behind the other's last
long test. The server tests run on two workers too, a module to each (its stack is shared by
its tests): one after the other they were the suite's last run to end (16 minutes of CI's 17,
4 of them CPU). Each browser run is one process with one embedded server (started with a generous
timeout: two servers starting at once on a busy machine once missed a short one).

The soak run alone keeps its priority; the others run at nice 10. Its checks are bounds in
seconds on the product's recovery (rounds on the page again within 10 s of a fault), and its
processes, which took 2.2 of its 12 minutes in CPU, waited behind the other runs' CPU: beat,
killed and started again, took 11.1 s to send rounds again in a CI run (2.0 s on an idle machine)
and failed the run. The other runs lose at most what the soak uses. The browser runs' Chromium
keeps their nice 10 (scripts/chromium): run as root it raised its own threads to 0 and -8, and
its 3.6 CPU minutes went ahead of every run, the soak included. The main run, which needs the
most CPU and ended last (14.4 of CI's 15.4 minutes, the others 12.5-13.1), runs at nice 5.
"""

import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
# name, marker expression, offset added to the Redis database number, further pytest options.
# The soak run is the fault soak (tests/test_soak_faults.py, marked `faultsoak`) at its CI scale:
# ten minutes of a fault a minute, holding the page's socket throughout, so it also guards what
# the idle 10-minute socket probe did (no drop and no long silence away from faults); the probe
# stays in `make soak`.
# The browser tests are two runs, each with its embedded server: one run took 15-19 minutes
# beside the others (8 alone) and was the suite's critical path, though its CPU was 5 minutes.
# The second takes the modules with servers of their own and the two longest walks.
E2E_B = [
    f"tests/test_e2e_{name}.py"
    for name in ("first_hour", "overview", "redis_outage", "rolling", "power", "maintenance")
]
E2E_A = sorted(
    str(path.relative_to(ROOT)) for path in ROOT.glob("tests/test_e2e_*.py") if str(path.relative_to(ROOT)) not in E2E_B
)
# The runs that name their files collect only those: collecting all 1 900 tests took each run
# about 30 s of a busy machine.
RUNS = [
    ("soak", "faultsoak", 2, ["tests/test_soak_faults.py"]),
    ("e2e", "e2e", 1, E2E_A),
    ("e2e-b", "e2e", 4, E2E_B),
    ("servers", "servers and not soak and not e2e", 3, ["-n", "2", "--dist", "loadfile"]),
    ("main", "not e2e and not soak and not servers", 0, ["-n", "2", "--dist", "worksteal"]),
]

# The runs beside the soak yield it the CPU (the docstring says why); the main run, the one that
# needs the most CPU (6 minutes; the others mostly wait on rounds and servers) and ends last,
# yields less than the rest.
NICE = {"soak": 0, "main": 5}
OTHERS_NICE = 10


def services(name: str, offset: int) -> dict[str, str]:
    """This run's CRS_TEST_DATABASE_URL and CRS_TEST_REDIS_URL: the database name with the
    run's name appended, the Redis database number moved by `offset` (the main run keeps both)."""
    env = {}
    database = os.environ.get("CRS_TEST_DATABASE_URL", "")
    if database and offset:
        parts = urllib.parse.urlsplit(database)
        env["CRS_TEST_DATABASE_URL"] = parts._replace(path=f"/{parts.path.lstrip('/') or 'crs'}_{name}").geturl()
    redis = os.environ.get("CRS_TEST_REDIS_URL", "")
    if redis and offset:
        parts = urllib.parse.urlsplit(redis)
        number = int(parts.path.lstrip("/") or 0) + offset
        env["CRS_TEST_REDIS_URL"] = parts._replace(path=f"/{number}").geturl()
    return env


def wait_all(started: dict[str, subprocess.Popen], started_at: float) -> tuple[dict, dict]:
    """Each run's exit code as it ends, and its wall and CPU time: the CPU seconds (the run and
    every server it started) show which run the two cores went to when the suite slows down."""
    names = {process.pid: name for name, process in started.items()}
    codes, took = {}, {}
    while names:
        pid, status, usage = os.wait4(-1, 0)
        if (name := names.pop(pid, None)) is None:
            continue
        started[name].returncode = codes[name] = os.waitstatus_to_exitcode(status)
        wall, cpu = time.monotonic() - started_at, usage.ru_utime + usage.ru_stime
        took[name] = f"{wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU"
    return codes, took


def main() -> int:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # One static seed for every run's servers (harness/stack.py): made by the first that needs it.
    seeds = tempfile.TemporaryDirectory(prefix="crs-static-")
    os.environ["CRS_TEST_STATIC_SEED"] = str(Path(seeds.name) / "seed")
    started, started_at = {}, time.monotonic()
    for name, marker, offset, options in RUNS:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            marker,
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=30",
            *options,
        ]
        env = {**os.environ, **services(name, offset), "CRS_TEST_RUN": name}
        nice = NICE.get(name, OTHERS_NICE)
        behind_the_soak = (lambda nice=nice: os.nice(nice)) if nice else None
        log = None if name == "main" else ARTIFACTS / f"{name}.log"  # main streams to the terminal
        output = {} if log is None else {"stdout": log.open("w"), "stderr": subprocess.STDOUT}
        started[name] = subprocess.Popen(command, cwd=ROOT, env=env, preexec_fn=behind_the_soak, **output)
        if log is not None:
            print(f"{name} tests running beside the rest (pid {started[name].pid}, {log.relative_to(ROOT)})")
        sys.stdout.flush()
    codes, took = wait_all(started, started_at)
    seeds.cleanup()
    for name in reversed([name for name, *_ in RUNS if name != "main"]):  # the longest last
        print(f"--- {name} tests (exit {codes[name]}) ---")
        print((ARTIFACTS / f"{name}.log").read_text(), flush=True)
    for name, figures in took.items():
        print(f"{name} tests: {figures}")
    failed = [name for name, code in codes.items() if code != 0]
    print(f"--- {'failed: ' + ', '.join(failed) if failed else 'all runs passed'} ---")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
