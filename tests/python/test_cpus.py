"""The CPUs a queue's processes can use (ringcast._cpus): a container's CPU set and its CPU quota,
which the default spin cap is chosen by. Fake /proc and cgroup trees for every shape, and a real
cgroup with a quota where this machine lets the test make one."""
import os
import subprocess
import sys
import uuid

import pytest

import ringcast
import ringcast._cpus as cpus


def fake_proc(tmp_path, mounts, memberships, extra_lines=()):
    """A /proc/self with `mounts` ((root, mount point, fstype, super options)), each its own hierarchy,
    with the optional fields a systemd host writes, more raw mountinfo lines, and `memberships`
    (/proc/self/cgroup lines)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    lines = [f"{20 + i} 1 0:{30 + i} {escape(root)} {escape(point)} rw,relatime shared:{7 + i} - "
             f"{fstype} {fstype} {opts}" for i, (root, point, fstype, opts) in enumerate(mounts)]
    lines.insert(0, "19 1 0:5 / /proc rw - proc proc rw")
    (proc / "mountinfo").write_bytes(b"\n".join(os.fsencode(line) for line in [*extra_lines, *lines]) + b"\n")
    (proc / "cgroup").write_text("\n".join(memberships) + "\n")
    return str(proc)


def escape(path):
    """As the kernel writes a path into mountinfo: space, tab, newline and backslash as octal escapes."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in str(path))


def cgroup(base, path, **files):
    d = base / path.lstrip("/") if path != "/" else base
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text + "\n")
    return d


def test_a_v2_quota_is_the_tightest_along_the_path(tmp_path):
    """A Kubernetes pod: the container's own cpu.max is "max", its pod's 4 CPUs, the slice above none."""
    root = tmp_path / "cg2"
    cgroup(root, "/", cpu_max="max 100000")
    cgroup(root, "/kubepods", cpu_max="max 100000")
    cgroup(root, "/kubepods/pod1", cpu_max="400000 100000")
    cgroup(root, "/kubepods/pod1/ctr", cpu_max="max 100000")
    proc = fake_proc(tmp_path, [("/", str(root), "cgroup2", "rw")], ["0::/kubepods/pod1/ctr"])
    assert cpus.cgroup_cpu_quota(proc) == 4.0


