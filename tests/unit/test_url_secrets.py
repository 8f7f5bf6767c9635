"""Passwords in URLs and error texts: redacted / without_userinfo / userinfo for any legal URL (a password holding
':' or '@', IPv6 hosts, ports, percent-encoding), the one scrub of free texts, and the read tasks' error boundary
(reading/read.py: both read paths) that passes every error through it; no pass-through setting in a task's repr."""

from __future__ import annotations

import pytest

from pulsar_throttled_source.admin_endpoint import AdminEndpoint, redacted, userinfo, without_userinfo
from pulsar_throttled_source.credentials import BasicAuth, TokenAuth, scrub
from pulsar_throttled_source.positions import EntryPosition
from pulsar_throttled_source.read_task import ClientConfig, PackedRanges, PartitionRange
from pulsar_throttled_source.reading import read as read_mod

URLS = [  # url, redacted, without user-info, (user, password)
    ("redis://:pw@host:6379/0", "redis://:***@host:6379/0", "redis://host:6379/0", (None, "pw")),
    ("redis://:p@ss:w@rd@host:6379/0", "redis://:***@host:6379/0", "redis://host:6379/0", (None, "p@ss:w@rd")),
    ("https://user:a:b@[2001:db8::1]:8443/x?y=a@b#f", "https://user:***@[2001:db8::1]:8443/x?y=a@b#f",
     "https://[2001:db8::1]:8443/x?y=a@b#f", ("user", "a:b")),
    ("http://[::1]:8080/a@b", "http://[::1]:8080/a@b", "http://[::1]:8080/a@b", (None, None)),
    ("http://reader@host", "http://reader@host", "http://host", ("reader", None)),
    ("http://reader:@host:80", "http://reader:***@host:80", "http://host:80", ("reader", "")),
    ("rediss://us%40er:pa%3Ass%40@h:1", "rediss://us%40er:***@h:1", "rediss://h:1", ("us@er", "pa:ss@")),
    ("http://host:8080/metrics", "http://host:8080/metrics", "http://host:8080/metrics", (None, None)),
    ("not a url", "not a url", "not a url", (None, None)),
]


@pytest.mark.parametrize("url,shown,bare,info", URLS, ids=[u[0] for u in URLS])
def test_a_urls_password_is_found_and_hidden_whatever_it_holds(url, shown, bare, info):
    assert redacted(url) == shown and without_userinfo(url) == bare and userinfo(url) == info


def test_scrub_hides_the_credentials_secrets_and_every_urls_password_in_a_text():
    text = ("cannot reach http://u:p@ss@h:1/x or redis://:x:y@[::1]:6379 (http://h:8080/a@b); "
            "token eyJ.payload.sig and pw s3cret")
    assert scrub(text, TokenAuth(token="eyJ.payload.sig"), BasicAuth("u", "s3cret"), None) == (
        "cannot reach http://u:***@h:1/x or redis://:***@[::1]:6379 (http://h:8080/a@b); token *** and pw ***")


def test_a_read_tasks_error_leaves_scrubbed_on_either_read_path(monkeypatch):
    """Whatever a read raises (a client's error quoting a token or a URL with a password, chained errors) keeps its
    type and leaves the task without them: Spark shows the whole traceback in the query's error and logs."""
    token, admin_password = "eyJhbGciOiJIUzI1NiJ9.e30.s1gnature", "adm1n-pw"
    config = ClientConfig("pulsar://broker:6650", (("tls_trust_certs_file_path", "/ca-s3cret-path.pem"),), (),
                          TokenAuth(token=token), 1000, 100,
                          admin=AdminEndpoint("http://broker:8080", BasicAuth("admin", admin_password)))
    part = PartitionRange("persistent://public/default/t", -1, EntryPosition(1, 0), EntryPosition(1, 9), 9, config)
    assert "s3cret-path" not in repr(part) and token not in repr(part) and admin_password not in repr(part)

    class ClientError(Exception):
        pass

    def failing_read(_part):
        try:
            raise OSError(f"connect to http://reader:{admin_password}@broker:8080 refused")
        except OSError as cause:
            raise ClientError(f"authentication with {token} failed") from cause
        yield  # a generator, as read_range is

    monkeypatch.setattr(read_mod, "read_range", failing_read)
    for task in (part, PackedRanges((part, part))):
        with pytest.raises(ClientError) as error:
            list(read_mod.read_ranges(task))
        assert str(error.value) == "authentication with *** failed"
        assert str(error.value.__cause__) == "connect to http://reader:***@broker:8080 refused"
