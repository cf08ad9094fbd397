"""No marker: the store comes from --larder-template / $LARDER_TEMPLATE."""
import json
import os


def test_default_template(larder_store, larder_client):
    with open(os.path.join(os.environ["SAMPLE_RECORDS"], "default.json"), "w") as f:
        json.dump(larder_store.info, f)
    assert larder_store.info["template"] == "gallery"
    assert larder_store.counts("artists") == {"artists": 0}
    assert larder_client.store(larder_store.id).id == larder_store.id
