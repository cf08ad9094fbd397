"""No marker: the store comes from --larder-template / $LARDER_TEMPLATE."""


def test_default_template(larder_store, larder_client, record):
    record(larder_store, "default")
    assert larder_store.info["template"] == "gallery"
    assert larder_store.counts("artists") == {"artists": 0}
    assert larder_client.store(larder_store.id).id == larder_store.id
