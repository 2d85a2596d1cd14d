# The project's image with the host's versions: every Python package exactly requirements.lock
# (TensorFlow 2.21, its Keras and NumPy), with the CUDA, cuDNN and NCCL wheels TensorFlow asks
# for (docker/cuda.lock), on NVIDIA's CUDA runtime. docker/Dockerfile is the other image, on
# NVIDIA's own TensorFlow build (docs/containers.md says when to use which).
#   docker build -f docker/cuda.Dockerfile --build-arg VERSION="$(git describe --always --dirty)" -t pipeline:cuda .
# Run it as docker/Dockerfile's image: the same entry point, user handling, flags and command.
ARG BASE_IMAGE=nvcr.io/nvidia/cuda:12.9.1-cudnn-runtime-ubuntu24.04
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
ARG VERSION=dev
# 0 leaves the CUDA wheels out: a CPU-only image, as the tests build on a stand-in base
ARG CUDA_WHEELS=1
LABEL org.opencontainers.image.title="pipeline-cuda" \
      org.opencontainers.image.description="Reuters and MNIST experiments with requirements.lock's TensorFlow on NVIDIA's CUDA runtime" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# NVIDIA's CUDA images have no Python and no git (DVC runs git): the distribution's.
# hadolint ignore=DL3008
RUN if ! python3 -m venv --help > /dev/null 2>&1 || ! command -v git > /dev/null; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv git ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# requirements.lock as the host installs it (make setup), hashes checked, nothing resolved
# anew; then the CUDA wheels, at the versions TensorFlow's and-cuda extra asks for.
ENV VIRTUAL_ENV=/opt/pipeline/venv
ENV PATH=${VIRTUAL_ENV}/bin:${PATH}
WORKDIR /opt/pipeline/src
COPY requirements.lock docker/cuda.lock /opt/pipeline/
RUN python3 -m venv "${VIRTUAL_ENV}" \
    && pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
       -r /opt/pipeline/requirements.lock \
    && if [ "${CUDA_WHEELS}" = 1 ]; then \
           pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps \
           -r /opt/pipeline/cuda.lock; \
       fi \
    && pip check

COPY pyproject.toml README.md ./
COPY pipeline/ pipeline/
COPY stages/ stages/
RUN pip install --no-cache-dir --disable-pip-version-check --no-deps . \
    && pip check \
    && rm -rf build ./*.egg-info

# As docker/Dockerfile: the mounted clone trusted by git, a writable HOME for any uid.
RUN git config --system --add safe.directory /workspace/project \
    && mkdir -p /home/pipeline /workspace/project \
    && chmod 1777 /home/pipeline
ENV HOME=/home/pipeline \
    USER=pipeline \
    MPLCONFIGDIR=/home/pipeline/.config/matplotlib \
    PIPELINE_IMAGE=pipeline-cuda:${VERSION}

COPY docker/entrypoint.sh /usr/local/bin/pipeline-entrypoint
WORKDIR /workspace/project
ENTRYPOINT ["/usr/local/bin/pipeline-entrypoint"]
CMD ["dvc", "repro"]
