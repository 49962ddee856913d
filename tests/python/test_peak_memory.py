"""tmm.peak_memory: the peak of a block, measured (CI runs on Linux, where
the resident-set high-water mark can be reset)."""
import torch

from tmm.peak_memory import PeakMemory


def test_cpu_peak_counts_what_the_block_allocated_and_resets():
    with PeakMemory("cpu") as big:
        x = torch.ones(64 * 2 ** 20)  # 256 MiB, touched
        del x
    assert big.increase_mib is not None and 250 <= big.increase_mib < 400, big.increase_mib
    assert big.peak_mib >= big.increase_mib
    with PeakMemory("cpu") as small:  # the 256 MiB peak before does not count
        torch.ones(1000).sum()
    assert small.increase_mib < 50, small.increase_mib


def test_a_device_it_cannot_measure_gives_none():
    with PeakMemory("meta") as mem:
        torch.ones(10, device="meta")
    assert mem.peak_mib is None and mem.increase_mib is None
