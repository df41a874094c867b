"""Calling workers: the one small API every caller uses, over Ray actors and plain objects.

A method is named by reference (`EnvWorker.step`, `ActorInferWorker.generate`, or a
Protocol's method where the caller may not import the worker class), never by a string,
so a reader or a tool can follow a call into the worker. `submit` runs a method on a Ray
actor (it returns an object ref) or on a plain object (it runs at once and returns `Done`):
the schedulers run the same code in the pipeline (Ray) and in `roll eval` and unit tests
(plain objects). `wait_any`, `wait` and `get` take either kind of handle.

Ray is imported here and in the rest of `distributed/` only (and where the CLI starts a
session), always lazily: planning and the CLI's light commands never load it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rollcli.distributed.ray_session import running_ray

Method = Callable[..., Any]  # a worker method, unbound: `ActorTrainWorker.train_step`


def method_name(method: Method) -> str:
    """The attribute a Ray actor (or object) exposes `method` under."""
    if isinstance(method, str) or not callable(method):
        raise TypeError(f"name a worker method by reference (Worker.method), not {method!r}")
    return method.__name__


@dataclass(eq=False)  # hashed by identity, like Ray's object refs
class Done:
    """The result of a call on a plain object (it ran at once)."""

    value: Any


def submit(target: Any, method: Method, *args: Any, **kwargs: Any) -> Any:
    """`target.method(*args, **kwargs)`: an object ref on a Ray actor, `Done` on an object."""
    fn = getattr(target, method_name(method))
    if hasattr(fn, "remote"):
        return fn.remote(*args, **kwargs)
    return Done(fn(*args, **kwargs))


def submit_beside(target: Any, method: Method, *args: Any) -> Any:
    """As `submit`, in the actor's "monitor" concurrency group: it runs beside whatever the
    actor is busy with (`WorkerResources.monitor`)."""
    fn = getattr(target, method_name(method))
    return fn.options(concurrency_group="monitor").remote(*args)


def wait_any(handles: list[Any], timeout: float | None = None) -> list[Any]:
    """Handles that are finished: at least one (unless `timeout` passes), all that are."""
    done = [h for h in handles if isinstance(h, Done)]
    refs = [h for h in handles if not isinstance(h, Done)]
    if done or not refs:
        return done
    import ray

    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
    if ready:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return ready


def unfinished(handles: list[Any], timeout: float) -> list[Any]:
    """The handles still running after waiting up to `timeout` seconds for all of them."""
    refs = [h for h in handles if not isinstance(h, Done)]
    if not refs:
        return []
    import ray

    _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    return pending


def get(handle: Any) -> Any:
    """A handle's result (a list of handles: their results, in order)."""
    if isinstance(handle, list):
        if not any(isinstance(h, Done) for h in handle):
            import ray

            return ray.get(handle)
        return [get(h) for h in handle]
    if isinstance(handle, Done):
        return handle.value
    import ray

    return ray.get(handle)


def node_address() -> str | None:
    """This process's Ray node IP address, None outside a Ray session."""
    ray = running_ray()
    return ray.util.get_node_ip_address() if ray is not None else None


def node_and_gpus() -> tuple[str | None, list[str]]:
    """(the Ray node id, the GPU ids Ray assigned this process); (None, []) outside Ray."""
    ray = running_ray()
    if ray is None:
        return None, []
    return ray.get_runtime_context().get_node_id(), sorted(str(g) for g in ray.get_gpu_ids())
