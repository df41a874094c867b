"""Start the launcher for one program, feed it, collect bounded output, clean up."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import cgroup
from .detect import LAUNCHER, detect_isolation, isolation_summary
from .limits import SandboxLimits

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
_UID_BASE, _UID_SPAN = 1_900_000_000, 100_000_000  # one fresh uid per run, as root
_STATUS_CAP = 1 << 20
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/sandbox",
    "TMPDIR": "/sandbox",
    "LANG": "C.UTF-8",
    "USER": "sandbox",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class SandboxUnavailable(RuntimeError):
    """The machine cannot isolate programs and weak isolation was not allowed."""


class SandboxError(RuntimeError):
    """The sandbox itself failed to start (not the program's fault)."""


@dataclass
class RawRun:
    stdout: bytes = b""
    stderr: bytes = b""
    output_limit: bool = False
    timed_out: bool = False
    oom_killed: bool = False
    wait_status: int | None = None
    verdicts: list[dict | None] = field(default_factory=list)
    wall_time_s: float = 0.0
    isolation: tuple[str, ...] = ()


def _layers_in_force(limits: SandboxLimits) -> dict[str, bool]:
    layers = detect_isolation()
    if not layers["strong"] and not limits.allow_weak_isolation:
        raise SandboxUnavailable(
            isolation_summary(layers) + ". Refusing to run untrusted code; pass "
            "SandboxLimits(allow_weak_isolation=True) to run it anyway."
        )
    return layers


def _python(limits: SandboxLimits) -> tuple[str, str]:
    """The interpreter to run and the folder to expose read-only for it."""
    if limits.python:
        exe = os.path.realpath(limits.python)
        return exe, os.path.dirname(os.path.dirname(exe))
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base), os.path.realpath(sys.base_prefix)


def _rlimits(limits: SandboxLimits, nproc: bool) -> dict[str, object]:
    mem = limits.memory_mb << 20
    out: dict[str, object] = {
        "RLIMIT_CPU": [limits.cpu_time_s, limits.cpu_time_s + 1],
        "RLIMIT_AS": mem,
        "RLIMIT_NOFILE": limits.max_open_files,
        "RLIMIT_FSIZE": limits.max_file_mb << 20,
        "RLIMIT_CORE": 0,
    }
    if nproc:
        out["RLIMIT_NPROC"] = limits.max_processes
    return out


def execute(code: str, stdin: str, tests: list[str], limits: SandboxLimits) -> RawRun:
    """Run ``code`` (then ``tests``) in a fresh sandbox and return what it left."""
    layers = _layers_in_force(limits)
    root = layers["root"]
    user_ns = not root and layers["user_namespace"]
    mount_ns, pid_ns = layers["mount_namespace"], layers["pid_namespace"]
    uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if root else (0 if user_ns else os.getuid())
    python, prefix = _python(limits)
    workdir = None
    if not mount_ns:
        workdir = tempfile.mkdtemp(prefix="roll-sandbox-")
        if root:
            os.chown(workdir, uid, uid)
    group = None
    if layers["cgroup_pids"]:
        group = cgroup.create(limits.max_processes + 2, (limits.memory_mb + 128) << 20)
    token = secrets.token_hex(16)
    bundle_r, bundle_w = os.pipe()
    status_r, status_w = os.pipe()
    cfg = {
        "bundle_fd": bundle_r,
        "status_fd": status_w,
        "user_ns": user_ns,
        "mount_ns": mount_ns,
        "net_ns": layers["net_namespace"],
        "pid_ns": pid_ns,
        "setuid": root,
        "uid": uid,
        "workdir": workdir,
        "python": python,
        "runner": RUNNER,
        "ro_paths": [prefix, *limits.extra_ro_paths],
        "disk_mb": limits.disk_mb,
        "rlimits": _rlimits(limits, nproc=root or user_ns),
        "env": _ENV if mount_ns else {**_ENV, "HOME": workdir, "TMPDIR": workdir},
        "cgroup_procs": group.procs_files if group else [],
    }
    step_tokens = [secrets.token_hex(16) for _ in range(len(tests) + 1)]
    bundle = {"token": token, "step_tokens": step_tokens, "code": code, "stdin": stdin}
    bundle["tests"] = tests
    with open(RUNNER, encoding="utf-8") as f:
        bundle["runner_source"] = f.read()
    used = [k for k in ("user_ns", "net_ns", "mount_ns", "pid_ns", "setuid") if cfg[k]]
    used += ["cgroup:" + "+".join(group.controllers)] if group else []
    used += ["rlimits", "clean_env", "no_new_privs"]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(cfg)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(bundle_r, status_w),
            start_new_session=True,
            env={},
            cwd="/",
        )
    finally:
        os.close(bundle_r)
        os.close(status_w)
    raw = RawRun(isolation=tuple(used))
    try:
        with contextlib.suppress(BrokenPipeError), os.fdopen(bundle_w, "wb") as f:
            f.write(json.dumps(bundle).encode())
        status = _collect(proc, status_r, start + limits.wall_timeout_s, limits, raw)
    finally:
        raw.wall_time_s = time.monotonic() - start
        raw.oom_killed = bool(group and group.oom_killed())
        _kill_all(proc, group, uid if root and not pid_ns else None)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    _parse_status(status, token, step_tokens, raw)
    return raw


def _collect(proc, status_r: int, deadline: float, limits: SandboxLimits, raw: RawRun) -> bytes:
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    bufs[status_r] = bytearray()
    caps = {fd: limits.max_output_bytes for fd in bufs}
    caps[status_r] = _STATUS_CAP
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                raw.timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # a straggler holds the pipes open; it is killed next
            for key, _ in sel.select(timeout=min(0.05, deadline - now)):
                fd = key.fd
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(fd)
                    continue
                room = caps[fd] - len(bufs[fd])
                bufs[fd] += chunk[: max(room, 0)]
                if len(chunk) > room:
                    raw.output_limit = raw.output_limit or fd != status_r
                    sel.unregister(fd)
            if raw.output_limit:
                break
    finally:
        sel.close()
        os.close(status_r)
    raw.stdout = bytes(bufs[proc.stdout.fileno()])
    raw.stderr = bytes(bufs[proc.stderr.fileno()])
    return bytes(bufs[status_r])


def _kill_all(proc, group, uid: int | None) -> None:
    """SIGKILL the launcher's group (its pid-namespace init dies with it), the
    cgroup, and, without a pid namespace, every process of the run's uid."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if group is not None:
        group.destroy()
    if uid is not None:
        _kill_uid(uid)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def _kill_uid(uid: int) -> None:
    for _ in range(50):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found = True
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                continue
        if not found:
            return
        time.sleep(0.01)


def _parse_status(data: bytes, token: str, step_tokens: list[str], raw: RawRun) -> None:
    """Keep the lines signed with the right token; ``raw.verdicts[i]`` is step i
    (0: the program, i: test i - 1), ``None`` where no valid verdict came."""
    steps = {t: i for i, t in enumerate(step_tokens)}
    raw.verdicts = [None] * len(step_tokens)
    for line in data.decode("utf-8", "replace").splitlines():
        head, _, rest = line.partition(" ")
        kind, _, payload = rest.partition(" ")
        if head in steps and kind == "verdict" and raw.verdicts[steps[head]] is None:
            with contextlib.suppress(ValueError, TypeError):
                raw.verdicts[steps[head]] = dict(json.loads(payload))
            continue
        if head != token:
            continue  # forged or garbled
        if kind == "exit":
            raw.wait_status = int(payload)
        elif kind == "setup_error":
            raise SandboxError(f"sandbox setup failed: {json.loads(payload)}")
