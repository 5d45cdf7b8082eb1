"""What the domain announces, in one place: Django signals, sent where something happened and
received where it is acted on, so the domain imports neither the tasks nor the notifications.

Receivers connect at start (apps.py): tasks.py queues the background work each event calls for,
notify.py tells the destinations that chose it. Each receiver acts once the sender's
transaction commits.
"""

from django.dispatch import Signal

decided = Signal()  # approved, changed: migration ids a person's decision approved or moved on
collect_wanted = Signal()  # cluster_id: a change the next round must see now (a node into or out of maintenance)
node_back = Signal()  # cluster_id, expired: a rolling maintenance's node is back; its moves expired
rolling_changed = Signal()  # cluster_id: a rolling maintenance started, paused, resumed or cancelled
whatif_created = Signal()  # whatif_id: a what-if to replay
round_recorded = Signal()  # round_: a round stored (its imbalance against the threshold)
stop_changed = Signal()  # cluster_id: an emergency stop set or lifted on the cluster
n1_turned_bad = Signal()  # cluster, verdict: the N+1 verdict went from good to bad
