# Stand-in for nvcr.io/nvidia/tensorflow:25.02-tf2-py3, which cannot be pulled here: Debian's
# Python with exactly the packages docker/ngc-base.txt lists (TensorFlow 2.17.0 under its pip
# name `tensorflow`, the Keras of that release's time) in the system site-packages, as NVIDIA's
# image has them. It proves the install and the code on TF 2.17; not NVIDIA's build, CUDA,
# NCCL or Python 3.12.
ARG DEBIAN_IMAGE=pipeline-standin/debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY ngc-base.txt /tmp/ngc-base.txt
RUN python3 -m pip install --no-cache-dir --break-system-packages --no-deps -r /tmp/ngc-base.txt \
    && rm /tmp/ngc-base.txt
# The variables NVIDIA's image sets, which the project records as lineage.
ENV NVIDIA_TENSORFLOW_VERSION=25.02-tf2-py3 TENSORFLOW_VERSION=2.17.0
COPY standin-nvidia-entrypoint.sh /opt/nvidia/nvidia_entrypoint.sh
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
