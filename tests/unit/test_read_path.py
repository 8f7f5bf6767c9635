"""Which read path a task takes (option readPath), with a stand-in for the native library's load
result: the library itself is exercised against a real broker in test_native_read.py."""

from __future__ import annotations

import logging

import pytest
from builders import URLS

from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.read_task import ClientConfig
from pulsar_throttled_source.reading import read_path
from pulsar_throttled_source.reading.native_library import NativeLibrary
from pulsar_throttled_source.reading.native_reader import unsupported_settings


def config(read: str = "auto", client: tuple = (), reader: tuple = ()) -> ClientConfig:
    return ClientConfig("pulsar://broker:6650", client, reader, None, 1000, 100, read_path=read)


@pytest.fixture
def library(monkeypatch):
    monkeypatch.setattr(read_path, "_WARNED", set())

    def loaded(available: bool, reason: str = "") -> None:
        settings = (frozenset({"operation_timeout_seconds"}), frozenset({"receiver_queue_size", "reader_name"}))
        monkeypatch.setattr(read_path, "native_library",  # type: ignore[arg-type]
                            lambda: NativeLibrary(object() if available else None, reason, None, None, *settings))
    return loaded


def test_auto_takes_the_native_path_where_the_library_loaded(library):
    library(True)
    assert read_path.uses_native_path(config("auto")) and read_path.uses_native_path(config("native"))
    assert not read_path.uses_native_path(config("python"))


def test_auto_falls_back_with_one_warning_per_reason_and_native_fails_naming_it(library, caplog):
    library(False, "the package pulsar-throttled-source-native is not installed")
    caplog.set_level(logging.WARNING, logger=read_path.__name__)
    assert not read_path.uses_native_path(config("auto"))
    assert not read_path.uses_native_path(config("auto"))
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["Reading with the Python read path (readPath=auto): the package pulsar-throttled-source-native is not installed."]
    with pytest.raises(read_path.NativeReadPathUnavailable,
                       match="Option 'readPath' is 'native' but the native read path is unavailable: the package "
                             "pulsar-throttled-source-native is not installed. Install"):
        read_path.uses_native_path(config("native"))


def test_settings_the_c_api_cannot_apply_keep_the_query_on_the_python_path(library, caplog):
    library(True)
    caplog.set_level(logging.WARNING, logger=read_path.__name__)
    assert read_path.uses_native_path(config(client=(("operation_timeout_seconds", 10), ("use_tls", False)),
                                             reader=(("receiver_queue_size", 5),)))
    odd = config(client=(("connection_timeout_ms", 5000),), reader=(("reader_name", "r"),))
    assert unsupported_settings(read_path.native_library(), odd.client_kwargs, odd.reader_kwargs) == [
        "pulsar.client.connection_timeout_ms"]
    assert not read_path.uses_native_path(odd)
    assert "cannot apply pulsar.client.connection_timeout_ms" in caplog.records[0].getMessage()
    with pytest.raises(read_path.NativeReadPathUnavailable, match="pulsar.client.connection_timeout_ms"):
        read_path.uses_native_path(config("native", client=(("connection_timeout_ms", 5000),)))


def test_the_read_path_option():
    assert parse_options({**URLS, "topic": "t"}).read_path == "auto"
    assert parse_options({**URLS, "topic": "t", "readpath": "python"}).read_path == "python"
    with pytest.raises(ValueError, match="readPath.*'fast'.*auto, native, python"):
        parse_options({**URLS, "topic": "t", "readpath": "fast"})


def test_the_planner_says_which_path_tasks_take_and_native_fails_at_load(library):
    library(True)
    assert read_path.describe_read_path("auto", (), ()) == "the native read path (readPath=auto)"
    assert read_path.describe_read_path("python", (), ()) == "the Python read path (readPath=python)"
    library(False, "no libpulsar found in the pulsar-client installation")
    assert read_path.describe_read_path("auto", (), ()) == ("the Python read path (readPath=auto): no libpulsar found in the "
                                                            "pulsar-client installation")
    with pytest.raises(read_path.NativeReadPathUnavailable, match="no libpulsar found"):
        read_path.describe_read_path("native", (), ())
