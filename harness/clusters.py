"""Many clusters at once, made by `manage.py shell -c` beside a server (as harness/faultsoak.py
makes its twenty): for the overview's browser test and its LCP benchmark (a day of made-up
history, no rounds running) and for bench/many_clusters.py (simulators at a round interval,
run by beat). No Django imported here: the code runs in the server's own environment."""


def simulated(count: int, round_interval: int, prefix: str = "sim", source: dict | None = None) -> str:
    """`count` simulated clusters (the simulator's default cluster, each its own seed) whose rounds
    beat runs every `round_interval` seconds, automation manual."""
    config = {**(source or {}), "round_interval_s": round_interval}
    return f"""
from dashboard.models import Cluster, Policy
for i in range(1, {count} + 1):
    cluster = Cluster.objects.create(
        name=f"{prefix}{{i:04d}}", source_kind="simulator", source_config={{**{config!r}, "seed": i}}
    )
    policy = Policy.objects.get(cluster=cluster)
    policy.mode, policy.round_interval_s = "dynamic", {round_interval}
    policy.save()
"""


def with_history(count: int, prefix: str = "site") -> str:
    """`count` clusters with a day of sparkline, a last round, recommendations, migrations, N+1
    verdicts and source errors varying from one to the next, and no rounds of their own (their
    beat entries disabled): what the overview shows of a large installation, made in seconds."""
    return f"""
import random
from datetime import timedelta
from django.utils import timezone
from dashboard.models import Cluster, Migration, Round
from dashboard.overview import BUCKET

now, rng = timezone.now(), random.Random(25)
start = int(now.timestamp()) // BUCKET * BUCKET
rounds, moves, made = [], [], []
for i in range(1, {count} + 1):
    imbalance = rng.uniform(0.05, 0.6)
    cluster = Cluster.objects.create(
        name=f"{prefix}-{{i:03d}}", source_kind="simulator", source_config={{"seed": i}},
        last_round_at=now - timedelta(seconds=rng.choice([2, 4, 40, 400])),
        source_error="connection refused" if i % 17 == 0 else "",
        n1={{"survives": i % 5 != 0, "verdict": "losing node01 overloads node02" if i % 5 == 0 else "survives"}},
        trend=[[start - k * BUCKET, rng.uniform(0.05, 0.6)] for k in range(47, -1, -1)],
        stop_here_at=now if i % 23 == 0 else None,
        archived=True,  # so its beat entry is made disabled: beat never runs it (restored below)
    )
    made.append(cluster.pk)
    rounds.append(Round(cluster=cluster, at=now, imbalance=imbalance, threshold=0.3, decision="balanced",
                        hold_count=0, explanation={{}}, node_usage={{}}))
    for k in range(i % 4):
        moves.append(Migration(cluster=cluster, state="suggested" if k % 2 == 0 else "running", leader=f"vm:{{k}}",
                               guests=[f"vm:{{k}}"], source="node01", target="node02", imbalance_before=0.5,
                               imbalance_after=0.4, relative_gain=0.2, margin=0.1, method="bruteforce"))
Round.objects.bulk_create(rounds)
Migration.objects.bulk_create(moves)
Cluster.objects.filter(pk__in=made).update(archived=False)  # an UPDATE: no signal enables the schedule
"""
