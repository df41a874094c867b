"""Workers are plain Python classes (testable without Ray); `rollcli.distributed.cluster`
wraps them as Ray actors in one place."""
