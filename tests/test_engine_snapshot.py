import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from crs.balancer import plan, run_round
from crs.decision import RoundState
from crs.errors import CrsError, RuleError, SnapshotError
from crs.fields import read_json, shown
from crs.programs import cli
from crs.snapshot import MAX_BYTES, MAX_CPUS, _guests_in_array_passes, _parse_guest, parse, to_dict

GOOD = {
    "format": "crs-snapshot/1",
    "cluster": "lab",
    "settings": {"mode": "dynamic", "threshold": 0.3, "hold_duration": 3, "margin": 0.1},
    "nodes": [
        {"name": "node1", "cpus": 32, "memory_bytes": 2**37},
        {"name": "node2", "cpus": 32, "memory_bytes": 2**37},
    ],
    "guests": [
        {"sid": "vm:101", "node": "node1", "cores": 4, "memory_bytes": 2**33, "cpu_usage": 1.2, "mem_usage_bytes": 6e9},
        {"sid": "ct:102", "node": "node2"},
    ],
    "rules": [
        {"id": "apart", "type": "resource-affinity", "resources": ["vm:101", "ct:102"], "affinity": "negative"},
        {"id": "pin", "type": "node-affinity", "resources": ["vm:101"], "nodes": ["node1:2", {"node": "node2"}]},
    ],
}


def with_change(path, value):
    doc = copy.deepcopy(GOOD)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def test_round_trip_keeps_everything():
    snap = parse(GOOD)
    assert parse(to_dict(snap)) == snap
    assert snap.rules[1].nodes == (("node1", 2), ("node2", 0))


BAD = [
    (("format",), "crs-snapshot/9", "format"),
    (("settings", "mode"), "fast", "settings.mode: 'fast' is not one of basic, static, dynamic"),
    (("settings", "method"), "greedy", "settings.method"),
    (("settings", "threshold"), -0.1, "settings.threshold: -0.1 is out of range"),
    (("settings", "margin"), 1.5, "settings.margin"),
    (("settings", "hold_duration"), 1.5, "settings.hold_duration"),
    (("settings", "colour"), "red", "settings.colour: unknown key"),
    (("nodes", 0, "cpus"), -1, "nodes[0].cpus: -1 is out of range"),
    (("nodes", 0, "memory_bytes"), math.nan, "nodes[0].memory_bytes: nan is not a finite number"),
    (("nodes", 1, "name"), "node1", "nodes[1].name: 'node1' appears twice"),
    (("guests", 0, "node"), "node9", "guests[0].node: 'node9' is not a node of this snapshot"),
    (("guests", 1, "sid"), "vm:101", "guests[1].sid: 'vm:101' appears twice"),
    (("guests", 1, "sid"), "qemu/7", "guests[1].sid"),
    (("guests", 0, "state"), "dancing", "guests[0].state"),
    (("guests", 0, "state"), "migrate", "guests[0].target: a guest in state 'migrate' needs a target node"),
    (("guests", 0, "cpu_usage"), "lots", "guests[0].cpu_usage: 'lots' is not a finite number"),
    (("guests", 0, "ha"), 1, "guests[0].ha: 1 is not true or false"),
    (("rules", 0, "resources"), ["vm:101", "vm:999"], "rules[0].resources[1]: 'vm:999' is not a guest"),
    (("rules", 0, "affinity"), "maybe", "rules[0].affinity"),
    (("rules", 1, "nodes"), ["node7"], "rules[1].nodes[0].node: 'node7' is not a node"),
    (("nodes",), [], "nodes: a snapshot needs at least one node"),
    # what fuzzing found: each was a TypeError, OverflowError, ValueError or a NaN imbalance
    (("nodes", 0, "cpus"), 5e-324, "nodes[0].cpus: 5e-324 is out of range; must be >= 0.01 and <= 1048576"),
    (("nodes", 0, "cpus"), 1e308, "nodes[0].cpus: 1e+308 is out of range"),
    (("nodes", 0, "cpus"), 10**400, "nodes[0].cpus: a number of about 401 digits is not a finite number"),
    (
        ("nodes", 0, "memory_bytes"),
        1.7e308,
        "nodes[0].memory_bytes: 1.7e+308 is out of range; must be >= 1048576 and <= 1152921504606846976",
    ),
    (("nodes", 0, "cpu_usage"), 2.0**21, "nodes[0].cpu_usage: 2097152.0 is out of range"),
    (("guests", 0, "mem_usage_bytes"), 2.0**61, "guests[0].mem_usage_bytes: 2.305843009213694e+18 is out of range"),
    (("guests", 0, "node"), ["node1"], "guests[0].node: ['node1'] is not a node of this snapshot"),
    (("guests", 0, "target"), {"node": "node2"}, "guests[0].target: {'node': 'node2'} is not a node"),
    (("guests", 0, "sid"), "vm:101\n", "guests[0].sid: 'vm:101\\n' is not 'vm:<id>' or 'ct:<id>'"),
    (("rules", 0, "resources"), [["vm:101"], "ct:102"], "rules[0].resources[0]: ['vm:101'] is not a guest"),
    (("rules", 1, "nodes"), ["node1:" + "9" * 5000], "rules[1].nodes[0].priority: '99999999999"),
    (("rules", 1, "nodes"), [{"node": "node1", "priority": 10**5000}], "a number of about 5001 digits"),
    (("nodes", 0, "name"), "node\x00", "nodes[0].name: 'node\\x00' contains a NUL character"),
    (("cluster",), "lab\x00", "cluster: 'lab\\x00' is not a string without NUL"),
    (("settings", "hold_duration"), 1e300, "settings.hold_duration: 1e+300 is not a whole number 0..9007199254740992"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), BAD, ids=[".".join(map(str, b[0])) + "=" + shown(b[1]) for b in BAD]
)
def test_bad_snapshots_are_refused_naming_the_key_and_value(path, value, message):
    with pytest.raises(CrsError) as info:
        parse(with_change(path, value))
    assert message in str(info.value)


