import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_clusters import GIB

from crs.imbalance import imbalance

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = {
    "format": "crs-snapshot/1",
    "cluster": "lab",
    "settings": {"mode": "dynamic"},
    "nodes": [{"name": f"node{i}", "cpus": 24, "memory_bytes": 32 * GIB} for i in (1, 2, 3)],
    "guests": [
        {
            "sid": f"vm:10{i}",
            "node": "node1",
            "cores": 2,
            "memory_bytes": 4 * GIB,
            "cpu_usage": 2.0,
            "mem_usage_bytes": 2 * GIB,
        }
        for i in range(1, 5)
    ],
}


def crs(*args):
    return subprocess.run([sys.executable, "-m", "crs", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture
def snapshot_file(tmp_path):
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(SNAPSHOT))
    return path


def test_plan_json_follows_the_contract(snapshot_file):
    out = crs("plan", snapshot_file, "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["format"] == "crs-plan/1" and plan["decision"] == "migrate" and plan["imbalance"] == 1.0
    assert set(plan["node_loads"]) == {"node1", "node2", "node3"} and plan["candidates"] == 8
    move = plan["move"]
    assert (move["leader"], move["guests"], move["source"], move["target"]) == ("vm:101", ["vm:101"], "node1", "node2")
    # after the move: node1 carries 3 guests (6 of 24 cores, 6 of 32 GiB), node2 one, node3 none
    expected = imbalance([(6 / 24 + 6 / 32) / 2, (2 / 24 + 2 / 32) / 2, 0.0])
    assert move["imbalance_after"] == pytest.approx(expected, abs=1e-14)
    assert move["relative_gain"] == pytest.approx(1.0 - expected, abs=1e-14)
    assert "moves" not in plan and [m["target"] for m in plan["plan"]["moves"]] == ["node2"]


def test_plan_steps_lists_each_move(snapshot_file):
    plan = json.loads(crs("plan", snapshot_file, "--json", "--steps", 3).stdout)
    assert [(m["leader"], m["target"]) for m in plan["moves"]] == [("vm:101", "node2"), ("vm:102", "node3")]
    steps = plan["plan"]["moves"]
    assert [(m["leader"], m["source"], m["target"], m["after"]) for m in steps] == [
        ("vm:101", "node1", "node2", None),
        ("vm:102", "node1", "node3", 0),
    ]  # the third move would undo the balance: the planner stops where the greedy sequence stops
    assert steps[0]["alternatives"] == ["node3"] and steps[1]["imbalance_before"] == steps[0]["imbalance_after"]
    assert plan["plan"]["imbalance_after"] == steps[1]["imbalance_after"]
    assert plan["plan"]["gain"] == pytest.approx(1.0 - steps[1]["imbalance_after"] / plan["imbalance"])


def test_plan_table_is_readable(snapshot_file):
    out = crs("plan", snapshot_file).stdout
    assert "node1" in out and "29.2%" in out and "decision: migrate" in out
    assert "vm:101: node1 -> node2, imbalance after 0.6614 (gain 33.9%)" in out


def test_plan_objective_overrides_the_files(tmp_path):
    """The snapshot has no pressure figures: objective pressure can only say so."""
    path = tmp_path / "pressure.json"
    path.write_text(json.dumps(SNAPSHOT | {"settings": {"mode": "dynamic", "objective": "pressure"}}))
    as_filed = json.loads(crs("plan", path, "--json").stdout)
    even = json.loads(crs("plan", path, "--json", "--objective", "even").stdout)
    assert (as_filed["decision"], even["decision"]) == ("no-pressure-data", "migrate")
    assert even["move"]["target"] == "node2"
    table = crs("plan", path, "--objective", "both").stdout
    assert "objective both" in table and "decision: migrate" in table


def test_plan_objective_must_be_one_of_three(snapshot_file):
    out = crs("plan", snapshot_file, "--objective", "fast")
    assert out.returncode == 2 and "invalid choice: 'fast'" in out.stderr


def test_score_ranks_nodes_for_a_guest(snapshot_file):
    out = json.loads(crs("score", snapshot_file, "vm:101", "--json").stdout)
    assert out["selected"] == "node2" and [r["node"] for r in out["ranking"]] == ["node2", "node3", "node1"]


def test_bad_snapshot_exits_2_naming_the_key(tmp_path):
    bad = dict(SNAPSHOT, guests=[dict(SNAPSHOT["guests"][0], node="node9")])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    out = crs("plan", path, "--json")
    assert out.returncode == 2 and out.stdout == ""
    assert "guests[0].node: 'node9' is not a node of this snapshot" in out.stderr


def test_unreadable_and_non_json_files_exit_2(tmp_path):
    assert crs("plan", tmp_path / "missing.json").returncode == 2
    (tmp_path / "x.json").write_text("{nope")
    assert "not JSON" in crs("plan", tmp_path / "x.json").stderr


def test_engine_imports_no_web_code():
    code = (
        "import sys, crs.programs.cli, crs.balancer, crs.sources; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'celery', 'channels'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
