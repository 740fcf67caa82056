"""The workload: a real task whose loss falls, at sizes from CI to GPU."""

import numpy as np
import pytest
import torch

from goodputlab.engine.config import RunConfig
from goodputlab.measure.events import NullWriter
from goodputlab.training.model import GPT, count_params, state_sha256
from goodputlab.training.workload import PRESETS, MarkovSource, uniform_loss
from goodputlab.engine.worker import train


def test_source_is_seeded_and_far_from_uniform():
    a, b = MarkovSource.make(1), MarkovSource.make(1)
    assert np.array_equal(a.sample(50, 20, seed=2), b.sample(50, 20, seed=2))
    assert not np.array_equal(a.sample(50, 20, seed=2), a.sample(50, 20, seed=3))
    assert 0.3 < a.entropy_nats < uniform_loss(64) - 2  # plenty for a model to learn


def test_samples_follow_the_source_transitions():
    src = MarkovSource.make(0)
    seqs = src.sample(200, 30, seed=0)
    for s in seqs[:20]:
        for t in range(2, len(s)):
            assert s[t] in src.successors[s[t - 2], s[t - 1]]


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_parameter_counts(name):
    p = PRESETS[name]
    with torch.device("meta"):
        model = GPT(p)
    assert count_params(model) == p.n_params


def test_a_preset_for_gpus_has_at_least_100m_parameters():
    assert max(p.n_params for p in PRESETS.values()) >= 100_000_000


def test_the_loss_falls_measurably(tmp_path):
    config = RunConfig(steps=150, ckpt_every=0, seed=0)
    result = train(config, tmp_path, NullWriter())
    assert result["final_loss"] < 0.6 * uniform_loss(64)  # from ln(64) = 4.16 to below 2.5


def test_training_is_deterministic(tmp_path):
    config = RunConfig(steps=20, ckpt_every=0, seed=4)
    a = train(config, tmp_path / "a", NullWriter())
    b = train(config, tmp_path / "b", NullWriter())
    c = train(config.replace(seed=5), tmp_path / "c", NullWriter())
    assert a == b
    assert a["final_state_sha256"] != c["final_state_sha256"]


def test_state_hash_sees_a_single_bit():
    torch.manual_seed(0)
    m = GPT(PRESETS["tiny"])
    h = state_sha256(m)
    with torch.no_grad():
        w = m.blocks[0].mlp[0].weight
        w.view(-1).view(torch.int32)[7] ^= 1
    assert state_sha256(m) != h
