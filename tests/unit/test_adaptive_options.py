"""adaptiveThrottling and its knobs (issue 40): defaults, bounds, and errors that name the option. Off by default, and
then nothing of it reaches the parsed options (the rest of the unit tests run unchanged with it off)."""

from __future__ import annotations

import re

import pytest
from builders import URLS

from pulsar_throttled_source.credentials import BasicAuth
from pulsar_throttled_source.options import parse_options
from pulsar_throttled_source.quota_settings import AdaptiveConfig

BASE = {**URLS, "topic": "orders", "dispatchThrottlingRatePerTopicInMsg": "100"}


def parse(**extra: str):
    return parse_options({k.lower(): v for k, v in {**BASE, **extra}.items()})


def test_off_by_default_and_nothing_of_it_is_parsed():
    assert parse().adaptive is None
    assert parse(adaptiveThrottling="false").adaptive is None


def test_on_with_the_documented_defaults():
    assert parse(adaptiveThrottling="TRUE").adaptive == AdaptiveConfig(min_multiplier=0.1, decrease=0.5, increase=0.05,
                                                                       window_ms=10_000)


def test_knobs_are_percentages_and_a_duration():
    config = parse(adaptiveThrottling="true", adaptiveThrottlingMinPercent="25", adaptiveThrottlingDecreasePercent="30",
                   adaptiveThrottlingIncreasePercent="10", adaptiveThrottlingWindow="30s").adaptive
    assert config == AdaptiveConfig(min_multiplier=0.25, decrease=0.3, increase=0.1, window_ms=30_000)
    assert parse(adaptiveThrottling="true", adaptiveThrottlingWindow="2500").adaptive.window_ms == 2500
    assert parse(adaptiveThrottling="true").adaptive.publish_latency_ratio == 2.0
    assert parse(adaptiveThrottling="true", adaptiveThrottlingPublishLatencyPercent="50").adaptive.publish_latency_ratio == 1.5
    assert parse(adaptiveThrottling="true").adaptive.slow_start is True  # from the floor, doubling
    assert parse(adaptiveThrottling="true", adaptiveThrottlingSlowStart="false").adaptive.slow_start is False


@pytest.mark.parametrize("name,value,expected", [
    ("adaptiveThrottlingMinPercent", "0", "an integer percentage from 1 to 100"),
    ("adaptiveThrottlingMinPercent", "101", "an integer percentage from 1 to 100"),
    ("adaptiveThrottlingDecreasePercent", "100", "an integer percentage from 1 to 99"),
    ("adaptiveThrottlingPublishLatencyPercent", "5", "an integer percentage from 10 to 1000"),
    ("adaptiveThrottlingIncreasePercent", "0", "an integer percentage from 1 to 100"),
])
def test_out_of_bounds_names_the_option_and_the_range(name, value, expected):
    with pytest.raises(ValueError, match=re.escape(f"Option '{name}': {value} is not allowed; expected {expected}.")):
        parse(adaptiveThrottling="true", **{name: value})


def test_a_fraction_or_a_bad_window_names_the_option():
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingMinPercent': '0.2' is not an integer percentage")):
        parse(adaptiveThrottling="true", adaptiveThrottlingMinPercent="0.2")
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingWindow': '0' is not allowed; expected a positive duration")):
        parse(adaptiveThrottling="true", adaptiveThrottlingWindow="0")
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottling': 'yes' is not allowed; expected true or false.")):
        parse(adaptiveThrottling="yes")
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingSlowStart': 'off' is not allowed; expected true or false.")):
        parse(adaptiveThrottling="true", adaptiveThrottlingSlowStart="off")


def test_a_knob_without_the_switch_is_an_error_naming_it():
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingIncreasePercent' applies only with 'adaptiveThrottling'=true")):
        parse(adaptiveThrottlingIncreasePercent="10")


def test_the_switch_needs_a_quota_to_scale():
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottling': the controller scales the configured quotas, and none is set")):
        parse_options({**URLS, "topic": "orders", "adaptivethrottling": "true"})
    # Broker quotas are ceilings too: known only at run time.
    assert parse_options({**URLS, "topic": "orders", "adaptivethrottling": "true", "quotasource": "broker"}).adaptive is not None
    assert parse(adaptiveThrottling="true", dispatchThrottlingRateInByte="1000").adaptive is not None


def test_the_trigger_interval_turns_on_the_batch_duration_signal():
    assert parse(adaptiveThrottling="true").adaptive.trigger_interval_ms is None  # unset: that signal is off
    assert parse(adaptiveThrottling="true", adaptiveThrottlingTriggerInterval="5s").adaptive.trigger_interval_ms == 5000
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingTriggerInterval': '-1' is not allowed; "
                                                   "expected a positive duration")):
        parse(adaptiveThrottling="true", adaptiveThrottlingTriggerInterval="-1")
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingTriggerInterval' applies only with")):
        parse(adaptiveThrottlingTriggerInterval="5s")


def test_the_metrics_url_turns_on_the_publish_latency_signal():
    assert parse(adaptiveThrottling="true").adaptive.metrics_url is None
    url = parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="http://broker:8080/metrics/").adaptive.metrics_url
    assert url == "http://broker:8080/metrics"
    with pytest.raises(ValueError, match=re.escape("Option 'adaptiveThrottlingMetricsUrl': 'broker:8080' is not a valid URL")):
        parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="broker:8080")
    with pytest.raises(ValueError, match=re.escape("'ftp://scraper:***@broker:8080/metrics' is not a valid URL")) as bad:
        parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="ftp://scraper:pa55w0rd@broker:8080/metrics")
    assert "pa55w0rd" not in str(bad.value)


def test_the_metrics_urls_user_and_password_are_taken_out_of_it_at_parse_time():
    """A proxy in front of the metrics page may want a user and password: Spark hides the option (its name holds
    "url", spark.sql.redaction.options.regex); the source keeps them beside the URL, never in it."""
    o = parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="https://scraper:p@ss:w0rd@[2001:db8::7]:9443/metrics/")
    assert o.adaptive.metrics_url == "https://[2001:db8::7]:9443/metrics"
    assert o.adaptive.metrics_credentials == BasicAuth("scraper", "p@ss:w0rd")
    assert "w0rd" not in repr(o) and "w0rd" not in repr(o.adaptive)
    assert parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="http://b:8080/metrics").adaptive.metrics_credentials is None


def test_the_metrics_url_without_its_parser_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "prometheus_client" else real(name, *a))
    with pytest.raises(ValueError, match=re.escape("pip install 'pulsar-throttled-source[adaptive]'")):
        parse(adaptiveThrottling="true", adaptiveThrottlingMetricsUrl="http://broker:8080/metrics/")
