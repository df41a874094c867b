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
from dataclasses import dataclass

from . import cgroup
from .detect import LAUNCHER, detect_isolation, isolation_summary
from .limits import SandboxLimits

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
_UID_BASE, _UID_SPAN = 1_900_000_000, 100_000_000  # one fresh uid per run, as root
_MESSAGE_CAP = 1 << 20  # bytes in one message line from the runner
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
    program: dict | None = None  # the runner's report on main.py (untrusted)
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


class Session:
    """One program in a fresh sandbox: started on creation, talked to with
    :meth:`send` / :meth:`receive` (one JSON line each way), ended by :meth:`finish`.

    Everything the program sends is untrusted data; the caller decides what it means.
    One wall-clock deadline covers the whole session.
    """

    def __init__(self, code: str, stdin: str, limits: SandboxLimits) -> None:
        layers = _layers_in_force(limits)
        root = layers["root"]
        user_ns = not root and layers["user_namespace"]
        mount_ns, pid_ns = layers["mount_namespace"], layers["pid_namespace"]
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if root else (0 if user_ns else os.getuid())
        python, prefix = _python(limits)
        self.workdir = None
        if not mount_ns:
            self.workdir = tempfile.mkdtemp(prefix="roll-sandbox-")
            if root:
                os.chown(self.workdir, uid, uid)
        self.group = None
        if layers["cgroup_pids"]:
            self.group = cgroup.create(limits.max_processes + 2, (limits.memory_mb + 128) << 20)
        self.token = secrets.token_hex(16)
        self.uid_to_kill = uid if root and not pid_ns else None
        self.limits = limits
        bundle_r, bundle_w = os.pipe()
        status_r, status_w = os.pipe()
        calls_r, calls_w = os.pipe()
        cfg = {
            "bundle_fd": bundle_r,
            "status_fd": status_w,
            "calls_fd": calls_r,
            "user_ns": user_ns,
            "mount_ns": mount_ns,
            "net_ns": layers["net_namespace"],
            "pid_ns": pid_ns,
            "setuid": root,
            "uid": uid,
            "workdir": self.workdir,
            "python": python,
            "runner": RUNNER,
            "ro_paths": [prefix, *limits.extra_ro_paths],
            "disk_mb": limits.disk_mb,
            "rlimits": _rlimits(limits, nproc=root or user_ns),
            "env": _ENV if mount_ns else {**_ENV, "HOME": self.workdir, "TMPDIR": self.workdir},
            "cgroup_procs": self.group.procs_files if self.group else [],
        }
        bundle = {"token": self.token, "code": code, "stdin": stdin}
        with open(RUNNER, encoding="utf-8") as f:
            bundle["runner_source"] = f.read()
        used = [k for k in ("user_ns", "net_ns", "mount_ns", "pid_ns", "setuid") if cfg[k]]
        used += ["cgroup:" + "+".join(self.group.controllers)] if self.group else []
        used += ["rlimits", "clean_env", "no_new_privs"]
        self.raw = RawRun(isolation=tuple(used))
        self.start = time.monotonic()
        self.deadline = self.start + limits.wall_timeout_s
        self.proc: subprocess.Popen | None = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", LAUNCHER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(bundle_r, status_w, calls_r),
                start_new_session=True,
                env={},
                cwd="/",
            )
        except BaseException:
            for fd in (bundle_w, status_r, calls_w):
                os.close(fd)
            self._cleanup()
            raise
        finally:
            for fd in (bundle_r, status_w, calls_r):
                os.close(fd)
        with contextlib.suppress(BrokenPipeError), os.fdopen(bundle_w, "wb") as f:
            f.write(json.dumps(bundle).encode())
        self.calls_w: int | None = calls_w
        self.status_r = status_r
        self.stdout_fd, self.stderr_fd = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        self.out = {self.stdout_fd: bytearray(), self.stderr_fd: bytearray()}
        self.status = bytearray()
        self.control: list[str] = []
        self.messages: list[bytes] = []
        self.pending = b""
        self.sel = selectors.DefaultSelector()
        for fd in (*self.out, status_r):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
        os.set_blocking(calls_w, False)
        self.exited_at: float | None = None

    @property
    def stopped(self) -> bool:
        return self.raw.timed_out or self.raw.output_limit or self.status_r not in self._open()

    def _open(self) -> set[int]:
        return {key.fd for key in self.sel.get_map().values()}

    def _pump(self, done) -> None:
        """Move bytes (calls in; output, status out) until ``done()``, the deadline,
        an output limit, or the pipes close."""
        while not done():
            now = time.monotonic()
            if now >= self.deadline:
                self.raw.timed_out = True
                return
            if self.raw.output_limit or not self._open():
                return
            if self.exited_at is None and self.proc.poll() is not None:
                self.exited_at = now
            if self.exited_at is not None and now - self.exited_at > 0.5:
                return  # a straggler holds the pipes open; it is killed next
            if self.pending and self.calls_w is not None:
                with contextlib.suppress(BlockingIOError):
                    try:
                        self.pending = self.pending[os.write(self.calls_w, self.pending) :]
                    except BrokenPipeError:
                        self.pending = b""
            for key, _ in self.sel.select(timeout=min(0.05, self.deadline - now)):
                self._read(key.fd)

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if not chunk:
            self.sel.unregister(fd)
            return
        if fd == self.status_r:
            self.status += chunk
            *lines, rest = bytes(self.status).split(b"\n")
            self.status = bytearray(rest)
            for line in lines:
                head, _, tail = line.decode("utf-8", "replace").partition(" ")
                if head == self.token:
                    self.control.append(tail)
                else:
                    self.messages.append(line)
            if len(self.status) > _MESSAGE_CAP:  # one message may not exceed the cap
                self.raw.output_limit = True
            return
        buf = self.out[fd]
        room = self.limits.max_output_bytes - len(buf)
        buf += chunk[: max(room, 0)]
        if len(chunk) > room:
            self.raw.output_limit = True

    def send(self, message: dict) -> None:
        self.pending += (json.dumps(message) + "\n").encode()

    def receive(self) -> bytes | None:
        """The program's next message line (unparsed), or ``None`` if it ended or ran
        out of time first (``raw.timed_out`` says which)."""
        self._pump(lambda: bool(self.messages) or self.stopped)
        return self.messages.pop(0) if self.messages else None

    def finish(self) -> RawRun:
        """Close the call channel, wait for the end (bounded by the deadline), kill
        everything left and say what happened."""
        raw = self.raw
        try:
            if self.calls_w is not None:
                os.close(self.calls_w)
                self.calls_w = None
            self._pump(lambda: False)
        finally:
            raw.wall_time_s = time.monotonic() - self.start
            raw.oom_killed = bool(self.group and self.group.oom_killed())
            self.sel.close()
            os.close(self.status_r)
            if self.calls_w is not None:
                os.close(self.calls_w)
            _kill_all(self.proc, self.group, self.uid_to_kill)
            self._cleanup()
        raw.stdout = bytes(self.out[self.stdout_fd])
        raw.stderr = bytes(self.out[self.stderr_fd])
        for line in self.control:
            kind, _, payload = line.partition(" ")
            if kind == "exit":
                raw.wait_status = int(payload)
            elif kind == "setup_error":
                raise SandboxError(f"sandbox setup failed: {json.loads(payload)}")
        return raw

    def _cleanup(self) -> None:
        if self.group is not None and self.proc is None:
            self.group.destroy()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def program_report(line: bytes | None) -> dict | None:
    """The runner's first line (how ``main.py`` went and the names it defined), or
    ``None`` if it is missing or not a JSON object."""
    if line is None:
        return None
    try:
        report = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return report if isinstance(report, dict) else None


def execute(code: str, stdin: str, limits: SandboxLimits) -> RawRun:
    """Run ``code`` in a fresh sandbox with no calls, and return what it left."""
    session = Session(code, stdin, limits)
    try:
        session.raw.program = program_report(session.receive())
    finally:
        raw = session.finish()
    return raw


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
