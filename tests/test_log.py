"""What a user reads: TensorFlow's start-up lines kept out of a normal run and shown with -v,
one format for notes, warnings and errors."""

import pytest
from support.processes import run_pipeline
from support.project import write_params

# what a process prints while it imports TensorFlow is what these tests read
pytestmark = pytest.mark.cold_start

# Lines TensorFlow 2.21 writes on this kind of host (the CUDA-enabled wheel, no NVIDIA driver),
# and in NVIDIA's container, before TF_CPP_MIN_LOG_LEVEL applies.
START_UP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795426029.405233   18891 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
    "GPU will not be used.",
    "E0000 00:00:1795426036.395787   18891 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "2025-09-17 14:44:05.176998: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:467] Unable to "
    "register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered",
    "2024-06-28 00:03:52.491725: I tensorflow/core/util/port.cc:110] oneDNN custom operations are on.",
]
KEPT = [
    "E0000 00:00:1795426036.395787   18891 gpu_device.cc:2020] Cannot dlopen some GPU libraries.",
    "W0000 00:00:1795426036.395787   18891 bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out of memory",
    "error: params.yaml: train.reuters.batch_size_per_replica: expected a positive integer, got 0",
    "Fatal Python error: Segmentation fault",
]


@pytest.mark.parametrize("line", START_UP)
def test_start_up_lines_are_noise(line):
    from pipeline.log import native_noise

    assert native_noise(line)


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_pass(line):
    from pipeline.log import native_noise

    assert not native_noise(line)


@pytest.mark.slow
def test_a_normal_run_shows_no_start_up_lines_and_verbose_shows_them(tmp_path):
    write_params(tmp_path)
    quiet = run_pipeline("devices", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert "strategy: DefaultStrategy" in quiet.stdout
    verbose = run_pipeline("-v", "devices", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    # this host's TensorFlow is the CUDA-enabled wheel, and there is no NVIDIA driver
    assert "Could not find cuda drivers" in verbose.stderr
    assert verbose.stdout == quiet.stdout


@pytest.mark.slow
def test_quiet_hides_the_result_line(tmp_path):
    write_params(tmp_path)
    result = run_pipeline("-q", "devices", "--json", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert '"strategy": "DefaultStrategy"' in result.stdout  # asked-for output still printed


def test_errors_are_one_line_in_one_format(tmp_path):
    write_params(tmp_path, {"train.reuters.batch_size_per_replica": 0})
    for flags in ([], ["-q"], ["-v"]):
        result = run_pipeline(*flags, "devices", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr == (
            "error: params.yaml: train.reuters.batch_size_per_replica: expected a positive integer, got 0\n"
        ), flags
