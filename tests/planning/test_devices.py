import pytest

from rollcli.planning.devices import (
    GPU_KINDS,
    PlanError,
    format_indices,
    gpu_memory,
    parse_device_mapping,
)

GiB = 1024**3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0-7", list(range(8))),
        ("0,1,2", [0, 1, 2]),
        ([0, 1, 2, 3], [0, 1, 2, 3]),
        ("0-2, 5,7", [0, 1, 2, 5, 7]),
        ("3", [3]),
        ("cpu", "cpu"),
        ("CPU", "cpu"),
    ],
)
def test_parse_device_mapping(value, expected):
    assert parse_device_mapping(value, total_gpus=8) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0-8", "uses GPU 8 but the cluster has 8 GPU(s)"),
        ([0, 9], "--gpus 10"),
        ("", "is empty"),
        ([], "is empty"),
        ("0,1,1", "lists GPU 1 more than once"),
        ("0-3,2", "lists GPU 2 more than once"),
        ("7-0", "reversed range '7-0'; write '0-7'"),
        ("0,,1", "empty item"),
        ("gpu0", "unreadable item 'gpu0'"),
        ([0, "1"], "must hold integers"),
    ],
)
def test_parse_device_mapping_errors(value, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        parse_device_mapping(value, total_gpus=8)
    assert repr(value) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_gpu_mapping_without_gpus_points_to_cpu():
    with pytest.raises(PlanError, match="use 'cpu' or pass --gpus N"):
        parse_device_mapping("0-1", total_gpus=0)


def test_format_indices_inverts_parsing():
    assert format_indices([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_device_mapping(format_indices([0, 1, 2, 5]), total_gpus=8) == [0, 1, 2, 5]


def test_gpu_memory():
    assert gpu_memory("a100-80g") == 80 * GiB
    assert gpu_memory("A100-40G") == 40 * GiB
    assert gpu_memory("h100") == GPU_KINDS["h100-80g"]
    assert gpu_memory("48GiB") == 48 * GiB
    assert gpu_memory("24gb") == 24 * GiB
    assert gpu_memory(12345) == 12345
    for kind in ("h100-80g", "h200", "a100-80g", "a100-40g", "l40s", "a10g", "4090"):
        assert kind in GPU_KINDS
    with pytest.raises(PlanError, match="unknown GPU kind 'a100'.*a100-80g"):
        gpu_memory("a100")
    with pytest.raises(PlanError):
        gpu_memory(0)
