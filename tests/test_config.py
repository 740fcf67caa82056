import pytest

from goodputlab.engine.config import RunConfig
from goodputlab.errors import ConfigError


def test_defaults_are_valid_and_round_trip():
    c = RunConfig()
    assert RunConfig.from_dict(c.to_dict()) == c
    assert c.pipeline_depth == 0


def test_pipeline_depth_is_workers_times_prefetch():
    assert RunConfig(workers=3, prefetch=4).pipeline_depth == 12
    assert RunConfig(workers=2).pipeline_depth == 4  # PyTorch's default prefetch is 2


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("steps", 0, ">= 1"),
        ("steps", 2.5, "whole number"),
        ("ckpt_every", -5, ">= 0"),
        ("ckpt_every_s", 0.0, "> 0"),
        ("mtbf", -1.0, ">= 0"),
        ("mtbf", float("nan"), ">= 0"),
        ("model", "huge", "tiny"),
        ("device", "tpu", "cuda"),
        ("keep", 0, ">= 1"),
        ("max_failures", -1, ">= 0"),
        ("workers", -1, "between 0 and"),
        ("io_latency_ms", -3.0, "between 0 and"),
        ("io_jitter", 7.0, "between 0 and 3"),
        ("transform_ms", -1.0, "between 0 and"),
        ("restart_delay", -0.1, "between 0 and"),
        ("ckpt", "lazy", "sync"),
    ],
)
def test_bad_values_name_the_field_value_and_range(field, value, fragment):
    with pytest.raises(ConfigError) as e:
        RunConfig(**{field: value})
    assert e.value.field == field
    assert e.value.value == value or value != value  # NaN is not equal to itself
    assert fragment in e.value.allowed


def test_prefetch_without_workers_is_refused():
    with pytest.raises(ConfigError) as e:
        RunConfig(workers=0, prefetch=2)
    assert e.value.field == "prefetch" and "--workers" in e.value.allowed


def test_persistent_workers_need_workers():
    with pytest.raises(ConfigError) as e:
        RunConfig(persistent_workers=True)
    assert e.value.field == "persistent_workers"


def test_kill_steps_must_lie_inside_the_run():
    with pytest.raises(ConfigError) as e:
        RunConfig(steps=10, kill_at_steps=(5, 10))
    assert e.value.field == "kill_at_steps" and e.value.value == 10


def test_unknown_setting_in_a_saved_config():
    with pytest.raises(ConfigError) as e:
        RunConfig.from_dict({"steps": 5, "ckpt_evry": 3})
    assert e.value.field == "ckpt_evry"
