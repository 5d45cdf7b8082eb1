from crs.guards import PastMove, guards_from

MINUTE = 60.0


def test_recent_moves_rest_and_cannot_go_back_and_rejections_are_remembered():
    history = [
        PastMove(("vm:1", "vm:2"), "node1", "node2", "done", at=100 * MINUTE),
        PastMove(("vm:3",), "node1", "node3", "failed", at=60 * MINUTE),
        PastMove(("vm:4",), "node2", "node3", "rejected", at=110 * MINUTE),
        PastMove(("vm:5",), "node2", "node1", "done", at=10 * MINUTE),  # long ago
    ]
    guards = guards_from(history, now=120 * MINUTE, cooldown_s=30 * MINUTE, rejection_memory_s=60 * MINUTE)
    assert guards.in_cooldown == {"vm:1", "vm:2"}
    assert guards.barred == {("vm:1", "node1"), ("vm:2", "node1"), ("vm:4", "node3")}


def test_no_history_means_proxmox_exactly():
    guards = guards_from([], now=0.0, cooldown_s=1800.0, rejection_memory_s=3600.0)
    assert not guards.in_cooldown and not guards.barred
