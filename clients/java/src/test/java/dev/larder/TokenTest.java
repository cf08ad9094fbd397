package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A server with --token: the client sends {@code Authorization: Bearer <token>}. */
class TokenTest {
    static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start("--token", "s3cret-java");
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
    }

    @Test
    void withoutTheTokenIsUnauthorized() {
        LarderException e = assertThrows(LarderException.class, () -> new Larder(server.url).createStore());
        assertEquals(401, e.status());
        assertEquals("unauthorized", e.code());
    }

    @Test
    void withTheTokenWorks() {
        Store store = new Larder(server.url + "/", "s3cret-java").createStore("gallery", "artists");
        assertEquals(4L, store.counts("artists").get("artists"));
        store.delete();
    }
}
