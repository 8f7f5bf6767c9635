"""Authentication options (options/auth.py): every method Pulsar's clients offer, under the Java client's plugin
class names and parameter formats users copy from pulsar-spark, mapped to what pulsar-client-cpp's plugins take;
clear errors that name the option and never show a secret."""

from __future__ import annotations

import base64
import json

import pytest
from builders import URLS

from pulsar_throttled_source.credentials import AthenzAuth, BasicAuth, OAuth2Auth, TlsAuth, TokenAuth, scrub
from pulsar_throttled_source.options import parse_options

TOPIC = "persistent://public/default/t"
JAVA = "org.apache.pulsar.client.impl.auth."


def parse(**opts: str):
    return parse_options({**URLS, "topic": TOPIC, **{k.lower(): v for k, v in opts.items()}})


@pytest.fixture
def oauth2_file(tmp_path) -> str:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"type": "client_credentials", "client_id": "spark", "client_secret": "cl1ent-s3cret",
                                "issuer_url": "https://auth.example.com"}))
    return str(path)


@pytest.mark.parametrize("plugin", [JAVA + "oauth2.AuthenticationOAuth2", "oauth2", "AuthenticationOauth2"])
def test_oauth2_from_the_java_clients_names(plugin, oauth2_file):
    params = json.dumps({"type": "client_credentials", "issuerUrl": "https://auth.example.com/", "privateKey": f"file://{oauth2_file}",
                         "audience": "urn:sn:pulsar:org:inst", "scope": "api://pulsar/.default"})
    o = parse(**{"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": params})
    expected = OAuth2Auth("https://auth.example.com", f"file://{oauth2_file}", "urn:sn:pulsar:org:inst", "api://pulsar/.default")
    assert o.credentials == o.admin_credentials == expected
    assert json.loads(expected.client_params()) == {  # pulsar-client-cpp's AuthOauth2 names
        "type": "client_credentials", "issuer_url": "https://auth.example.com", "private_key": f"file://{oauth2_file}",
        "audience": "urn:sn:pulsar:org:inst", "scope": "api://pulsar/.default"}


def test_oauth2_with_a_data_url_keeps_the_secret_out_of_reprs_and_errors(oauth2_file):
    data = "data:application/json;base64," + base64.b64encode(open(oauth2_file).read().encode()).decode()
    o = parse(**{"pulsar.client.authPluginClassName": "oauth2",
                 "pulsar.client.authParams": json.dumps({"type": "client_credentials", "issuer_url": "https://auth.example.com", "private_key": data})})
    assert isinstance(o.credentials, OAuth2Auth) and o.credentials.private_key == data
    assert data not in repr(o) and data not in repr(o.read_task_config(None))
    assert scrub(f"failed with {data}", o.credentials) == "failed with ***"


@pytest.mark.parametrize("params,message", [
    ('{"issuerUrl": "https://a"}', "OAuth2 needs 'issuerUrl' and 'privateKey'"),
    ('{"issuerUrl": "ftp://a", "privateKey": "file:///x"}', "issuerUrl must be an http(s) URL"),
    ('{"type": "authorization_code", "issuerUrl": "https://a", "privateKey": "file:///x"}', "type 'authorization_code' is not supported"),
    ('{"issuerUrl": "https://a", "privateKey": "file:///no/such/creds.json"}', "cannot read the OAuth2 credentials file /no/such/creds.json"),
    ('{"issuerUrl": "https://a", "privateKey": "data:application/json;base64,' + base64.b64encode(b'{"client_id": "x"}').decode() + '"}',
     "must be JSON with client_id and client_secret (content not shown)"),
    ("not json", "the OAuth2 parameters must be a JSON object (value not shown)"),
])
def test_oauth2_parameters_that_cannot_work_fail_at_load(params, message):
    with pytest.raises(ValueError) as err:
        parse(**{"pulsar.client.authPluginClassName": JAVA + "oauth2.AuthenticationOAuth2", "pulsar.client.authParams": params})
    assert "Option 'pulsar.client.authParams'" in str(err.value) and message in str(err.value)