def test_rule_problems_are_rule_errors():
    with pytest.raises(RuleError):
        parse(with_change(("rules", 0, "resources"), ["vm:101"]))
    with pytest.raises(SnapshotError):
        parse(with_change(("guests", 0, "node"), KeyError))


def test_unknown_top_level_keys_are_ignored_as_the_contract_allows():
    assert parse({**GOOD, "comment": {"by": "a newer tool"}}) == parse(GOOD)


def test_numbers_nearer_zero_than_1e_100_read_as_zero():
    snap = parse(with_change(("guests", 0, "cpu_usage"), 5e-324))
    assert snap.guests[0].cpu_usage == 0.0


GOOD_TEXT = json.dumps(GOOD)
NESTED = '{"format": "crs-snapshot/1", "nodes": ' + "[" * 5000 + "]" * 5000 + "}"

# (the file's text, what the refusal must say): the JSON reader's own refusals, before parse
BAD_TEXT = [
    ("[" * 100_000, "nested deeper than 1024 levels"),
    (NESTED, "nodes: nested deeper than 1024 levels"),
    (GOOD_TEXT.replace('"cpus": 32', '"cpus": 1' + "0" * 400, 1), "cpus: number too large"),
    (GOOD_TEXT.replace('"cpus": 32', '"cpus": 1e400', 1), "cpus: number too large"),
    (GOOD_TEXT.replace('"cpus": 32', '"cpus": NaN', 1), "cpus: NaN is not a number"),
    (GOOD_TEXT.replace('"threshold": 0.3', '"threshold": -Infinity'), "threshold: Infinity is not a number"),
    (GOOD_TEXT.replace('"name": "node1"', '"name": "node\\u0000"', 1), "nodes[0].name: contains a NUL character"),
    (GOOD_TEXT.replace('"cluster": "lab"', '"note": {"x\\u0000y": 1}'), "note.x"),
    (GOOD_TEXT.replace('"cluster": "lab"', '"note": [Infinity]'), "note: Infinity is not a number"),
    (GOOD_TEXT.replace('"cpus": 32', '"cpus": 32, "cpus": 64', 1), "cpus: the key appears twice in one object"),
    (GOOD_TEXT.replace('"cluster": "lab"', '"cluster": "lab", "cluster": "lab"'), "cluster: the key appears twice"),
    ('{"format": "crs-snapshot/1",}', "not JSON (trailing comma is not allowed)"),
    ("\ufeff", "not JSON"),
]


