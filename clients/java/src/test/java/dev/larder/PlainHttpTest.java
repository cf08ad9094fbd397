package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The plain HTTP/1.1 client of the JSON calls ({@link PlainHttp}) against a scripted server on a local socket:
 * kept-alive connections reused, one the server closed while idle replaced, chunked bodies, an answer that
 * ends the connection, and the deferred request's answer read later.
 */
class PlainHttpTest {
    /**
     * A server whose every connection answers its requests with {@code answer} (given the request line) and then,
     * when the answer says "Connection: close", closes; {@link #connections} counts them, {@link #closed} says
     * when one was closed by the server.
     */
    static final class Scripted implements AutoCloseable {
        final ServerSocket socket;
        final List<Socket> accepted = new ArrayList<>();
        final BlockingQueue<String> requests = new LinkedBlockingQueue<>();
        final BlockingQueue<Integer> closed = new LinkedBlockingQueue<>();
        final Thread thread;

        Scripted(Function<String, String> answer) throws IOException {
            socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            thread = new Thread(() -> {
                try {
                    while (true) {
                        Socket s = socket.accept();
                        int n;
                        synchronized (accepted) {
                            accepted.add(s);
                            n = accepted.size();
                        }
                        int number = n;
                        Thread t = new Thread(() -> serve(s, number, answer));
                        t.setDaemon(true);
                        t.start();
                    }
                } catch (IOException e) {
                    // closed
                }
            });
            thread.setDaemon(true);
            thread.start();
        }

        private void serve(Socket s, int number, Function<String, String> answer) {
            try (s) {
                BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.ISO_8859_1));
                OutputStream out = s.getOutputStream();
                while (true) {
                    String line = in.readLine();
                    if (line == null) return;
                    int length = 0;
                    for (String h = in.readLine(); h != null && !h.isEmpty(); h = in.readLine()) {
                        if (h.toLowerCase().startsWith("content-length:")) length = Integer.parseInt(h.substring(15).trim());
                    }
                    char[] body = new char[length];
                    for (int read = 0; read < length; ) read += in.read(body, read, length - read);
                    requests.add(number + " " + line + " " + new String(body));
                    String a = answer.apply(line);
                    out.write(a.getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    if (a.contains("Connection: close")) {
                        s.close();
                        closed.add(number);
                        return;
                    }
                }
            } catch (IOException e) {
                // the client left
            }
        }

        int connections() {
            synchronized (accepted) {
                return accepted.size();
            }
        }

