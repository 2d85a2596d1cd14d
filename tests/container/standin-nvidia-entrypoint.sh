#!/bin/bash
# Like NVIDIA's entrypoint: a banner, then the command.
echo "== TensorFlow (stand-in for NVIDIA Release ${NVIDIA_TENSORFLOW_VERSION}) =="
exec "$@"