def test_tls_client_certificates_in_both_java_formats(tmp_path):
    cert, key = tmp_path / "client.cert.pem", tmp_path / "client.key-pk8.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    for params in (f"tlsCertFile:{cert},tlsKeyFile:{key}", json.dumps({"tlsCertFile": str(cert), "tlsKeyFile": f"file://{key}"})):
        o = parse(**{"pulsar.client.authPluginClassName": JAVA + "AuthenticationTls", "pulsar.client.authParams": params})
        assert o.credentials == TlsAuth(str(cert), str(key))
        assert o.admin_tls.client_cert == (str(cert), str(key))  # the admin API shows the same certificate
    # no parameters: the client's certificate settings (the Java client's names too)
    o = parse(**{"pulsar.client.authPluginClassName": "tls", "pulsar.client.tlsCertificateFilePath": str(cert),
                 "pulsar.client.tlsKeyFilePath": str(key)})
    assert o.credentials == TlsAuth(str(cert), str(key))
    assert dict(o.client_kwargs)["tls_private_key_file_path"] == str(key)
    with pytest.raises(ValueError, match=f"cannot read the client key {tmp_path}/missing.pem .*on the driver and on every executor"):
        parse(**{"pulsar.client.authPluginClassName": "tls", "pulsar.client.authParams": f"tlsCertFile:{cert},tlsKeyFile:{tmp_path}/missing.pem"})
    with pytest.raises(ValueError, match="TLS authentication needs the client certificate and its key"):
        parse(**{"pulsar.client.authPluginClassName": "tls"})


def test_token_forms_and_a_file_read_where_it_is_used(tmp_path):
    token_file = tmp_path / "t.jwt"
    token_file.write_text("aaa.bbb.ccc\n")
    for params, expected in [("token:aaa.bbb.ccc", TokenAuth(token="aaa.bbb.ccc")),
                             ('{"token": "aaa.bbb.ccc"}', TokenAuth(token="aaa.bbb.ccc")),
                             (f"file://{token_file}", TokenAuth(file=str(token_file))), (f'{{"file": "{token_file}"}}', TokenAuth(file=str(token_file)))]:
        o = parse(**{"pulsar.client.authPluginClassName": JAVA + "AuthenticationToken", "pulsar.client.authParams": params})
        assert o.credentials == expected, params
    assert TokenAuth(file="/a/t").client_params() == "file:///a/t"  # the client's plugin reads it at every authentication


def test_basic_and_athenz(oauth2_file):
    o = parse(**{"pulsar.client.authPluginClassName": JAVA + "AuthenticationBasic",
                 "pulsar.client.authParams": '{"userId": "spark", "password": "b4sic-pw"}'})
    assert o.credentials == BasicAuth("spark", "b4sic-pw") and "b4sic-pw" not in repr(o)
    assert json.loads(o.credentials.client_params()) == {"username": "spark", "password": "b4sic-pw"}  # the C++ client's names
    athenz = '{"tenantDomain": "shopping", "tenantService": "spark", "providerDomain": "pulsar", "privateKey": "file:///k.pem"}'
    with pytest.raises(ValueError, match="Athenz authenticates reads but not the admin API here; .*'pulsar.admin.authPluginClassName'"):
        parse(**{"pulsar.client.authPluginClassName": "athenz", "pulsar.client.authParams": athenz})
    o = parse(**{"pulsar.client.authPluginClassName": "athenz", "pulsar.client.authParams": athenz,
                 "pulsar.admin.authPluginClassName": "basic", "pulsar.admin.authParams": '{"userId": "a", "password": "b"}'})
    assert o.credentials == AthenzAuth(athenz) and o.admin_credentials == BasicAuth("a", "b")


