"""The [detect] table of a TOML file, loadable from Python (not only by the CLI's --config)."""

from __future__ import annotations

import pytest

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.config_file import load_detect_config
from stethoscope.errors import InputError


def test_a_library_user_loads_the_file_the_cli_reads(tmp_path):
    path = tmp_path / "stethoscope.toml"
    path.write_text("[detect]\nspike_sigma = 8\nwarmup_steps = 2000\n")
    config = load_detect_config(str(path))
    assert config == DetectConfig.from_mapping({"spike_sigma": 8, "warmup_steps": 2000})
    assert load_detect_config(path).spike_sigma == 8.0


@pytest.mark.parametrize("text, problem", [
    ("[detect\n", "not valid TOML"),
    ("[other]\nx = 1\n", "no [detect] table"),
    ("[detect]\nspike_sigmaa = 8\n", "[detect]: "),
])
def test_a_bad_file_is_an_input_error_naming_it(tmp_path, text, problem):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=str(path)) as info:
        load_detect_config(path)
    assert problem in str(info.value) and info.value.exit_code == 2


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_detect_config(tmp_path / "missing.toml")
