"""`make web`, `make worker` and `make beat` started at once (three service units after an
upgrade) must install the project once, not three times into the same .venv at once: beat
failed on a file another pip had just replaced. The Makefile's own recipe runs here with a
stand-in for the venv's Python that records each pip install and takes a second over it."""

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PIP = """#!/bin/sh
echo "start $$ $*" >> {log}
sleep 1
echo "end $$" >> {log}
"""


def test_three_bootstraps_at_once_install_once_one_after_the_other(tmp_path):
    log = tmp_path / "pip.log"
    python = tmp_path / "python"
    python.write_text(PIP.format(log=log))
    python.chmod(0o755)
    stamp = tmp_path / "stamp"

    def bootstrap(_):
        started = time.monotonic()
        done = subprocess.run(
            ["make", "--no-print-directory", f"PY={python}", f"STAMP={stamp}", str(stamp)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        return done.returncode, done.stderr, time.monotonic() - started

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(bootstrap, range(3)))
    assert [code for code, _, _ in results] == [0, 0, 0], results
    assert stamp.exists()
    lines = log.read_text().splitlines()
    # one bootstrap's three pip steps (pip, the locked requirements, the project), each ended
    # before the next began: nobody else ran pip meanwhile
    assert [line.split()[0] for line in lines] == ["start", "end"] * 3, lines
    assert len({line.split()[1] for line in lines}) == 3  # three steps of one recipe
    assert "requirements-test.lock" in lines[2]
    # the other two waited for the first and found the stamp fresh
    assert min(seconds for _, _, seconds in results) >= 3 - 0.5
