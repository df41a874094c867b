"""The sandbox launcher: a standalone script that builds the isolated process.

Run as ``python -I -S -B launcher.py CONFIG_JSON`` by :mod:`.process`; it imports
only the standard library so that it starts fast and trusts nothing on
``sys.path``. The bundle (program code, stdin, the token that signs the exit
status) arrives on the pipe named in the config, never on the command line. The
tests never enter the sandbox: the runner answers calls on the pipe ``calls_fd``
and the parent decides the verdicts (see :mod:`.harness`).

Process tree::

    launcher (host pid namespace, own session, in the run's cgroup)
      └─ init: pid 1 of fresh net/mount/pid/ipc/uts namespaces; builds the
         read-only root, reports the exit status, and on exit the kernel kills
         every process left in the namespace
           └─ runner: drops to an unprivileged uid, sets rlimits, exec's python

``python -I -S -B launcher.py --probe`` prints a JSON map of the kernel
features that work here (see :mod:`.detect`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}.get(os.uname().machine, 155)
# statvfs f_flag bits -> mount flags that a read-only remount must keep
_LOCKED_FLAGS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME}
_LOCKED_FLAGS.update({2048: MS_NODIRATIME, 4096: MS_RELATIME})

ROOT_LIBS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "os-release")
DEV_NODES = ("null", "zero", "full", "random", "urandom")
RUNNER_IN_ROOT = "/.roll_runner.py"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    ret = _libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {src} -> {dst}")


def prctl(option: int, arg: int) -> None:
    zero = ctypes.c_ulong(0)
    _check(_libc.prctl(option, ctypes.c_ulong(arg), zero, zero, zero), f"prctl({option})")


def bind_readonly(src: str, dst: str) -> None:
    """Bind ``src`` at ``dst`` read-only, keeping the source's locked flags."""
    mount(src, dst, None, MS_BIND | MS_REC, None)
    keep = 0
    vfs = os.statvfs(src).f_flag
    for bit, flag in _LOCKED_FLAGS.items():
        if vfs & bit:
            keep |= flag
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | keep, None)


