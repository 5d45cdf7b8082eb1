"""Source adapters: how a cluster becomes a `Snapshot` and how a migration is carried out.

Every adapter has the same small interface (`base.Source`), so the dashboard treats a
simulated cluster, a Proxmox VE cluster and a read-only snapshot file alike.
"""
