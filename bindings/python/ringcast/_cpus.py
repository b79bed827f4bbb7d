"""How many CPUs the queue's processes can use: what the default spin cap is chosen by (_queue.py).

Two limits narrow a machine's CPUs for a container or a service, and a spinning reader must see both:
- a CPU set (docker --cpuset-cpus, a Kubernetes pod with the static CPU manager, taskset on a whole
  service): PID 1's affinity set shows it;
- a CPU quota (docker --cpus, a Kubernetes CPU limit, systemd's CPUQuota=): the cgroup's quota over its
  period, in CPUs. It does not show in any affinity — a pod limited to 4 CPUs on a 96-CPU node sees 96 —
  and it is the costlier one to miss: processes that spin past their quota are not slowed but stopped,
  the whole group until the period's end (CFS bandwidth throttling, 100 ms periods by default).
"""
from __future__ import annotations

import math
import os
from typing import Optional


def usable_cpus(proc_self: str = "/proc/self") -> int:
    """The CPUs of this PID namespace's first process — a container's CPU set narrows them, a pinned
    executor does not (its own affinity would say 2 on a 16-CPU machine whose workers each have one) —
    or the machine's where that cannot be read; fewer where this process's cgroup has a CPU quota
    (cgroup_cpu_quota(), rounded up)."""
    try:
        cpus = len(os.sched_getaffinity(1))
    except (OSError, AttributeError):  # no /proc, another PID namespace's rules, a platform without it
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(proc_self)
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))


def cgroup_cpu_quota(proc_self: str = "/proc/self") -> Optional[float]:
    """The CPU quota of the process whose /proc directory is `proc_self`, in CPUs (quota / period), the
    tightest along its cgroup's path up to the hierarchy's mount (a parent's quota binds its children
    too), of the cgroup v2 hierarchy (cpu.max) and of a v1 hierarchy with the cpu controller
    (cpu.cfs_quota_us, cpu.cfs_period_us). None: no quota anywhere, or nothing readable (not Linux, no
    cgroup mounted, a file of another shape)."""
    try:
        with open(os.path.join(proc_self, "mountinfo")) as f:
            mounts = f.read().splitlines()
        with open(os.path.join(proc_self, "cgroup")) as f:
            memberships = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for version, mount_root, mount_point in _cpu_hierarchies(mounts):
        path = _membership(memberships, version)
        if path is None:
            continue
        limit = _tightest_quota(version, _cgroup_dir(mount_root, mount_point, path), mount_point)
        if limit is not None:
            limits.append(limit)
    return min(limits) if limits else None


def _cpu_hierarchies(mounts: list[str]) -> list[tuple[int, str, str]]:
    """(version, the mount's root within the hierarchy, where it is mounted) of the cgroup v2 mounts
    and the v1 mounts carrying the cpu controller, from /proc/<pid>/mountinfo lines: "id parent
    major:minor root mount-point options [optional fields] - fstype source super-options"."""
    found = []
    for line in mounts:
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if dash < 5 or len(fields) < dash + 3:
            continue
        fstype, super_options = fields[dash + 1], fields[dash + 3] if len(fields) > dash + 3 else ""
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if fstype == "cgroup2":
            found.append((2, root, point))
        elif fstype == "cgroup" and "cpu" in super_options.split(","):
            found.append((1, root, point))
    return found


def _membership(memberships: list[str], version: int) -> Optional[str]:
    """The cgroup path of a /proc/<pid>/cgroup line ("id:controllers:path") of that hierarchy: v2's has
    id 0 and no controllers, v1's cpu hierarchy lists cpu among its controllers."""
    for line in memberships:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if version == 2 and hierarchy == "0" and controllers == "":
            return path
        if version == 1 and "cpu" in controllers.split(","):
            return path
    return None


def _cgroup_dir(mount_root: str, mount_point: str, path: str) -> str:
    """Where the cgroup `path` lies under a mount of its hierarchy whose root is `mount_root`. A path
    outside the mount's root (a container that sees its host's path but has its own cgroup mounted, as
    "/" of its namespace) is taken as the mount itself."""
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root.rstrip("/") + "/")):
        path = path[len(mount_root):]
    elif mount_root != "/":
        path = "/"
    full = os.path.normpath(os.path.join(mount_point, path.lstrip("/")))
    return full if os.path.isdir(full) else mount_point


def _tightest_quota(version: int, directory: str, mount_point: str) -> Optional[float]:
    limits = []
    mount_point = os.path.normpath(mount_point)
    while True:
        limit = _quota_of(version, directory)
        if limit is not None:
            limits.append(limit)
        if os.path.normpath(directory) == mount_point or directory in ("/", ""):
            break
        directory = os.path.dirname(directory)
    return min(limits) if limits else None


def _quota_of(version: int, directory: str) -> Optional[float]:
    """One cgroup's quota in CPUs; None: none set (v2 "max", v1 -1) or unreadable."""
    try:
        if version == 2:
            with open(os.path.join(directory, "cpu.max")) as f:
                quota_text, period_text = f.read().split()[:2]
            if quota_text == "max":
                return None
            quota, period = int(quota_text), int(period_text)
        else:
            with open(os.path.join(directory, "cpu.cfs_quota_us")) as f:
                quota = int(f.read())
            with open(os.path.join(directory, "cpu.cfs_period_us")) as f:
                period = int(f.read())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes (\\040 ...)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
