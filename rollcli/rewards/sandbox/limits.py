"""Resource limits for one sandboxed program, with safe defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    """What one program may use. Defaults suit a HumanEval/MBPP-sized task.

    >>> SandboxLimits().wall_timeout_s
    10.0
    >>> SandboxLimits(memory_mb=256).memory_mb
    256
    """

    wall_timeout_s: float = 10.0
    """Wall-clock limit; the whole sandbox is killed when it passes."""
    cpu_time_s: int = 10
    """CPU seconds per process (RLIMIT_CPU); SIGXCPU then SIGKILL one second later."""
    memory_mb: int = 1024
    """Address space per process (RLIMIT_AS) and, where a memory cgroup works,
    the resident memory of the whole sandbox."""
    max_processes: int = 32
    """Processes and threads (cgroup ``pids.max`` and RLIMIT_NPROC)."""
    max_open_files: int = 64
    """File descriptors per process (RLIMIT_NOFILE)."""
    max_output_bytes: int = 256 * 1024
    """Bytes kept from stdout and from stderr each; more stops the program."""
    max_file_mb: int = 16
    """Largest file the program may write (RLIMIT_FSIZE)."""
    disk_mb: int = 64
    """Size of the private writable folder (a tmpfs) where namespaces work."""
    allow_weak_isolation: bool = False
    """Run even where no network and mount namespaces can be made (then only
    rlimits, a clean environment and a temp folder apply). Off by default."""
    python: str | None = None
    """Interpreter to run; default: the base interpreter behind ``sys.executable``."""
    extra_ro_paths: tuple[str, ...] = ()
    """More host paths to expose read-only (for example a data folder)."""

    def __post_init__(self) -> None:
        for name in ("wall_timeout_s", "cpu_time_s", "memory_mb", "max_processes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be positive")
        if self.max_processes < 2:
            raise ValueError("SandboxLimits.max_processes must be at least 2")
