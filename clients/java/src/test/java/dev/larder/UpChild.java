package dev.larder;

/**
 * A JVM of {@link BackToBackTest}'s rounds: the helpers' server as a test gets it ({@link SharedServer#client()},
 * no URL given: {@code larder up}), an empty store of it, and its URL printed.
 */
final class UpChild {
    private UpChild() {}

    public static void main(String[] args) {
        Larder larder = SharedServer.client();
        Store store = larder.createStore(StoreOptions.create().label("back-to-back"));
        System.out.println("child: " + larder.url() + " " + store.id());
    }
}