@pytest.mark.parametrize(("text", "message"), BAD_TEXT, ids=[m for _, m in BAD_TEXT])
def test_files_the_reader_refuses_exit_2_naming_the_key(tmp_path, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert cli.main(["plan", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crs: ") and message in err and "Traceback" not in err


def test_the_reader_keeps_what_only_looks_like_a_problem():
    text = GOOD_TEXT.replace('"cluster": "lab"', '"cluster": "C:\\\\u0000 and \\u003a"')
    assert parse(read_json(text, SnapshotError)).cluster == "C:\\u0000 and :"


def test_plan_output_is_valid_json_at_the_bounds(tmp_path, capsys):
    extreme = with_change(("nodes", 0, "cpus"), 0.01)
    extreme["guests"][0].update(cpu_usage=MAX_CPUS, mem_usage_bytes=MAX_BYTES, memory_bytes=MAX_BYTES)
    path = tmp_path / "extreme.json"
    path.write_text(json.dumps(extreme))
    assert cli.main(["plan", str(path), "--json"]) == 0
    json.loads(capsys.readouterr().out, parse_constant=pytest.fail)


# -- property: any JSON document gives a Snapshot or the engine's own error ----------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def paths(doc, prefix=()):
    """Every key path of a document, for mutating one place of it."""
    yield prefix
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from paths(value, (*prefix, key))


@st.composite
def mutated_snapshots(draw):
    doc = copy.deepcopy(GOOD)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths(doc))))
        if not path:
            continue
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = draw(json_values | st.sampled_from(["node1", "node2", "vm:101", "ct:102", 0, 1e308]))
    return doc


def parse_or_refuse(doc):
    try:
        return parse(doc)
    except CrsError:
        return None


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=json_values | mutated_snapshots())
def test_any_json_document_gives_a_snapshot_or_the_engines_error(doc):
    snap = parse_or_refuse(doc)
    if snap is not None:
        result = run_round(snap, RoundState())
        json.dumps(result.to_plan_dict(), allow_nan=False)


@hsettings(max_examples=300, deadline=None)
@given(
    text=st.binary(max_size=200)
    | st.builds(json.dumps, json_values)
    | st.builds(lambda t, i, junk: t[:i] + junk + t[i:], st.just(GOOD_TEXT), st.integers(0, 600), st.text(max_size=5))
)
def test_any_text_gives_a_document_or_the_engines_error(text):
    try:
        parse(read_json(text, SnapshotError))
    except CrsError:
        pass


capacity = st.floats(0.0, 2.0**21) | st.sampled_from([5e-324, 1e-100, 0.01, 2.0**20, 2.0**60, 1e308])
usage = st.floats(0.0, 2.0**61) | st.sampled_from([0.0, 5e-324, 1e-99, 2.0**20, 2.0**60])


@st.composite
def extreme_snapshots(draw):
    nodes = [
        {"name": f"n{i}", "cpus": draw(capacity), "memory_bytes": draw(capacity | usage)}
        for i in range(draw(st.integers(2, 4)))
    ]
    guests = [
        {
            "sid": f"vm:{100 + i}",
            "node": f"n{draw(st.integers(0, len(nodes) - 1))}",
            "cores": draw(capacity),
            "memory_bytes": draw(usage),
            "cpu_usage": draw(usage),
            "mem_usage_bytes": draw(usage),
        }
        for i in range(draw(st.integers(1, 6)))
    ]
    settings = {
        "mode": draw(st.sampled_from(["static", "dynamic"])),
        "method": draw(st.sampled_from(["bruteforce", "topsis"])),
        "imbalance_scale": draw(st.sampled_from(["normalized", "raw"])),
        "threshold": 0.0,
        "margin": 0.0,
    }
    return {"format": "crs-snapshot/1", "settings": settings, "nodes": nodes, "guests": guests}


@hsettings(max_examples=300, deadline=None)
@given(doc=extreme_snapshots())
def test_every_accepted_snapshot_gives_finite_figures(doc):
    snap = parse_or_refuse(doc)
    if snap is None:
        return
    for result in (run_round(snap, RoundState()), plan(snap, steps=3)):
        out = json.dumps(result.to_plan_dict(steps=True), allow_nan=False)  # no NaN or Infinity anywhere
        assert math.isfinite(result.imbalance) and all(math.isfinite(v) for v in result.node_loads.values()), out


def guests_one_by_one(doc, nodes):
    return [_parse_guest(g, f"guests[{i}]", nodes) for i, g in enumerate(doc["guests"])]


def test_a_valid_snapshot_takes_the_array_passes():
    assert _guests_in_array_passes(GOOD["guests"], {"node1", "node2"}) == guests_one_by_one(GOOD, {"node1", "node2"})


@hsettings(max_examples=300, deadline=None)
@given(doc=mutated_snapshots())
def test_the_array_passes_accept_exactly_what_the_per_guest_reader_accepts(doc):
    """They may step aside (None) whenever they like; when they answer, it is the per-guest answer."""
    nodes = {"node1", "node2"}
    fast = _guests_in_array_passes(doc.get("guests"), nodes)
    if fast is not None:
        assert fast == guests_one_by_one(doc, nodes)