def loopback_up() -> None:
    """Bring up ``lo`` in the fresh network namespace (it has no other device)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, 0x8913, ifr))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", flags | 1))


def _make_mountpoint(path: str, like: str) -> None:
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()


def _pick_staging_dir(sources: list[str]) -> str:
    for cand in ("/mnt", "/media", "/srv", "/opt", "/tmp", "/var/tmp"):
        if os.path.isdir(cand) and not any(s == cand or s.startswith(cand + "/") for s in sources):
            return cand
    raise OSError("no directory to stage the sandbox root on")


def build_root(cfg: dict, runner_source: str) -> None:
    """Make a tmpfs root holding only read-only system paths, pivot into it."""
    ro_paths = [p for p in (*ROOT_LIBS, *cfg["ro_paths"]) if os.path.lexists(p)]
    new = _pick_staging_dir(ro_paths)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    done: list[str] = []
    for path in ro_paths:
        if any(path == d or path.startswith(d + "/") for d in done):
            continue
        target = new + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(path), target)
            continue
        _make_mountpoint(target, path)
        bind_readonly(path, target)
        done.append(path)
    os.makedirs(new + "/etc", exist_ok=True)
    for name in ETC_FILES:
        src = "/etc/" + name
        if os.path.islink(src):
            os.symlink(os.readlink(src), new + src)
        elif os.path.exists(src):
            _make_mountpoint(new + src, src)
            bind_readonly(src, new + src)
    os.makedirs(new + "/dev", exist_ok=True)
    for name in DEV_NODES:
        _make_mountpoint(new + "/dev/" + name, "/dev/" + name)
        mount("/dev/" + name, new + "/dev/" + name, None, MS_BIND, None)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        os.symlink(target, f"{new}/dev/{name}")
    os.symlink("/proc/self/fd/1", new + "/dev/stdout")
    os.symlink("/proc/self/fd/2", new + "/dev/stderr")
    os.makedirs(new + "/dev/shm")
    mount(
        "tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,mode=1777"
    )
    if cfg["pid_ns"]:
        os.makedirs(new + "/proc")
        mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    os.makedirs(new + "/sandbox")
    opts = f"size={cfg['disk_mb']}m,mode=0700,uid={cfg['uid']},gid={cfg['uid']}"
    mount("tmpfs", new + "/sandbox", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    os.symlink("/sandbox", new + "/tmp")
    with open(new + RUNNER_IN_ROOT, "w") as f:
        f.write(runner_source)
    os.makedirs(new + "/.oldroot")
    _check(_libc.syscall(SYS_PIVOT_ROOT, new.encode(), (new + "/.oldroot").encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount old root")
    os.rmdir("/.oldroot")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    os.write(fd, data) if len(data) < 65536 else _write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def drop_privileges(cfg: dict) -> None:
    import resource

    lim = cfg["rlimits"]
    for name, value in lim.items():
        soft, hard = (value, value) if isinstance(value, int) else value
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if cfg["setuid"]:
        os.setgroups([])
        os.setresgid(cfg["uid"], cfg["uid"], cfg["uid"])
        os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
    else:
        for cap in range(64):  # empty bounding set: exec grants no capability
            if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
                break
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def exec_runner(cfg: dict, fds: dict[int, int]) -> None:
    """In the runner process: wire fds, drop privileges, exec python."""
    os.setsid()
    high = {target: fcntl.fcntl(src, fcntl.F_DUPFD, 100) for target, src in fds.items()}
    for target, src in high.items():
        os.dup2(src, target)
    os.closerange(5, 1 << 16)
    os.chdir(cfg["workdir"])
    drop_privileges(cfg)
    os.execve(cfg["python"], [cfg["python"], "-I", "-B", cfg["runner"]], cfg["env"])


def run_init(cfg: dict, bundle: dict, status: int) -> int:
    """pid 1 of the namespaces: set up the root, start the runner, report its end."""
    token = bundle["token"]
    if cfg["mount_ns"]:
        build_root(cfg, bundle["runner_source"])
        cfg = {**cfg, "workdir": "/sandbox", "runner": RUNNER_IN_ROOT}
    if cfg["net_ns"]:
        loopback_up()
    main_py = os.path.join(cfg["workdir"], "main.py")
    with open(main_py, "w", encoding="utf-8") as f:
        f.write(bundle["code"])
    os.chown(main_py, cfg["uid"], cfg["uid"])
    stdin_fd = _memfd("stdin", bundle["stdin"].encode())
    pid = os.fork()
    if pid == 0:
        try:
            exec_runner(cfg, {0: stdin_fd, 3: cfg["calls_fd"], 4: status})
        finally:
            os._exit(127)
    os.close(stdin_fd)
    os.close(cfg["calls_fd"])  # only the runner reads the calls
    while True:
        got, wstatus = os.waitpid(-1, 0)
        if got == pid:
            break
    if cfg["pid_ns"] and os.getpid() == 1:  # never on the host: -1 means "all"
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # no process of the run outlives its report
    os.write(status, f"{token} exit {wstatus}\n".encode())
    return 0


def launch(cfg: dict) -> int:
    resource_core_off()
    with os.fdopen(cfg["bundle_fd"], "rb") as f:
        bundle = json.loads(f.read())
    status = cfg["status_fd"]
    token = bundle["token"]
    try:
        if cfg["cgroup_procs"]:
            for path in cfg["cgroup_procs"]:
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
        flags = 0
        for key, flag in (("user_ns", CLONE_NEWUSER), ("mount_ns", CLONE_NEWNS)):
            flags |= flag if cfg[key] else 0
        for key, flag in (("net_ns", CLONE_NEWNET), ("pid_ns", CLONE_NEWPID)):
            flags |= flag if cfg[key] else 0
        if cfg["pid_ns"]:
            flags |= CLONE_NEWIPC | CLONE_NEWUTS
        uid, gid = os.getuid(), os.getgid()
        if flags:
            unshare(flags)
        if cfg["user_ns"]:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {uid} 1")
            _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        os.write(status, f"{token} setup_error {json.dumps(str(exc))}\n".encode())
        return 125
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 125
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent and not cfg["pid_ns"]:
                os._exit(125)
            code = run_init(cfg, bundle, status)
        except BaseException as exc:  # report any setup failure, then die
            msg = json.dumps(f"{type(exc).__name__}: {exc}")
            os.write(status, f"{token} setup_error {msg}\n".encode())
        os._exit(code)
    os.close(cfg["calls_fd"])
    _, wstatus = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wstatus) & 0xFF


def resource_core_off() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _probe_one(flags: int, as_user: bool) -> bool:
    pid = os.fork()
    if pid == 0:
        try:
            uid = os.getuid()
            unshare(flags | (CLONE_NEWUSER if as_user else 0))
            if as_user:
                _write("/proc/self/uid_map", f"0 {uid} 1")
            if flags & CLONE_NEWNS:
                mount(None, "/", None, MS_REC | MS_PRIVATE, None)
                mount("tmpfs", "/mnt", "tmpfs", 0, "size=1m")
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def probe() -> dict[str, bool]:
    root = os.geteuid() == 0
    out = {"root": root, "user_namespace": _probe_one(0, True)}
    use_user = not root
    for name, flag in (("net", CLONE_NEWNET), ("mount", CLONE_NEWNS), ("pid", CLONE_NEWPID)):
        out[f"{name}_namespace"] = _probe_one(flag, use_user)
    out["setuid_drop"] = root
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        print(json.dumps(probe()))
        sys.exit(0)
    sys.exit(launch(json.loads(sys.argv[1])))