def test_hostname_verification_is_on_unless_turned_off(caplog):
    o = parse(**{"service.url": "pulsar+ssl://b:6651", "pulsar.client.tlsTrustCertsFilePath": "/ca.pem"})
    assert dict(o.client_kwargs)["tls_validate_hostname"] is True
    assert (o.admin_tls.trust_file, o.admin_tls.validate_hostname) == ("/ca.pem", True)  # one trust file for both
    o = parse(**{"pulsar.client.tlsHostnameVerificationEnable": "false"})  # the Java client's name
    assert dict(o.client_kwargs)["tls_validate_hostname"] is False and not o.admin_tls.validate_hostname
    assert "TLS hostnames are not checked (tlsValidateHostname=false)" in caplog.text
    o = parse(**{"pulsar.client.tlsAllowInsecureConnection": "true", "pulsar.admin.tlsTrustCertsFilePath": "/admin-ca.pem"})
    assert o.admin_tls.verify is False and "TLS certificates are not checked" in caplog.text


@pytest.mark.parametrize("plugin,params,hint", [
    ("token", "aaa.bbb.ccc", "write it as 'token:<jwt>'"),
    ("oauth2", '{"issuerUrl": "https://a", "privateKey": "DATA"}', 'give "type": "client_credentials" with it, or privateKey as a file:// path'),
    ("athenz", '{"tenantDomain": "t", "tenantService": "s", "providerDomain": "p", "privateKey": "data:application/x-pem-file;base64,QUJD"}',
     "give privateKey as a file:// path"),
])
def test_a_secret_spark_would_show_in_plans_and_its_event_log_is_refused(plugin, params, hint, oauth2_file):
    """Spark redacts an option whose key or value matches spark.redaction.regex (tests/integration/test_secured_*
    grep explain() and the event log): no key of ours matches, so a value holding a secret must."""
    data = "data:application/json;base64," + base64.b64encode(open(oauth2_file).read().encode()).decode()
    params = params.replace("DATA", data)
    with pytest.raises(ValueError) as err:
        parse(**{"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": params})
    assert "Spark would show this value in query plans" in str(err.value) and hint in str(err.value)
    assert data not in str(err.value) and "aaa.bbb" not in str(err.value)


def test_every_method_builds_pulsar_clients_own_plugin(tmp_path, oauth2_file):
    """Both read paths hand `plugin` and `client_params()` to pulsar-client-cpp's factory, which answers a name it
    does not know with no plugin (OAuth2's is 'oauth2token', not 'oauth2': a query then connected without credentials)."""
    from pulsar_throttled_source.reading.client_factories import client_authentication

    athenz = '{"tenantDomain": "t", "tenantService": "s", "providerDomain": "p", "privateKey": "file:///k.pem", "ztsUrl": "https://zts"}'
    for credentials, method in [(TokenAuth(token="a.b.c"), "token"), (TokenAuth(file=oauth2_file), "token"),
                                (TlsAuth("/c.pem", "/k.pem"), "tls"), (BasicAuth("u", "p"), "basic"), (AthenzAuth(athenz), "athenz"),
                                (OAuth2Auth("https://auth.example.com", f"file://{oauth2_file}", "aud"), "token")]:
        built = client_authentication(credentials)
        assert built.auth is not None and built.auth.getAuthMethodName() == method, credentials
    with pytest.raises(RuntimeError, match="pulsar-client has no 'nonesuch' authentication plugin"):
        client_authentication(type("Unknown", (TokenAuth,), {"plugin": "nonesuch"})(token="a.b.c"))


def test_both_read_paths_create_their_clients_from_one_settings_object_that_shows_no_secret():
    from dataclasses import replace

    config = replace(parse().read_task_config(None), credentials=TokenAuth(token="a.b.c"))
    settings = config.client_settings()
    assert (settings.service_url, settings.settings) == (config.service_url, config.client_kwargs)  # TLS settings among them
    assert settings.auth == ("token", "token:a.b.c")  # what pulsar.Authentication and the native client's plugin take
    assert "a.b.c" not in repr(settings)
    assert replace(config, credentials=None).client_settings().auth is None
