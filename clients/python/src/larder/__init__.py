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

    # Old databases kept in the repository, migrated by that same migrator,
    # judged against the build: one result per tests/snapshots/*.sqlite.
    for result in larder.check_snapshots("tests/snapshots", build=key, migrate=migrate, client=client):
        larder.assert_passed(result)              # SnapshotCheckFailed, naming each failure

    # Tests outside pytest: $LARDER_URL, else this run's shared server,
    # started by `larder up` when none runs (and stopped by itself once
    # this process has ended).
    client = larder.Client.for_tests()
    # A test's store labelled as the pytest plugin labels them, RUN/PACKAGE/TEST
    # (RUN: $LARDER_RUN, else the CI system's run id, else none).
    run = larder.run_prefix()
    store = client.create_store(label=larder.store_label("tests/test_a.py", "test_b", run))
    # One run's stores, kept ones too, removed at once.
    client.delete_stores(label_prefix=run + "/")

    # A server whose files this machine cannot open (another host, a
    # container): remote mode, the default for a URL that is not loopback
    # (else $LARDER_MODE=remote or mode="remote"). `path` is a local copy.
    store = larder.Client("http://larder.ci.internal:7464").create_store(template="gallery")
    ...                                           # the test writes store.path
    store.check_in()                              # PUT /stores/{id}/database
    store.delete()                                # and the local copy with it

Installing the package also installs a pytest plugin (larder.pytest_plugin):
the fixtures `larder_store`, `larder_client` and `larder_check_snapshot`,
the marker `@pytest.mark.larder(...)` and the hook `pytest_larder_build`;
``@pytest.mark.parametrize("snapshot", larder.snapshots(directory))`` makes
one test per snapshot.
"""
import os
from typing import Any, List, Union

from ._client import (DEFAULT_URL, Client, LarderError, SnapshotCheckFailed, Store, Timeout, assert_passed,
                      check_snapshots, run_prefix, snapshot_files, store_label)
from ._up import find_binary, start_server

__all__ = ["Client", "Store", "LarderError", "Timeout", "SnapshotCheckFailed", "DEFAULT_URL",
           "assert_passed", "check_snapshots", "snapshot_files", "snapshots", "start_server", "find_binary",
           "run_prefix", "store_label"]
__version__ = "0.1.0"


def snapshots(directory: Union[str, "os.PathLike[str]"]) -> List[Any]:
    """The ``*.sqlite`` snapshots in `directory`, in name order, as pytest
    parameters whose ids are the file names:
    ``@pytest.mark.parametrize("snapshot", larder.snapshots(DIR))`` makes
    one test per snapshot (run it with the fixture `larder_check_snapshot`).
    A missing or empty directory is a `ValueError` (a collection error)."""
    import pytest

    return [pytest.param(path, id=os.path.basename(path)) for path in snapshot_files(directory)]


# Tracebacks and reprs name them as users import them.
for _public in (Client, Store, LarderError, Timeout, SnapshotCheckFailed, assert_passed, check_snapshots,
                snapshot_files, start_server, find_binary, run_prefix, store_label):
    _public.__module__ = __name__
del _public
