"""How long the capacity page's figures take (dashboard/capacity.figures: three sizes' counts and
the power suggestion) against one N+1 verdict (crs.n1.n1, what the rounds compute every minute)
on the same cluster in the same run; and what one N+1-safe count costs the hourly round.

    python -m bench.capacity_page [NODESxGUESTS ...]    (default: the demo, 100x2000, 300x6000)
"""

from __future__ import annotations

import os
import sys
import time


def best(fn, repeat: int = 3) -> float:
    """The fastest of `repeat` runs, in seconds: the machine is shared, the minimum is the cost."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    import crs.n1
    import crs.snapshot
    from bench.make_snapshot import synthetic
    from crs.capacity import Size, capacity
    from crs.fits import Limits
    from crs.sources import open_source
    from dashboard.capacity import figures
    from dashboard.models import CapacitySettings

    clusters = {"demo 12x416": open_source("simulator", {}).collect(time.time())}
    for spec in sys.argv[1:] or ["100x2000", "300x6000"]:
        nodes, guests = map(int, spec.split("x"))
        clusters[spec] = crs.snapshot.parse(synthetic(nodes, guests))
    settings, limits = CapacitySettings(), Limits()
    medium = Size(settings.sizes["medium"]["cores"], settings.sizes["medium"]["memory_bytes"])
    print("| cluster | page (s) | one N+1 verdict (s) | ratio | medium, N+1-safe count (s) | medium fit | power off |")
    print("|---|---|---|---|---|---|---|")
    for name, snapshot in clusters.items():
        page = best(lambda snapshot=snapshot: figures(snapshot, settings, limits, {}))
        verdict = best(lambda snapshot=snapshot: crs.n1.n1(snapshot, limits))
        n1_count = best(lambda snapshot=snapshot: capacity(snapshot, medium, limits, n1_safe=True), repeat=1)
        out = figures(snapshot, settings, limits, {})
        print(
            f"| {name} | {page:.3f} | {verdict:.3f} | {page / verdict:.2f} | {n1_count:.1f} | "
            f"{out['sizes'][1]['count']} | {len(out['power']['power_off'])} |"
        )


if __name__ == "__main__":
    main()