def test_a_v1_quota_of_a_fraction_rounds_down_to_whole_cpus(tmp_path, monkeypatch):
    """docker --cpus=1.5 on a v1 host: 150000 / 100000 µs in the cpu hierarchy (mounted with cpuacct),
    on a machine of 16 CPUs: 1 usable (two processes spinning under 1.5 CPUs would be throttled)."""
    root = tmp_path / "cpu,cpuacct"
    cgroup(root, "/", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    cgroup(root, "/docker/abc", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")
    proc = fake_proc(tmp_path, [("/", str(root), "cgroup", "rw,cpu,cpuacct"),
                                ("/", str(tmp_path / "memory"), "cgroup", "rw,memory")],
                     ["5:memory:/docker/abc", "4:cpu,cpuacct:/docker/abc", "0::/docker/abc"])
    assert cpus.cgroup_cpu_quota(proc) == 1.5
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert cpus.usable_cpus(proc) == 1


def test_a_container_that_sees_its_own_cgroup_as_the_mount(tmp_path):
    """Inside a container the hierarchy is mounted at the container's own group: the mount's root is
    that group (no cgroup namespace: /proc/self/cgroup still names the host's path) or "/" (a cgroup
    namespace: the path is "/"); either way the quota is the mount point's own."""
    for n, (mount_root, path) in enumerate((("/docker/abc", "/docker/abc"), ("/", "/"),
                                            ("/docker/abc", "/docker/other"))):
        root = tmp_path / f"c{n}" / "cg"
        cgroup(root, "/", cpu_max="200000 100000")
        proc = fake_proc(tmp_path / f"c{n}", [(mount_root, str(root), "cgroup2", "rw")], [f"0::{path}"])
        assert cpus.cgroup_cpu_quota(proc) == 2.0, (mount_root, path)


def test_both_hierarchies_count_and_a_mount_point_with_a_space(tmp_path):
    root2 = tmp_path / "unified tree"
    cgroup(root2, "/svc", cpu_max="300000 100000")
    root1 = tmp_path / "cpu"
    cgroup(root1, "/svc", cpu_cfs_quota_us="50000", cpu_cfs_period_us="20000")
    proc = fake_proc(tmp_path, [("/", str(root2), "cgroup2", "rw"), ("/", str(root1), "cgroup", "rw,cpu")],
                     ["3:cpu:/svc", "0::/svc"])
    assert cpus.cgroup_cpu_quota(proc) == 2.5


def test_no_quota_or_nothing_readable_is_none(tmp_path, monkeypatch):
    root = tmp_path / "cg2"
    cgroup(root, "/a/b", cpu_max="max 100000")
    cgroup(root, "/", cpu_max="max 100000")
    cases = {
        "no quota": ([("/", str(root), "cgroup2", "rw")], ["0::/a/b"]),
        "no cgroup mounted": ([], ["0::/a/b"]),
        "a v1 mount without the cpu controller": ([("/", str(root), "cgroup", "rw,memory")], ["4:memory:/a/b"]),
        "not a member of that hierarchy": ([("/", str(root), "cgroup2", "rw")], ["4:cpu:/a/b"]),
    }
    for n, (what, (mounts, memberships)) in enumerate(cases.items()):
        (tmp_path / str(n)).mkdir()
        assert cpus.cgroup_cpu_quota(fake_proc(tmp_path / str(n), mounts, memberships)) is None, what
    (root / "a" / "b" / "cpu.max").write_text("garbage\n")
    (tmp_path / "g").mkdir()
    assert cpus.cgroup_cpu_quota(fake_proc(tmp_path / "g", [("/", str(root), "cgroup2", "rw")], ["0::/a/b"])) is None
    assert cpus.cgroup_cpu_quota(str(tmp_path / "no-such-proc")) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert cpus.usable_cpus(str(tmp_path / "no-such-proc")) == 6


def test_mountinfo_as_a_host_writes_it(tmp_path):
    """A cpuset hierarchy listed before the cpu one (a substring test would take it), an empty mount
    source (two spaces in a row), a mount point with a backslash, a tab and a carriage return (which
    the kernel leaves unescaped), and a line that is not UTF-8: the v1 cpu hierarchy's quota is found, a parent group's binding its child."""
    cpuset = tmp_path / "cpuset"
    cgroup(cpuset, "/svc/job", cpu_cfs_quota_us="100000", cpu_cfs_period_us="100000")
    root = tmp_path / "c\\pu\tx\r"
    cgroup(root, "/", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    cgroup(root, "/svc", cpu_cfs_quota_us="300000", cpu_cfs_period_us="100000")
    cgroup(root, "/svc/job", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    extra = [f"30 1 0:40 / {escape(cpuset)} rw shared:3 - cgroup cgroup rw,cpuset",
             f"31 1 0:41 / {escape(root)} rw shared:4 master:1 - cgroup  rw,cpu,cpuacct",
             "32 1 0:42 / /mnt/caf\udce9 rw - tmpfs tmpfs rw"]
    proc = fake_proc(tmp_path, [], ["6:cpuset:/svc/job", "4:cpu,cpuacct:/svc/job", "0::/svc/job"], extra)
    assert b"caf\xe9" in (tmp_path / "proc" / "mountinfo").read_bytes()
    assert cpus.cgroup_cpu_quota(proc) == 3.0


def test_only_the_mount_holding_the_process_s_group_counts(tmp_path):
    """The hierarchy mounted whole, and a pod's group (0.5 CPU) bind-mounted elsewhere: a process in
    another group has no quota; one in the pod has the pod's; one in a job of a slice whose quota is
    set above the job's own bind mount has the slice's (the mount with the shortest root shows it)."""
    root = tmp_path / "cg2"
    cgroup(root, "/", cpu_max="max 100000")
    cgroup(root, "/user.slice", cpu_max="max 100000")
    cgroup(root, "/kubepods/pod1", cpu_max="50000 100000")
    cgroup(root, "/kubepods/pod1/ctr", cpu_max="max 100000")  # one group, seen in both mounts
    bind = tmp_path / "pod-view"
    cgroup(bind, "/", cpu_max="50000 100000")
    cgroup(bind, "/ctr", cpu_max="max 100000")
    both = [("/", str(root), "cgroup2", "rw"), ("/kubepods/pod1", str(bind), "cgroup2", "rw")]
    same_device = [f"{20 + i} 1 0:30 {escape(r)} {escape(p)} rw - {t} {t} {o}" for i, (r, p, t, o) in enumerate(both)]
    (tmp_path / "a").mkdir()
    assert cpus.cgroup_cpu_quota(fake_proc(tmp_path / "a", [], ["0::/user.slice"], same_device)) is None
    (tmp_path / "b").mkdir()
    assert cpus.cgroup_cpu_quota(fake_proc(tmp_path / "b", [], ["0::/kubepods/pod1/ctr"], same_device)) == 0.5
    cgroup(root, "/svc.slice", cpu_max="100000 100000")
    cgroup(root, "/svc.slice/job", cpu_max="max 100000")
    job = tmp_path / "job-view"
    cgroup(job, "/", cpu_max="max 100000")
    whole_and_job = [f"{20 + i} 1 0:30 {escape(r)} {escape(p)} rw - cgroup2 cgroup2 rw"
                     for i, (r, p) in enumerate((("/svc.slice/job", job), ("/", root)))]
    (tmp_path / "c").mkdir()
    assert cpus.cgroup_cpu_quota(fake_proc(tmp_path / "c", [], ["0::/svc.slice/job"], whole_and_job)) == 1.0


def test_a_path_above_the_namespace_root_stays_in_the_mount(tmp_path):
    """A cgroup namespace shows a process moved out of it as "/.."; the walk never leaves the mount (a
    cpu.max planted above it is not read), and the mount's own quota counts."""
    outer = tmp_path / "outer"
    cgroup(outer, "/", cpu_max="10000 100000")
    root = outer / "cg"
    cgroup(root, "/", cpu_max="200000 100000")
    proc = fake_proc(tmp_path, [("/", str(root), "cgroup2", "rw")], ["0::/.."])
    assert cpus.cgroup_cpu_quota(proc) == 2.0


def test_usable_cpus_never_raises(tmp_path, monkeypatch):
    """A quota file out of range and an unforeseen failure of the reading itself: the CPU set alone."""
    root = tmp_path / "cg2"
    cgroup(root, "/", cpu_max="9" * 400 + " 1")
    proc = fake_proc(tmp_path, [("/", str(root), "cgroup2", "rw")], ["0::/"])
    assert cpus.cgroup_cpu_quota(proc) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))

    def broken(proc_self="/proc/self"):
        raise RuntimeError("a /proc nobody foresaw")

    monkeypatch.setattr(cpus, "cgroup_cpu_quota", broken)
    assert cpus.usable_cpus(proc) == 4
    q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
    q.shutdown()


def test_a_quota_below_the_queue_s_processes_gives_the_2_ms_cap(monkeypatch):
    """The rule the quota feeds: 16 CPUs in PID 1's set, but a quota of 2 CPUs for an executor and two
    workers — they share CPUs, so the readers' cap is the 2 ms one (spinning past a quota stops the
    whole group until the period's end), as with 2.5; a quota of 3 gives each its CPU."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    for quota, cap in ((2.0, 2000.0), (2.5, 2000.0), (3.0, 5000.0), (None, 5000.0)):
        monkeypatch.setattr(cpus, "cgroup_cpu_quota", lambda proc_self="/proc/self", q=quota: q)
        q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)
        try:
            assert q.export_handle().spin_max_us == cap, quota
        finally:
            q.shutdown()


def _writable_cpu_hierarchy():
    """(version, a new cgroup's directory) under this process's own group in a hierarchy with the cpu
    controller that this process may write, or None."""
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
        with open("/proc/self/cgroup") as f:
            memberships = f.read().splitlines()
    except OSError:
        return None
    hierarchies = {}
    for mount in cpus._cpu_mounts(mounts):
        hierarchies.setdefault((mount.version, mount.device), []).append(mount)
    for (version, _), mounts_of_it in hierarchies.items():
        path = cpus._membership(memberships, version)
        if path is None:
            continue
        parent, _ = cpus._cgroup_dir(mounts_of_it, path)
        if version == 2:  # the child gets the cpu controller only if the parent hands it down
            try:
                with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                    if "cpu" not in f.read().split():
                        continue
            except OSError:
                continue
        if os.access(parent, os.W_OK):
            return version, os.path.join(parent, f"ringcast-test-{uuid.uuid4().hex[:8]}")
    return None


def test_a_real_cgroup_quota_is_seen_by_a_process_in_it():
    """A process put into a cgroup limited to half a CPU sees a quota of 0.5 and one usable CPU, and a
    queue it makes for two readers gets the 2 ms cap (a real cgroup: needs root and a writable cpu
    hierarchy; skipped elsewhere)."""
    where = _writable_cpu_hierarchy()
    if where is None:
        pytest.skip("no writable cgroup hierarchy with the cpu controller here (not root, or none mounted)")
    version, group = where
    try:
        os.mkdir(group)
    except OSError as e:
        pytest.skip(f"cannot make a cgroup here: {e}")
    try:
        if version == 2:
            with open(os.path.join(group, "cpu.max"), "w") as f:
                f.write("50000 100000")
        else:
            with open(os.path.join(group, "cpu.cfs_period_us"), "w") as f:
                f.write("100000")
            with open(os.path.join(group, "cpu.cfs_quota_us"), "w") as f:
                f.write("50000")
        procs = os.path.join(group, "cgroup.procs")

        def join_group():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        code = ("import ringcast, ringcast._cpus as c\n"
                "q = ringcast.MessageQueue(2, 2, max_chunk_bytes=4096, max_chunks=4)\n"
                "print(c.cgroup_cpu_quota(), c.usable_cpus(), q.export_handle().spin_max_us)\n"
                "q.shutdown()\n")
        out = subprocess.run([sys.executable, "-c", code], preexec_fn=join_group, capture_output=True,
                             text=True, timeout=120, env=os.environ.copy())
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["0.5", "1", "2000.0"], out.stdout
        outside = subprocess.run([sys.executable, "-c", "import ringcast._cpus as c; print(c.cgroup_cpu_quota())"],
                                 capture_output=True, text=True, timeout=60)
        assert outside.stdout.strip() != "0.5", "the quota was seen outside the group"
    finally:
        os.rmdir(group)
