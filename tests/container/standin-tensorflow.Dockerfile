# Stand-in for nvcr.io/nvidia/tensorflow:25.02-tf2-py3, which cannot be pulled here: Debian's
# Python with TensorFlow 2.17.0 installed by pip into the system site-packages, as NVIDIA's
# image has it (under its pip name `tensorflow`), with the Keras of that release's time.
# It proves the install and the code on TF 2.17; not NVIDIA's build, CUDA, NCCL or Python 3.12.
ARG DEBIAN_IMAGE=pipeline-standin/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN python3 -m pip install --no-cache-dir --break-system-packages \
        tensorflow==2.17.0 keras==3.8.0
# The variables NVIDIA's image sets, which the project records as lineage.
ENV NVIDIA_TENSORFLOW_VERSION=25.02-tf2-py3 TENSORFLOW_VERSION=2.17.0
COPY standin-nvidia-entrypoint.sh /opt/nvidia/nvidia_entrypoint.sh
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
