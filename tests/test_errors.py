"""Expected failures: their exit codes, and one `error:` line from the command."""

import pytest

from helpers import run_pipeline, write_params
from pipeline import errors


@pytest.mark.parametrize("cls,code", [(errors.ConfigError, 2), (errors.DataError, 1),
                                      (errors.DownloadError, 1), (errors.TrackingError, 1)])
def test_exit_codes_usage_and_config_2_data_1(cls, code):
    assert issubclass(cls, errors.PipelineError) and cls("x").exit_code == code


def test_a_data_error_is_one_line_and_exit_1(tmp_path):
    write_params(tmp_path)
    result = run_pipeline("preprocess", "reuters", "--raw", tmp_path / "nothing", "--out", tmp_path / "out",
                          cwd=tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert str(tmp_path / "nothing") in result.stderr
    assert not (tmp_path / "out").exists()  # nothing half-written
