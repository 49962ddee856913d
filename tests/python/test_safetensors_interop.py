"""tmm.io.safetensors' C++ safetensors reader/writer against the `safetensors` package,
both ways, for every dtype tmm supports."""

import json
import struct

import pytest
import torch

safetensors = pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file as st_load  # noqa: E402
from safetensors.torch import save_file as st_save  # noqa: E402

from tmm.io.safetensors import load_file, save_file  # noqa: E402

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
METADATA = {"config": json.dumps({"d_model": 8, "arch": "tmm"}), "format": "pt"}


def sample(dtype, *shape):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float64).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -100, 100, shape).to(dtype)


def tensors_of(dtype):
    return {
        "matrix": sample(dtype, 3, 5),
        "scalar": sample(dtype),
        "empty": sample(dtype, 0, 4),
        "layers.0.weight": sample(dtype, 2, 3, 4),
    }


def assert_same(got, expected):
    assert got.keys() == expected.keys()
    for name, t in expected.items():
        assert got[name].dtype == t.dtype, name
        assert got[name].shape == t.shape, name
        assert torch.equal(got[name], t), name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tmm_writes_safetensors_reads(tmp_path, dtype):
    path = tmp_path / "m.safetensors"
    tensors = tensors_of(dtype)
    tensors["transposed"] = sample(dtype, 4, 3).t()  # saved as a contiguous copy
    save_file(tensors, path, METADATA)
    assert_same(st_load(path), {k: v.contiguous() for k, v in tensors.items()})
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == METADATA


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_safetensors_writes_tmm_reads(tmp_path, dtype):
    path = tmp_path / "m.safetensors"
    tensors = tensors_of(dtype)
    st_save(tensors, str(path), metadata=METADATA)
    got, metadata = load_file(path)
    assert_same(got, tensors)
    assert metadata == METADATA


def test_mixed_dtypes_both_ways(tmp_path):
    # Several item sizes in one file: each writer orders the data its own way.
    tensors = {f"t{i}.{str(d)[6:]}": sample(d, 3, i + 1) for i, d in enumerate(DTYPES)}
    save_file(tensors, tmp_path / "a.safetensors")
    assert_same(st_load(tmp_path / "a.safetensors"), tensors)
    st_save(tensors, str(tmp_path / "b.safetensors"))
    got, metadata = load_file(tmp_path / "b.safetensors")
    assert_same(got, tensors)
    assert metadata == {}


def test_header_is_padded_and_aligned(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"u": torch.zeros(3, dtype=torch.uint8), "d": torch.zeros(2, dtype=torch.float64)}, path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}")
    header = json.loads(raw[8:8 + n])
    assert header["d"]["data_offsets"] == [0, 16]  # F64 first: aligned
    assert header["u"]["data_offsets"] == [16, 19]


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "m.safetensors"
    st_save({"w": torch.ones(16)}, str(path))
    path.write_bytes(path.read_bytes()[:-4])  # truncated
    with pytest.raises(RuntimeError, match=r"m\.safetensors'.*tensor 'w'.*out of bounds"):
        load_file(path)
    with pytest.raises(RuntimeError, match="is given twice|reserved"):
        save_file({"__metadata__": torch.ones(1)}, path)
    with pytest.raises(TypeError):
        save_file({"w": [1.0]}, path)


def test_atomic_write_leaves_no_temporary(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(4)}, path)
    save_file({"w": torch.zeros(8)}, path)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]
    assert torch.equal(load_file(path)[0]["w"], torch.zeros(8))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_saved_from_the_host_copy(tmp_path):
    t = torch.randn(5, 7, device="cuda").t()
    save_file({"w": t}, tmp_path / "m.safetensors")
    assert torch.equal(st_load(tmp_path / "m.safetensors")["w"], t.cpu())
