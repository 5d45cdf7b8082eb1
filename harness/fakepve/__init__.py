"""A fake Proxmox VE API over real HTTPS, for the connector's tests and the benchmarks (outside
tests/, which bench/ may not import). `FakePve` is the cluster (cluster.py: its state and
options, `latency_s`, `slow_s` and `silent` among them), tasks.py its migrations, metrics.py its
`/cluster/metrics/export`, server.py the HTTPS side, schema.py the check of every request and
answer against Proxmox VE's own API schema."""

from .cluster import GIB, RESPONSES, TOKEN, FakePve, recorded

__all__ = ["GIB", "RESPONSES", "TOKEN", "FakePve", "recorded"]
