"""Packaging for pulsar_throttled_source: the single source of the project's metadata."""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="pulsar-throttled-source",
    version="0.1.0",
    description="A throttled Apache Pulsar streaming source for PySpark Structured Streaming (Python DataSource V2).",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["pulsar_throttled_source", "pulsar_throttled_source.*"]),
    # Top-level module so PySpark auto-registers the "pulsar-throttled" format.
    py_modules=["pyspark_pulsar_throttled"],
    package_data={"pulsar_throttled_source": ["broker/pom.xml", "broker/maven-settings.xml"]},
    include_package_data=True,
    install_requires=[
        "pyspark>=4.2,<5",  # 4.2: first release with admission control for Python streaming sources
        "pyarrow>=15",
        "pulsar-client>=3.5",
        "requests>=2.31",
        "tenacity>=8.2",  # the retry policy (pulsar_throttled_source/retry.py)
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "pandas>=2",
            "matplotlib>=3.8",
            "nbclient>=0.10",
            "nbformat>=5.9",
            "ipykernel>=6",
            "pyyaml>=6",
        ],
        "notebook": ["matplotlib>=3.8", "pandas>=2", "jupyter"],
        "bench": ["matplotlib>=3.8", "pandas>=2", "psutil>=5.9"],
    },
    entry_points={"console_scripts": ["pulsar-local-broker=pulsar_throttled_source.local_broker:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Framework :: Apache Spark",
        "License :: OSI Approved :: Apache Software License",
    ],
)
