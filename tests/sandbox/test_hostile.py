"""Hostile programs: each must be contained, and the host is checked afterwards.

Every test uses the ``host_clean`` fixture: no process of a sandbox uid and no
run cgroup may be left on the host when it ends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid

import pytest

from rollcli.rewards.sandbox import SandboxLimits, run_program

pytestmark = pytest.mark.usefixtures("host_clean")
FAST = SandboxLimits(wall_timeout_s=3, cpu_time_s=3, memory_mb=256, max_processes=16)


@pytest.fixture
def canary(tmp_path):
    """A secret file outside the sandbox folder, plus its folder's listing."""
    path = tmp_path / "canary.txt"
    path.write_text("CANARY-" + uuid.uuid4().hex)
    os.chmod(tmp_path, 0o777)  # even world-readable: only isolation protects it
    os.chmod(path, 0o666)
    return path


def test_cannot_read_host_files(canary):
    code = f"""
import os
for p in [{str(canary)!r}, "/etc/shadow", "/etc/passwd", "/work/main/pyproject.toml",
          "/root/.bash_history", "/proc/1/environ"]:
    try:
        print(p, open(p).read()[:200])
    except OSError as e:
        print(p, "DENIED", type(e).__name__)
print(sorted(os.listdir("/")))
"""
    r = run_program(code)
    assert r.ok, r
    assert canary.read_text() not in r.stdout
    assert r.stdout.count("DENIED") == 6
    assert "work" not in r.stdout.splitlines()[-1]


def test_cannot_write_outside_its_folder(canary):
    before = canary.read_text()
    listing = sorted(os.listdir(canary.parent))
    marker = f"roll-escape-{uuid.uuid4().hex}"
    code = f"""
import os
for p in [{str(canary)!r}, {str(canary.parent / marker)!r}, "/tmp/../{marker}",
          "/usr/{marker}", "/etc/{marker}", "/{marker}"]:
    try:
        open(p, "w").write("pwned")
        print("WROTE", p)
    except OSError as e:
        print("DENIED", p, type(e).__name__)
open("ok.txt", "w").write("inside is fine")
print(open("ok.txt").read())
"""
    r = run_program(code)
    assert r.ok, r
    assert "WROTE" not in r.stdout and "inside is fine" in r.stdout
    assert canary.read_text() == before
    assert sorted(os.listdir(canary.parent)) == listing
    assert not any(os.path.exists(p) for p in (f"/tmp/{marker}", f"/{marker}", f"/usr/{marker}"))


def test_no_network_to_a_host_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(4)
    port = server.getsockname()[1]
    seen = []

    def accept():
        with contextlib.suppress(OSError):
            seen.append(server.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = f"""
import socket
for host in ("127.0.0.1", "localhost", "10.0.2.2"):
    try:
        socket.create_connection((host, {port}), timeout=1)
        print("CONNECTED", host)
    except OSError as e:
        print("BLOCKED", host, type(e).__name__)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"hi", ("127.0.0.1", {port}))
"""
    r = run_program(code, limits=FAST)
    server.close()
    thread.join()
    assert "CONNECTED" not in r.stdout and r.stdout.count("BLOCKED") == 3
    assert seen == []


def test_environment_secrets_are_not_visible(monkeypatch):
    secret = "s3cr3t-" + uuid.uuid4().hex
    monkeypatch.setenv("ROLL_FAKE_API_KEY", secret)
    code = """
import os
print(dict(os.environ))
for p in ("/proc/self/environ", "/proc/1/environ", "/proc/2/environ"):
    try:
        print(open(p, "rb").read())
    except OSError as e:
        print(p, type(e).__name__)
"""
    r = run_program(code)
    assert r.ok and secret not in r.stdout and "ROLL_FAKE_API_KEY" not in r.stdout


def test_no_privileges_inside():
    code = """
import os, stat
print("uid", os.getuid())
dev = lambda: os.mknod("/sandbox/mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1))
for attempt in (lambda: os.setuid(0), lambda: os.chroot("/"), dev):
    try:
        attempt()
        print("ALLOWED")
    except OSError as e:
        print("DENIED", type(e).__name__)
"""
    r = run_program(code)
    assert r.ok and "ALLOWED" not in r.stdout and "uid 0" not in r.stdout


def test_infinite_loop_times_out():
    start = time.monotonic()
    r = run_program("while True:\n    pass", limits=SandboxLimits(wall_timeout_s=1.5))
    assert r.reason == "timeout" and time.monotonic() - start < 4


def test_sleeping_program_times_out_on_wall_clock():
    r = run_program("import time\ntime.sleep(60)", limits=SandboxLimits(wall_timeout_s=1))
    assert r.reason == "timeout" and r.wall_time_s < 3


def test_memory_bomb_is_stopped():
    code = "chunks = []\nwhile True:\n    chunks.append(b'x' * (32 << 20))"
    r = run_program(code, limits=FAST)
    assert r.reason == "memory"


def test_memory_bomb_across_processes_is_stopped():
    code = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        data = b"x" * (200 << 20)
        time.sleep(5)
        os._exit(0)
time.sleep(5)
"""
    r = run_program(code, limits=FAST)
    assert r.reason == "memory"  # the memory cgroup killed the children


def test_fork_bomb_is_contained():
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    start = time.monotonic()
    r = run_program(code, limits=SandboxLimits(wall_timeout_s=2, max_processes=16))
    assert r.reason in ("timeout", "killed") and time.monotonic() - start < 8


def test_killing_its_parent_or_everyone_hurts_only_itself():
    code = """
import os, signal
for target in (os.getppid(), 1, 0, -1):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as e:
        print(target, type(e).__name__)
"""
    r = run_program(code, limits=FAST)
    assert r.reason in ("ok", "killed")
    assert os.getpid() > 0  # this test process is alive to check it


def test_daemon_does_not_outlive_the_sandbox(tmp_path):
    code = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 100)
        time.sleep(60)
    os._exit(0)
print("parent done")
"""
    r = run_program(code, limits=FAST)
    assert r.ok and r.wall_time_s < 2.5  # not held up by the daemon's open pipes


def test_huge_output_is_truncated():
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n    sys.stderr.write('y' * 65536)"
    limits = SandboxLimits(max_output_bytes=100_000, wall_timeout_s=5)
    r = run_program(code, limits=limits)
    assert r.reason == "output_limit"
    assert len(r.stdout) <= 100_000 and len(r.stderr) <= 100_000 and r.wall_time_s < 3


def test_disk_is_bounded():
    code = "f = open('big', 'wb')\nwhile True:\n    f.write(b'z' * (1 << 20))"
    r = run_program(code, limits=SandboxLimits(disk_mb=8, max_file_mb=64))
    assert r.reason == "runtime_error" and "No space left" in r.detail
