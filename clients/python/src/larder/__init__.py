"""Larder client: isolated throwaway SQLite stores for tests, over HTTP.

    import larder
    client = larder.Client()                      # $LARDER_URL, $LARDER_TOKEN
    store = client.create_store(template="gallery", fixtures=["artists"])
    store.counts()                                # {"artists": 4, ...}
    store.delete()

    # A template that the application's own migrator builds, once per key:
    # migrate(path) runs it on that SQLite file.
    key = client.build("app-" + digest_of_migrations, migrate)
    store = client.create_store(build=key)

Installing the package also installs a pytest plugin (larder.pytest_plugin):
the fixtures `larder_store` and `larder_client`, the marker
`@pytest.mark.larder(...)` and the hook `pytest_larder_build`.
"""
from ._client import DEFAULT_URL, Client, LarderError, Store, Timeout

__all__ = ["Client", "Store", "LarderError", "Timeout", "DEFAULT_URL"]
__version__ = "0.1.0"

# Tracebacks and reprs name them as users import them.
for _public in (Client, Store, LarderError, Timeout):
    _public.__module__ = __name__
del _public