        URI url() {
            return URI.create("http://127.0.0.1:" + socket.getLocalPort());
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    static String json(String body) {
        return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + body.getBytes(StandardCharsets.UTF_8).length
                + "\r\n\r\n" + body;
    }

    static final Duration TIMEOUT = Duration.ofSeconds(10);

    @Test
    void aKeptAliveConnectionServesTheNextRequest() throws Exception {
        try (Scripted server = new Scripted(line -> json("{\"ok\":true}"))) {
            PlainHttp http = new PlainHttp(server.url());
            for (int i = 0; i < 5; i++) {
                PlainHttp.Reply r = http.exchange("POST", "/stores", "{\"a\":1}".getBytes(StandardCharsets.UTF_8),
                        "application/json", "Accept: application/json\r\n", TIMEOUT);
                assertEquals(200, r.status());
                assertEquals("{\"ok\":true}", r.body());
            }
            assertEquals(1, server.connections(), "one connection for five requests");
            assertEquals("1 POST /stores HTTP/1.1 {\"a\":1}", server.requests.take());
        }
    }

    @Test
    void aConnectionTheServerClosedWhileIdleIsReplacedAndTheRequestSentAgain() throws Exception {
        // The first answer keeps the connection; the server then closes it (as libmicrohttpd does after its idle
        // timeout) before the next request comes.
        CountDownLatch first = new CountDownLatch(1);
        try (Scripted server = new Scripted(line -> {
            if (first.getCount() > 0) {
                first.countDown();
                return json("{\"n\":1}");
            }
            return json("{\"n\":2}");
        })) {
            PlainHttp http = new PlainHttp(server.url());
            assertEquals("{\"n\":1}", http.exchange("GET", "/health", null, null, "", TIMEOUT).body());
            Socket kept;
            synchronized (server.accepted) {
                kept = server.accepted.get(0);
            }
            kept.close(); // the server's side of the idle connection
            PlainHttp.Reply again = http.exchange("DELETE", "/stores/st_1", null, null, "", TIMEOUT);
            assertEquals(200, again.status());
            assertEquals("{\"n\":2}", again.body());
            assertEquals(2, server.connections(), "a new connection for the request the closed one could not carry");
        }
    }

    @Test
    void chunkedBodiesAndAnAnswerThatClosesTheConnection() throws Exception {
        try (Scripted server = new Scripted(line -> line.startsWith("GET /chunked")
                ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 2\r\n\r\n4;ext=1\r\n{\"a\"\r\n6\r\n:\"\u00e9\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"
                : "HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")) {
            PlainHttp http = new PlainHttp(server.url());
            PlainHttp.Reply chunked = http.exchange("GET", "/chunked", null, null, "", TIMEOUT);
            assertEquals(200, chunked.status());
            assertEquals("{\"a\":\"\u00e9\"}", chunked.body());
            assertEquals("2", chunked.retryAfter());
            PlainHttp.Reply closing = http.exchange("POST", "/close", null, null, "", TIMEOUT);
            assertEquals(409, closing.status());
            assertEquals("{}", closing.body());
            assertTrue(server.closed.poll(10, TimeUnit.SECONDS) != null);
            // The connection it closed is not used again.
            assertEquals(200, http.exchange("GET", "/chunked", null, null, "", TIMEOUT).status());
            assertEquals(2, server.connections());
        }
    }

    @Test
    void aDeferredRequestIsSentAtOnceAndItsAnswerReadLater() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        try (Scripted server = new Scripted(line -> {
            try {
                if (line.startsWith("DELETE")) release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return line.startsWith("DELETE") ? "HTTP/1.1 204 No Content\r\n\r\n" : json("{}");
        })) {
            PlainHttp http = new PlainHttp(server.url());
            PlainHttp.Exchange pending = http.start("DELETE", "/stores/st_9", null, null, "", TIMEOUT);
            // The server has it before anyone reads the answer, and answers only when released.
            assertEquals("1 DELETE /stores/st_9 HTTP/1.1 ", server.requests.poll(10, TimeUnit.SECONDS));
            assertTrue(!pending.arrived());
            // Meanwhile another request goes on a connection of its own.
            assertEquals(200, http.exchange("GET", "/health", null, null, "", TIMEOUT).status());
            release.countDown();
            assertEquals(204, pending.finish().status());
            assertEquals(204, pending.finish().status(), "read once, answered again");
            assertEquals(2, server.connections());
        }
    }

    @Test
    void pipelinedRequestsGoInOneWriteAndTheirAnswersAreReadInOrder() throws Exception {
        try (Scripted server = new Scripted(line -> line.startsWith("DELETE /stores/gone")
                ? "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}"
                : line.startsWith("DELETE") ? "HTTP/1.1 204 No Content\r\n\r\n" : json("{\"id\":\"st_new\"}"))) {
            PlainHttp http = new PlainHttp(server.url());
            List<PlainHttp.Exchange> sent = http.startAll(List.of(
                    new PlainHttp.Request("DELETE", "/stores/st_1", null, null, "", TIMEOUT),
                    new PlainHttp.Request("DELETE", "/stores/gone", null, null, "", TIMEOUT),
                    new PlainHttp.Request("POST", "/stores", "{}".getBytes(StandardCharsets.UTF_8), "application/json", "", TIMEOUT)));
            // The last answer first: the ones before it are read on the way, and kept.
            assertEquals("{\"id\":\"st_new\"}", sent.get(2).finish().body());
            assertTrue(sent.get(0).arrived() && sent.get(1).arrived());
            assertEquals(204, sent.get(0).finish().status());
            assertEquals(404, sent.get(1).finish().status());
            assertEquals(1, server.connections(), "one connection for the three");
            assertEquals(List.of("1 DELETE /stores/st_1 HTTP/1.1 ", "1 DELETE /stores/gone HTTP/1.1 ", "1 POST /stores HTTP/1.1 {}"),
                    List.of(server.requests.take(), server.requests.take(), server.requests.take()));
            // The connection serves again once its last answer is read.
            assertEquals(200, http.exchange("GET", "/health", null, null, "", TIMEOUT).status());
            assertEquals(1, server.connections());
        }
    }

    @Test
    void answersAfterTheServerClosedThePipelineFail() throws Exception {
        try (Scripted server = new Scripted(line -> "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")) {
            PlainHttp http = new PlainHttp(server.url());
            List<PlainHttp.Exchange> sent = http.startAll(List.of(
                    new PlainHttp.Request("DELETE", "/stores/st_1", null, null, "", TIMEOUT),
                    new PlainHttp.Request("DELETE", "/stores/st_2", null, null, "", TIMEOUT)));
            assertEquals(204, sent.get(0).finish().status());
            IOException e = assertThrows(IOException.class, () -> sent.get(1).finish());
            assertTrue(e.getMessage().contains("closed the connection after answer 1 of 2"), e.getMessage());
        }
    }

    @Test
    void anUnreachableServerFailsAtOnce() {
        PlainHttp http = new PlainHttp(URI.create("http://127.0.0.1:9"));
        assertThrows(IOException.class, () -> http.exchange("GET", "/health", null, null, "", TIMEOUT));
    }
}
