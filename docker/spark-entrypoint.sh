#!/usr/bin/env bash
# Entrypoint of the compose `spark` service: install the package from the mounted repo,
# produce a sample backlog (SAMPLE_MESSAGES > 0), then spark-submit "$@" with PySpark >= 4.2.
set -euo pipefail

# The repo is mounted read-only; build from a copy of what the package needs.
rm -rf /tmp/src && mkdir -p /tmp/src
cp -r /workspace/pyproject.toml /workspace/README.md /workspace/LICENSE /workspace/NOTICE /workspace/pyspark_pulsar_throttled.py \
  /workspace/pulsar_throttled_source /tmp/src/
# PIP_BREAK_SYSTEM_PACKAGES: the container is disposable; newer pips refuse system installs without it.
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --no-cache-dir "/tmp/src[spark]"

# Use the pip-installed PySpark (>= 4.2), not the image's /opt/spark (4.0.x).
unset PYTHONPATH
export SPARK_HOME="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
export PYSPARK_PYTHON=python3 PYSPARK_DRIVER_PYTHON=python3
echo "PySpark $(python3 -c 'import pyspark; print(pyspark.__version__)') from ${SPARK_HOME}"

if [ "${SAMPLE_MESSAGES:-0}" -gt 0 ]; then
  python3 /workspace/docker/produce_sample.py
fi

exec "${SPARK_HOME}/bin/spark-submit" --master "local[2]" --conf spark.ui.enabled=false "$@"
