"""bench/frameworks, larder: the plugin's larder_store, a row written to its path."""
import pytest

from benchwrite import write

pytestmark = pytest.mark.larder(template="gallery", fixtures=["artists", "artworks"])

# BENCH-REPEAT-BEGIN


def test_NNNN(larder_store):
    write(larder_store.path)
# BENCH-REPEAT-END
