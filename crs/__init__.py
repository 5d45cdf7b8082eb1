"""crs: the cluster resource scheduling engine (pure Python + NumPy, no web framework).

Decisions match Proxmox VE's HA cluster resource scheduler: usage modes, TOPSIS
placement, imbalance, balancing rounds. See docs/design.md for the module map.
"""
