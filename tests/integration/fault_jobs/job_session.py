"""The Spark session every fault job starts in its own process (a master cannot change inside a process): the job's
master and name, no UI, 2 shuffle partitions, a 1 GB driver, Python workers on the job's own interpreter, and any
extra Spark configuration the test passes."""

from __future__ import annotations

import os
import sys
from typing import Any


def job_session(master: str, app_name: str, conf: dict[str, str] | None = None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
