"""The fault soak's checks (harness/faultsoak.py): pure functions from what the soak recorded
(the database's rows, the monitors' observations, the supervisors' logs) to rows of the table
it prints, (check, measured, ok). Pure so that each can be fed made-up timelines
(tests/test_faultsoak_checks.py) and fail there on what the live soak guards. No pytest and no
Django here."""

import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from harness.faultsoak_faults import Fault

Row = tuple[str, str, bool]  # (check, measured, ok)

# What the issue bounds, in seconds.
SEEN_WITHIN, CLEARED_WITHIN, ROUNDS_WITHIN, MOVES_ON_WITHIN = 10, 30, 10, 60
QUIET_WITHIN = 30  # seconds without a round, away from faults (the socket probe's bound)
MEMORY_AGE, MEMORY_GROWTH = 120, 0.10  # RSS compared at 2 minutes of age; at most 10 % more
DOUBLED_ROUNDS = 1.5  # rounds per interval in any minute above which beat counts as doubled
PARTS = ("database", "channel_layer", "worker", "beat")  # what /healthz and /metrics report
TRANSITIONS = ("suggested", "approved", "running", "done", "failed", "expired", "rejected")


@dataclass
class Observations:
    health: list[tuple[float, dict | None]] = field(default_factory=list)  # None: the web did not answer
    metrics_missing: list[str] = field(default_factory=list)
    metrics_scrapes: int = 0
    rounds: list[float] = field(default_factory=list)  # when the held socket received a round
    drops: list[float] = field(default_factory=list)  # when the held socket closed or failed to connect
    memory: dict[str, dict[int, list[tuple[float, float]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )  # role → pid → [(age s, RSS MB)]


def judge_health(fault: Fault, health: list[tuple[float, dict | None]]) -> None:
    """When /healthz first showed `fault` (fault.seen) and said all is well after it (fault.cleared)."""

    def shows(answer: dict | None) -> bool:
        if answer is None:
            return fault.name == "SIGKILL web"
        key = {"Redis": "channel_layer", "Postgr": "database", "SIGKILL b": "beat"}
        wanted = next((v for k, v in key.items() if fault.name.startswith(k)), "worker")
        return answer.get(wanted, "ok") != "ok"

    polls = [(t, a) for t, a in health if t >= fault.began]
    fault.seen = next((t - fault.began for t, a in polls if t <= fault.ended + SEEN_WITHIN and shows(a)), None)
    fault.cleared = next((t - fault.ended for t, a in polls if t >= fault.ended and a and all_ok(a)), None)


def check_starts(
    source_states: dict[int, dict | None], started: dict[int, list[tuple[list[str], str, str]]]
) -> list[Row]:
    """The simulator's starts per route (`source_states`: cluster → its source_state, whose
    "starts" counts them) against the product's started migrations per route (`started`:
    cluster → (guests, source, target) of each migration with a started_at and task ids).

    A start the product made at the source is one with task ids: they are stored in the
    transaction that stores the simulator's state. A migration marked running whose start
    never reached the source (its worker killed before the call, settled as failed by the
    next look; or refused by the source) has a started_at and no task: counted here, it
    read as a start the simulator never saw (`2:vm:232 node01>node06`, one run beside the suite)."""
    doubled, unmatched, total = [], [], 0
    for cluster_id, state in source_states.items():
        routes: dict[str, int] = defaultdict(int)
        for guests, source, target in started.get(cluster_id, []):
            for guest in guests:
                routes[f"{guest} {source}>{target}"] += 1
        starts = (state or {}).get("starts", {})
        total += sum(starts.values())
        doubled += [f"{cluster_id}:{r} ×{n}" for r, n in starts.items() if n > routes.get(r, 0)]
        unmatched += [f"{cluster_id}:{r}" for r, n in routes.items() if n > starts.get(r, 0)]
    return [
        ("no migration started twice on its source", f"{total} starts, doubled: {doubled or 'none'}", not doubled),
        ("every recorded start happened at the source", f"unmatched: {unmatched or 'none'}", not unmatched),
    ]


def check_migrations(rows: list[tuple[int, int, str, str, datetime]], cutoff: datetime) -> list[Row]:
    """Every approved migration (`rows`: id, cluster, state, reason, decided_at) decided before
    `cutoff` (the last fault's period's end) has ended, and those that failed or expired say why."""
    still = [f"{i} {s}" for i, _, s, _, d in rows if s in ("approved", "running") and d < cutoff]
    unexplained = [f"{i} {s}" for i, _, s, r, _ in rows if s in ("failed", "expired") and not r]
    ended: dict[str, int] = defaultdict(int)
    for _, _, s, _, _ in rows:
        ended[s] += 1
    figures = ", ".join(f"{n} {s}" for s, n in sorted(ended.items()))
    return [
        (
            "every approved migration ended (none lost)",
            f"{len(rows)} approved: {figures}; open: {still or 'none'}",
            not still,
        ),
        ("failed and expired ones say why", f"without a reason: {unexplained or 'none'}", not unexplained),
    ]


def check_audit_and_rounds(
    twice: list[tuple[int, str, int]], busiest: int, round_interval: int, beat_lines: list[str]
) -> list[Row]:
    """Each transition audited once (`twice`: migration, action, count of those written more
    than once), and no round doubled: the busiest cluster-minute's rounds (`busiest`) at most
    DOUBLED_ROUNDS a round interval (two beats at once would double them)."""
    limit = DOUBLED_ROUNDS * 60 / round_interval
    waiting = sum("another beat is running" in line for line in beat_lines)
    return [
        ("each transition audited once", f"twice: {[f'{m} {a} ×{n}' for m, a, n in twice] or 'none'}", not twice),
        (
            "no round doubled (one beat)",
            f"busiest cluster-minute {busiest} rounds (one a {round_interval} s = {60 // round_interval}; "
            f"doubled > {limit:.0f}); "
            f"beats that waited for the lease: {waiting}",
            busiest <= limit,
        ),
    ]


def check_faults(
    lines: dict[int, list[tuple[float, str]]],
    cluster_of: dict[int, int],
    faults: list[Fault],
    seen: Observations,
    now: float | None = None,
    headroom: int = 1,
) -> list[Row]:
    """Per fault: the socket's rounds, /healthz, and the migrations it touched moving on
    (`lines`: migration → its audited transitions (Unix s, action); `cluster_of`: migration →
    cluster; `now`: the end of the record, for a migration that never moved again). `headroom`
    multiplies the issue's bounds on how soon rounds, /healthz and all-ok come back: CI's soak
    shares two cores with four other runs, where a restarted process boots several times slower."""
    now = time.time() if now is None else now
    moved_late, longest_queued = [], (0.0, "")
    for fault in faults:
        touched = []
        for migration, events in lines.items():
            before = [a for t, a in events if t <= fault.began]
            if before and before[-1] in ("approved", "running"):
                touched.append((migration, before[-1], [t for t, _ in events if t > fault.began]))
        for migration, state, later in touched:
            wait = (later[0] if later else now) - fault.ended
            # An approved step waits its turn behind its cluster's other moves (plan order,
            # concurrency): its cluster's plan must move on, not necessarily this step.
            if state == "approved" and wait > MOVES_ON_WITHIN:
                moves = moved_at(lines, cluster_of, cluster_of[migration], fault.began)
                if moves is not None and moves - fault.ended <= MOVES_ON_WITHIN:
                    longest_queued = max(longest_queued, (wait, f"{migration} after '{fault.name}'"))
                    continue
            if wait > MOVES_ON_WITHIN:
                moved_late.append(f"{migration} ({state}) {wait:.0f} s after '{fault.name}'")
    for migration, events in lines.items():  # the longest wait of any approved step for its start
        approved = next((t for t, a in events if a == "approved"), None)
        began = next((t for t, a in events if a in ("running", "expired", "failed")), now)
        if approved is not None and began - approved > longest_queued[0]:
            longest_queued = (began - approved, f"migration {migration}")
    table = [
        ("touched migrations move on within 60 s of the fault's end", f"late: {moved_late or 'none'}", not moved_late),
        ("longest wait of a step queued behind", f"{longest_queued[0]:.0f} s ({longest_queued[1] or '-'})", True),
    ]
    for fault in faults:
        rounds = fault.rounds_back is not None and fault.rounds_back <= ROUNDS_WITHIN * headroom
        shown = f"{fault.seen:.0f} s" if fault.seen is not None else "not seen"
        seen_in_time = fault.seen is not None and fault.seen <= SEEN_WITHIN * headroom
        cleared = fault.cleared is not None and fault.cleared <= CLEARED_WITHIN * headroom
        table.append(
            (
                f"{datetime.fromtimestamp(fault.began):%H:%M:%S} {fault.name}",
                f"socket rounds again {secs(fault.rounds_back)}; /healthz showed it {shown}"
                f"{'' if fault.visible else ' (not visible: others answer)'}, all ok {secs(fault.cleared)} after",
                rounds and cleared and (seen_in_time or not fault.visible),
            )
        )
    table.append(
        (
            "/metrics has crs_component_up for the 4 parts",
            f"{seen.metrics_scrapes} scrapes, missing: {seen.metrics_missing or 'none'}",
            seen.metrics_scrapes > 0 and not seen.metrics_missing,
        )
    )
    table.append(socket_row(seen.rounds, seen.drops, faults))
    return table


def check_other_clusters(rounds: dict[int, list[float]], faults: list[Fault], round_interval: int) -> list[Row]:
    """A fault on one Proxmox cluster (silent, slow) delays no other: while it lasts and until
    the next interval after it, no other cluster's rounds (`rounds`: cluster → Unix s of each)
    are more than two round intervals apart (wave notes: CI's soak checks only that)."""
    limit, rows = 2 * round_interval, []
    for fault in (f for f in faults if f.cluster is not None):
        start, end = fault.began, fault.ended + round_interval
        worst = (0.0, 0)
        for cluster, times in rounds.items():
            if cluster == fault.cluster:
                continue
            # the rounds just before and after the span count too: a gap that straddles its edge
            inside = [t for t in times if start <= t <= end]
            edges = [max((t for t in times if t < start), default=start), *inside]
            edges.append(min((t for t in times if t > end), default=end))
            worst = max(worst, max(((b - a, cluster) for a, b in zip(edges, edges[1:])), default=(0.0, cluster)))
        rows.append(
            (
                f"{datetime.fromtimestamp(fault.began):%H:%M:%S} {fault.name}: the other clusters' rounds go on",
                f"longest gap {worst[0]:.1f} s (cluster {worst[1]}; at most {limit} s)",
                worst[0] <= limit,
            )
        )
    return rows


def check_memory(memory: dict[str, dict[int, list[tuple[float, float]]]]) -> list[Row]:
    """Per role (`memory`: role → pid → [(age s, RSS MB)]): RSS at MEMORY_AGE alike across the
    role's lives, and grown at most MEMORY_GROWTH within its longest life (wave notes: memory in
    a soak). A role none of whose lives reached MEMORY_AGE fails: measured nothing."""
    rows = []
    for role, all_lives in sorted(memory.items()):
        # A life killed before its first sample (or that never started) has nothing to say.
        lives = {life: samples for life, samples in all_lives.items() if samples}
        if not lives:
            continue
        at_age = [rss for rss in (at(samples, MEMORY_AGE) for samples in lives.values()) if rss is not None]
        longest = max(lives.values(), key=lambda samples: samples[-1][0])
        start_rss, end_rss = at(longest, MEMORY_AGE), longest[-1][1]
        across = max(at_age) / min(at_age) - 1 if len(at_age) > 1 else 0.0
        within = end_rss / start_rss - 1 if start_rss else None  # None: no life reached the age
        grown = f"{start_rss:.0f} → {end_rss:.0f} MB ({within:+.0%})" if within is not None else "not measured"
        rows.append(
            (
                f"memory of {role}",
                f"{len(lives)} lives; RSS at {MEMORY_AGE} s: {', '.join(f'{r:.0f}' for r in at_age) or '-'} MB "
                f"(spread {across:+.0%}); longest life {longest[-1][0] / 60:.0f} min: {grown}",
                across <= MEMORY_GROWTH and within is not None and within <= MEMORY_GROWTH,
            )
        )
    return rows


def socket_row(rounds: list[float], drops: list[float], faults: list[Fault]) -> Row:
    """The held socket away from faults: no drop, and a round at least every QUIET_WITHIN s.
    It is what the idle 10-minute probe guarded (every socket closed after 10-19 s)."""
    away = [t for t in drops if not during(t, faults)]
    gap = quiet_gap(rounds, faults)
    return (
        "the socket between faults stays open and gets rounds (the 10-minute probe's guard)",
        f"{len(rounds)} rounds, {len(drops)} drops, {len(away)} away from faults"
        f"{' at ' + ', '.join(f'{datetime.fromtimestamp(t):%H:%M:%S}' for t in away) if away else ''}; "
        f"longest silence away from faults {gap:.1f} s (at most {QUIET_WITHIN} s)",
        not away and gap <= QUIET_WITHIN,
    )


def explained(faults: list[Fault]) -> list[tuple[float, float]]:
    """The spans a fault explains on the socket: the fault and the ROUNDS_WITHIN after it."""
    return [(f.began, f.ended + ROUNDS_WITHIN) for f in faults]


def during(t: float, faults: list[Fault]) -> bool:
    """Whether `t` falls in a span a fault explains, when the socket may drop."""
    return any(start <= t <= end for start, end in explained(faults))


def quiet_gap(rounds: list[float], faults: list[Fault]) -> float:
    """The longest wait between two rounds on the socket that no fault overlaps: a socket
    closed every 10-19 s, or rounds that stop coming, show here when no fault explains it."""
    busy = explained(faults)
    gaps = [b - a for a, b in zip(rounds, rounds[1:]) if not any(a < end and b > start for start, end in busy)]
    return max(gaps, default=0.0)


def moved_at(lines: dict, cluster_of: dict, cluster: int, after: float) -> float | None:
    """When a migration of `cluster` next changed state after `after`, if one did."""
    times = [t for m, events in lines.items() if cluster_of.get(m) == cluster for t, _ in events if t > after]
    return min(times, default=None)


def at(samples: list[tuple[float, float]], seconds: float) -> float | None:
    """The RSS first sampled at `seconds` of age or later, if the life reached it. (Nearest
    within 15 s found none for a life a loaded machine sampled late, and the check then passed
    on nothing.)"""
    return next((rss for age, rss in samples if age >= seconds), None)


def exits_row(logs: dict[str, list[str]]) -> Row:
    """The web and the workers end only when a fault kills them (SIGKILL: status 137), from
    their supervisors' log lines: a worker that exits on a Redis restart (celery 5.7.0) costs a
    restart's seconds at every one. Beat may exit while PostgreSQL is away: not asked."""
    exits = [
        f"{role}: {line.split('exited with ')[1]}"
        for role, lines in logs.items()
        for line in lines
        if "exited with status" in line and "status 137" not in line
    ]
    return ("the web and the workers exit only when killed", f"other exits: {exits or 'none'}", not exits)


def all_ok(answer: dict) -> bool:
    return all(answer.get(part) == "ok" for part in PARTS)


def secs(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else "never"


def table(report: dict) -> str:
    lines = [
        f"Fault soak, {report['minutes']:g} min, {len(report['faults'])} faults, "
        f"{report['clusters']} clusters at {report['round_interval']}-s rounds",
        "",
        "| check | measured | |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {measured} | {'ok' if ok else 'FAILED'} |" for name, measured, ok in report["checks"]]
    return "\n".join(lines)
