"""The capacity rule: configured memory within RAM less the reserve, cores within CPUs × overcommit."""

from crs.fits import Commitment, Limits, committed, fits
from crs.model import Guest, Node

GIB = 2**30
NODE = Node("n1", cpus=4, memory_bytes=16 * GIB)


def test_memory_refused_at_the_reserve_edge():
    held = committed(NODE, [Guest("vm:1", "n1", cores=1, memory_bytes=12 * GIB)])
    four = Guest("vm:2", "n1", cores=1, memory_bytes=4 * GIB)
    assert fits(NODE, held, four, Limits()) is None  # exactly full is allowed
    assert fits(NODE, held, four, Limits(memory_reserve_bytes=1)) == "memory"


def test_cores_refused_beyond_the_overcommit_ratio():
    held = Commitment(cores=15, memory_bytes=0)
    guest = Guest("vm:2", "n1", cores=1, memory_bytes=GIB)
    assert fits(NODE, held, guest, Limits(cpu_overcommit=4.0)) is None
    assert fits(NODE, held, guest, Limits(cpu_overcommit=3.9)) == "cpu"


def test_unlimited_cores_count_as_the_whole_node():
    assert committed(NODE, [Guest("vm:1", "n1", cores=0)]).cores == 4
