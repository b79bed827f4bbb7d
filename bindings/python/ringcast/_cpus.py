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
import re
from typing import NamedTuple, Optional


def usable_cpus(proc_self: str = "/proc/self") -> int:
    """The CPUs of this PID namespace's first process — a container's CPU set narrows them, a pinned
    executor does not (its own affinity would say 2 on a 16-CPU machine whose workers each have one) —
    or the machine's where that cannot be read; fewer where this process's cgroup has a CPU quota
    (cgroup_cpu_quota(), rounded down to whole CPUs, at least one: three processes that spin under a
    quota of 2.5 CPUs are throttled, so 2.5 counts as 2). Never raises: it picks a default, and a
    default must not stop a queue from being made."""
    try:
        cpus = len(os.sched_getaffinity(1))
    except (OSError, AttributeError):  # no /proc, another PID namespace's rules, a platform without it
        cpus = os.cpu_count() or 1
    try:
        quota = cgroup_cpu_quota(proc_self)
    except Exception:  # noqa: BLE001 — a shape of /proc nobody foresaw: the CPU set alone then
        quota = None
    return cpus if quota is None else max(1, min(cpus, math.floor(quota)))


def cgroup_cpu_quota(proc_self: str = "/proc/self") -> Optional[float]:
    """The CPU quota of the process whose /proc directory is `proc_self`, in CPUs (quota / period), the
    tightest along its cgroup's path up to the hierarchy's mount (a parent's quota binds its children
    too), of the cgroup v2 hierarchy (cpu.max) and of a v1 hierarchy with the cpu controller
    (cpu.cfs_quota_us, cpu.cfs_period_us). None: no quota anywhere, or nothing readable (not Linux, no
    cgroup mounted, a file of another shape)."""
    mounts = _read_lines(os.path.join(proc_self, "mountinfo"))
    memberships = _read_lines(os.path.join(proc_self, "cgroup"))
    if mounts is None or memberships is None:
        return None
    hierarchies: dict[tuple[int, str], list[_Mount]] = {}
    for mount in _cpu_mounts(mounts):
        hierarchies.setdefault((mount.version, mount.device), []).append(mount)
    limits = []
    for (version, _), mounts_of_it in hierarchies.items():
        path = _membership(memberships, version)
        if path is None:
            continue
        directory, mount_point = _cgroup_dir(mounts_of_it, path)
        limit = _tightest_quota(version, directory, mount_point)
        if limit is not None:
            limits.append(limit)
    return min(limits) if limits else None


class _Mount(NamedTuple):
    version: int  # 1 or 2
    device: str   # major:minor of the hierarchy: every mount of one hierarchy has the same
    root: str     # the mount's root within the hierarchy
    point: str    # where it is mounted


def _read_lines(path: str) -> Optional[list[str]]:
    # Bytes decoded as file names are (surrogateescape): a mount point that is not UTF-8 is still a line.
    try:
        with open(path, "rb") as f:
            return [os.fsdecode(line) for line in f.read().split(b"\n") if line]  # not splitlines: a
            # carriage return, which the kernel does not escape, may be part of a path
    except OSError:
        return None


def _cpu_mounts(mounts: list[str]) -> list[_Mount]:
    """The cgroup v2 mounts and the v1 mounts carrying the cpu controller, from /proc/<pid>/mountinfo
    lines: "id parent major:minor root mount-point options [optional fields...] - fstype source
    super-options", fields separated by one space (a path's own spaces are escaped; an empty source
    leaves two spaces in a row)."""
    found = []
    for line in mounts:
        head, separator, tail = line.partition(" - ")
        fields, after = head.split(" "), tail.split(" ")
        if not separator or len(fields) < 6 or len(after) < 3:
            continue
        fstype, super_options = after[0], after[2]
        if fstype == "cgroup2":
            version = 2
        elif fstype == "cgroup" and "cpu" in super_options.split(","):
            version = 1
        else:
            continue
        found.append(_Mount(version, fields[2], _unescape(fields[3]), _unescape(fields[4])))
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


def _cgroup_dir(mounts: list[_Mount], path: str) -> tuple[str, str]:
    """(the directory of cgroup `path`, the mount point it lies under) among the mounts of its
    hierarchy: under the mount whose root is the shortest prefix of the path — it shows the most of
    the group's ancestors, whose quotas bind it too — and never under a mount of another group (a
    pod's group bind-mounted elsewhere). A path under no mount's root (a container that sees its
    host's path but has its own group mounted as the root of its namespace) or leaving it ("/.." from
    a cgroup namespace's view) is taken as a mount's own group: a quota wrongly taken costs a shorter
    spin, one missed costs throttling."""
    def contains(root: str) -> bool:
        return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")

    candidates = [m for m in mounts if contains(m.root)]
    if not candidates:
        return mounts[0].point, mounts[0].point
    mount = min(candidates, key=lambda m: len(m.root))
    point = os.path.normpath(mount.point)
    inner = path[len(mount.root):] if mount.root != "/" else path
    full = os.path.normpath(os.path.join(point, inner.lstrip("/")))
    if os.path.commonpath([full, point]) != point or not os.path.isdir(full):
        return point, point
    return full, point


def _tightest_quota(version: int, directory: str, mount_point: str) -> Optional[float]:
    """The least quota from `directory` up to `mount_point` (which contains it)."""
    limits = []
    while True:
        limit = _quota_of(version, directory)
        if limit is not None:
            limits.append(limit)
        if directory == mount_point or directory in ("/", ""):
            break
        directory = os.path.dirname(directory)
    return min(limits) if limits else None


def _quota_of(version: int, directory: str) -> Optional[float]:
    """One cgroup's quota in CPUs; None: none set (v2 "max", v1 -1) or unreadable."""
    try:
        if version == 2:
            with open(os.path.join(directory, "cpu.max")) as f:
                quota_text, period_text = f.read().split()[:2]
            quota, period = int(quota_text), int(period_text)  # "max" raises ValueError: no quota
        else:
            with open(os.path.join(directory, "cpu.cfs_quota_us")) as f:
                quota = int(f.read())
            with open(os.path.join(directory, "cpu.cfs_period_us")) as f:
                period = int(f.read())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError, OverflowError, UnicodeDecodeError):
        return None


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes (\\040 ...)."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)
