"""What moving a container costs: a restart, not a live migration.

Containers share the host's kernel, so Proxmox moves a running one by stopping it, moving
its configuration (and local volumes) and starting it on the target (`pct migrate
--restart`). The admin needs the downtime before approving it. It is estimated, not
measured: a fixed `RESTART_BASE_S` for stopping and starting the container's processes,
plus `RESTART_PER_GIB_S` per GiB of configured memory for the shutdown's flush of dirty
pages and the services' warm-up. Local volumes would add their copy time, which the
snapshot does not carry; the estimate is for shared storage.
"""

from __future__ import annotations

from .model import Guest

RESTART_BASE_S = 10.0
RESTART_PER_GIB_S = 2.0
GIB = 2**30


def restart_downtime_s(guests: list[Guest] | tuple[Guest, ...]) -> float | None:
    """Seconds of downtime moving these guests costs; None when none is a container (live migration)."""
    cts = [g for g in guests if g.kind == "ct"]
    if not cts:
        return None
    return max(RESTART_BASE_S + RESTART_PER_GIB_S * g.memory_bytes / GIB for g in cts)
