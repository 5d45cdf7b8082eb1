"""The fake's migrations and UPID tasks, as PVE runs them: a `qmigrate` task holds the `migrate`
lock and moves the guest when it ends; an HA guest's `hamigrate` only asks the HA manager, whose
`qmigrate` starts a little later. Each status poll of a running task advances it one step, so
tests are deterministic without sleeping."""

from __future__ import annotations

GIB = 2**30


class Tasks:
    """Mixed into FakePve: the task endpoints over its `resources`, `services` and `tasks`."""

    resources: list[dict]
    services: dict[str, dict]
    tasks: dict[str, dict]
    node_status: dict[str, str]
    steps_per_migration: int
    fail_next: str | None
    lock_next: str | None
    ha_lists_before_start: int
    ha_starts_migration: bool
    _clock: int

    def entry(self, resource_id: str) -> dict:
        return next(e for e in self.resources if e.get("id") == resource_id)

    def _migrate(self, node: str, kind: str, vmid: int, params: dict) -> tuple[int, object]:
        guest = next((e for e in self.resources if e.get("id") == f"{kind}/{vmid}"), None)
        if guest is None or guest["node"] != node:
            return 500, f"Configuration file 'nodes/{node}/{kind}/{vmid}.conf' does not exist"
        target = params.get("target")
        if target == node:
            return 500, f"target is local node ({target})"
        if self.node_status.get(target) != "online":
            return 500, f"no such cluster node '{target}'"
        if kind == "lxc" and guest["status"] == "running" and params.get("restart") != "1":
            return 500, "CT is running - use online or restart migration"
        sid = f"{'vm' if kind == 'qemu' else 'ct'}:{vmid}"
        if self.lock_next:
            guest["lock"], self.lock_next = self.lock_next, None
        if lock := guest.get("lock"):  # PVE::AbstractConfig::check_lock
            if kind == "qemu":  # qemu-server's migrate_vm checks before forking its worker
                return 500, f"VM is locked ({lock})"
            # pve-container's checks in the task (PVE::LXC::Migrate::prepare): the task fails
            upid = self._task(node, "vzmigrate", vmid, {"sid": sid, "target": target})
            self.tasks[upid] |= {"status": "stopped", "exitstatus": f"CT is locked ({lock})", "endtime": self._clock}
            return 200, upid
        if guest.get("hastate"):
            upid = self._task(node, "hamigrate", vmid, {"sid": sid, "target": target, "steps": 0})
        else:
            upid = self._start_migration(guest, sid, target)
        return 200, upid

    def _start_migration(self, guest: dict, sid: str, target: str) -> str:
        guest["lock"] = "migrate"
        if guest.get("hastate"):
            guest["hastate"] = "migrate"
            self.services[sid] |= {"state": "migrate", "target": target}
        kind = "qmigrate" if guest["type"] == "qemu" else "vzmigrate"
        return self._task(
            guest["node"],
            kind,
            guest["vmid"],
            {
                "sid": sid,
                "target": target,
                "steps": self.steps_per_migration,
                "memory": guest["maxmem"],
                "exit": self.fail_next or "OK",
            },
        )

    def _task(self, node: str, kind: str, vmid: int, extra: dict) -> str:
        self._clock += 2
        pid = 0x1F000 + len(self.tasks)
        upid = f"UPID:{node}:{pid:08X}:{0x10F9374C:08X}:{self._clock:08X}:{kind}:{vmid}:root@pam!crs:"
        self.tasks[upid] = {
            "upid": upid,
            "node": node,
            "type": kind,
            "id": str(vmid),
            "user": "root@pam!crs",
            "pid": pid,
            "pstart": 0x10F9374C,
            "starttime": self._clock,
            "status": "running",
            "log": [f"starting {kind} of {vmid}"],
            **extra,
        }
        if kind == "hamigrate":
            self.tasks[upid] |= {"status": "stopped", "exitstatus": "OK", "endtime": self._clock}
            self.tasks[upid]["log"].append(f"requesting HA migration of {extra['sid']} to node {extra['target']}")
        if kind in ("qmigrate", "vzmigrate") and "exit" in extra:
            self.fail_next = None
        return upid

    def _status(self, upid: str) -> tuple[int, object]:
        task = self.tasks.get(upid)
        if task is None:
            return 500, "no such task"
        if task["status"] == "running":
            self._step(task)
        keys = ("upid", "node", "pid", "pstart", "starttime", "type", "id", "user", "status", "exitstatus")
        return 200, {k: task[k] for k in keys if k in task}

    def _stop_task(self, upid: str) -> tuple[int, object]:
        """As pvedaemon stops a task: the migration ends interrupted, the guest stays on its source."""
        task = self.tasks.get(upid)
        if task is None:
            return 500, "no such task"
        if task["status"] == "running":
            kind = "qemu" if task["type"] == "qmigrate" else "lxc"
            self.entry(f"{kind}/{task['id']}").pop("lock", None)
            task |= {"status": "stopped", "exitstatus": "interrupted by signal", "endtime": self._clock}
        return 200, None

    def _step(self, task: dict) -> None:
        task["steps"] -= 1
        done = task["steps"] <= 0
        moved = task["memory"] * (1 - max(task["steps"], 0) / self.steps_per_migration)
        task["log"].append(
            f"migration active, transferred {moved / GIB:.1f} GiB of {task['memory'] / GIB:.1f} GiB VM-state, 1.1 GiB/s"
        )
        if not done:
            return
        kind, vmid = ("qemu" if task["type"] == "qmigrate" else "lxc"), task["id"]
        guest = self.entry(f"{kind}/{vmid}")
        guest.pop("lock", None)
        task |= {"status": "stopped", "exitstatus": task["exit"], "endtime": self._clock}
        if task["exit"] == "OK":
            guest["node"] = task["target"]
        if guest.get("hastate"):
            guest["hastate"] = "started"
            self.services[task["sid"]] = {"node": guest["node"], "state": "started", "uid": "b1"}

    def _task_list(self, node: str, params: dict) -> list[dict]:
        for task in [t for t in self.tasks.values() if t["type"] == "hamigrate" and not t.get("picked_up")]:
            if self.ha_starts_migration and task["node"] == node:
                if self.ha_lists_before_start > 0:
                    self.ha_lists_before_start -= 1
                    continue
                task["picked_up"] = True
                guest = next(e for e in self.resources if e.get("vmid") == int(task["id"]) and "type" in e)
                self._start_migration(guest, task["sid"], task["target"])
        since, vmid = int(params.get("since", 0)), params.get("vmid")
        return [
            {k: v for k, v in t.items() if k not in ("log", "steps", "memory", "exit", "sid", "target")}
            for t in self.tasks.values()
            if t["node"] == node and t["starttime"] >= since and (vmid is None or t["id"] == vmid)
        ]
