# A second stand-in for nvcr.io/nvidia/tensorflow:25.02-tf2-py3, imitating NVIDIA's image where
# it differs from docker/ngc-base.txt, the list the first stand-in installs exactly: Python 3.12,
# packages the list does not have (a JupyterLab set), packages the project also needs at versions
# other than docker/ngc.lock's, and TensorFlow under NVIDIA's kind of local version
# (py312-standin.txt). docker/Dockerfile must build on it by resolving what the project adds
# against these packages. Python is pyenv's 3.12.1, built on Debian bookworm like this rootfs,
# at the prefix it was built for (its libpython is found through that path).
ARG DEBIAN_IMAGE=pipeline-standin/debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY python3.12 /root/.pyenv/versions/3.12.1
COPY py312-standin.txt /tmp/packages.txt
RUN chmod 0755 /root \
    && ln -s /root/.pyenv/versions/3.12.1/bin/python3.12 /usr/local/bin/python3 \
    && ln -s /root/.pyenv/versions/3.12.1/bin/python3.12 /usr/local/bin/python \
    && ln -s /root/.pyenv/versions/3.12.1/bin/pip3.12 /usr/local/bin/pip3 \
    && ln -s /root/.pyenv/versions/3.12.1/bin/pip3.12 /usr/local/bin/pip \
    && python3 -m pip install --no-cache-dir --disable-pip-version-check --no-deps -r /tmp/packages.txt \
    && rm /tmp/packages.txt \
    && tf=/root/.pyenv/versions/3.12.1/lib/python3.12/site-packages/tensorflow-2.17.0 \
    && mv "$tf.dist-info" "$tf+nv25.2.dist-info" \
    && sed -i 's/^Version: 2\.17\.0$/Version: 2.17.0+nv25.2/' "$tf+nv25.2.dist-info/METADATA"
ENV NVIDIA_TENSORFLOW_VERSION=25.02-tf2-py3 TENSORFLOW_VERSION=2.17.0
COPY standin-nvidia-entrypoint.sh /opt/nvidia/nvidia_entrypoint.sh
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
