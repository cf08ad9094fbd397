"""The token, and keep-alive connections, on a server that wants a token
and closes idle connections after one second."""
import time

import pytest

import larder

TOKEN = "s3cret-token"
SERVER_ARGS = ["--token", TOKEN, "--connection-timeout-seconds", "1"]


def test_token_is_sent_as_bearer(server):
    with larder.Client(url=server.url, token=TOKEN) as client:
        store = client.create_store(template="gallery", fixtures=["artists"])
        assert store.counts("artists") == {"artists": 4}
        store.delete()


def test_token_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("LARDER_TOKEN", TOKEN)
    with larder.Client(url=server.url) as client:
        client.create_store().delete()


def test_without_the_token_401(server, monkeypatch):
    monkeypatch.delenv("LARDER_TOKEN", raising=False)
    with larder.Client(url=server.url) as client:
        with pytest.raises(larder.LarderError) as caught:
            client.create_store()
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
    with larder.Client(url=server.url, token="wrong") as client:
        with pytest.raises(larder.LarderError) as caught:
            client.create_store()
    assert caught.value.code == "unauthorized"


def test_connection_is_kept_alive_and_renewed_when_the_server_closed_it(server):
    with larder.Client(url=server.url, token=TOKEN) as client:
        store = client.create_store(template="gallery", fixtures=["artists"])
        socket = client._local.connection.sock
        assert socket is not None
        store.counts()
        store.query("SELECT 1")
        assert client._local.connection.sock is socket  # one connection for all three
        time.sleep(1.6)  # the server closes it as idle
        assert store.counts("artists") == {"artists": 4}
        assert client._local.connection.sock is not socket
        store.delete()
