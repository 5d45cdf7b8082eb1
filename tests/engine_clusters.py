"""Named clusters for engine tests, built as crs-snapshot/1 documents."""

from crs.snapshot import parse

GIB = 2**30
MIB = 2**20


def snapshot(nodes, guests=(), rules=(), **settings):
    return parse(
        {
            "format": "crs-snapshot/1",
            "settings": settings,
            "nodes": list(nodes),
            "guests": list(guests),
            "rules": list(rules),
        }
    )


def pve_crate_cluster(heterogeneous=False, guests=(), **settings):
    """The three measured nodes of proxmox-resource-scheduling's tests/scheduler.rs."""
    caps = [(16, 128 * GIB), (32, 96 * GIB), (24, 64 * GIB)] if heterogeneous else [(16, 64 * GIB)] * 3
    used = [(1.7, 12334 * MIB), (15.184, 529 * MIB), (5.2, 9381 * MIB)]
    nodes = [
        {"name": f"node{i + 1}", "cpus": c, "memory_bytes": m, "cpu_usage": u, "mem_usage_bytes": mu}
        for i, ((c, m), (u, mu)) in enumerate(zip(caps, used))
    ]
    settings.setdefault("mode", "dynamic")
    return snapshot(nodes, guests, **settings)


def node(name, cpus=24, memory_bytes=48 * GIB, **extra):
    return {"name": name, "cpus": cpus, "memory_bytes": memory_bytes, **extra}


def vm(sid, node_name, cores=2, memory_bytes=4 * GIB, cpu=1.0, mem=2 * GIB, **extra):
    return {
        "sid": sid,
        "node": node_name,
        "cores": cores,
        "memory_bytes": memory_bytes,
        "cpu_usage": cpu,
        "mem_usage_bytes": mem,
        **extra,
    }
