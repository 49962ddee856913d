"""Retention's capacity measure on a case whose answer is known, in both
decoder modes: 8 random tokens out of 4 (16 bits) through one vector of a
trainable tiny TMM must come back almost whole, and through the zero vector
not at all (its optimum, the uniform guess, is exactly 0 bits). A harness
that leaked the input past the bottleneck would give the zero vector bits; one
that cut the encoder off, or a bits measure off by a factor, would fail the
TMM. The setting was chosen on both modes (300 steps of batch 16 at lr 3e-3:
TMM 15.8 and 14.0 of 16 bits, the zero vector -0.02)."""
import math

import pytest

from lab.experiments.retention import RetentionSettings, run_retention

N, VOCAB, STEPS = 8, 4, 300
MOST = 0.75  # of the window's bits, for the TMM
NONE = 0.5  # bits, at most, for the zero vector


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["batchnorm", "authors"])
def test_a_trainable_tmm_recovers_most_bits_and_the_zero_vector_none(mode, tmp_path, restore_threads):
    result = run_retention(RetentionSettings(
        modes=["capacity"], mode=mode, configs="tmm-tiny", source="random", random_vocab=VOCAB, n=N, steps=STEPS,
        batch_size=16, lr=3e-3, threads=1, no_progress=True, out=str(tmp_path), final_eval_batches=16,
        eval_batches=2))
    bits = {row["arch"]: row["bits_recovered"] for row in result.table}
    full = N * math.log2(VOCAB)
    assert bits["tmm"] > MOST * full, bits
    assert abs(bits["none"]) < NONE, bits
