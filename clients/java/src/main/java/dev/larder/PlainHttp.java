// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * HTTP/1.1 over a plain {@link Socket}, for the JSON calls to an {@code http://} server: a test's create,
 * relabel and delete. {@code java.net.http.HttpClient} hands every request to its selector thread and back,
 * which on a busy 2-core machine cost about 2 ms a create + delete against 0.4 ms here (issue 48); the JVM
 * also loads a fraction of the classes. Connections are kept alive and reused, one request at a time each;
 * a request that finds its reused connection closed by the server (before any byte of the answer came) is
 * sent once more on a new one. Thread-safe.
 */
final class PlainHttp {
    /** The answer of one request: its status, its body as text, its {@code Retry-After} ("" when none). */
    record Reply(int status, String body, String retryAfter) {}

    /** How long an idle connection is reused; the server closes idle ones after its --connection-timeout-seconds (default 60). */
    static final long IDLE_NANOS = Duration.ofSeconds(5).toNanos();

    /** Idle connections kept at most; one more in use at once is opened, and closed after its request. */
    static final int MAX_IDLE = 8;

    private static final int CONNECT_TIMEOUT_MS = 10_000;

    private final String host;
    private final int port;
    private final String hostHeader;
    private final ArrayDeque<Connection> idle = new ArrayDeque<>(); // guarded by this

    PlainHttp(URI base) {
        this.host = base.getHost();
        this.port = base.getPort() == -1 ? 80 : base.getPort();
        String h = host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
        this.hostHeader = base.getPort() == -1 ? h : h + ":" + port;
    }

    private static final class Connection {
        final Socket socket;
        final InputStream in;
        final OutputStream out;
        long idleSince;

        Connection(Socket socket) throws IOException {
            this.socket = socket;
            this.in = new BufferedInputStream(socket.getInputStream(), 8192);
            this.out = socket.getOutputStream();
        }

        void close() {
            try {
                socket.close();
            } catch (IOException ignored) {
                // gone either way
            }
        }
    }

    /**
     * Sends {@code method target} with {@code body} (null: none) and its {@code contentType}; {@code headers}
     * are more header lines, each ending in CRLF. Reads within {@code timeout} per read.
     */
    Reply exchange(String method, String target, byte[] body, String contentType, String headers, Duration timeout)
            throws IOException {
        return start(method, target, body, contentType, headers, timeout).finish();
    }

    /**
     * Sends the request as {@link #exchange} does, and answers without waiting for the answer, which
     * {@link Exchange#finish} reads: the server works on it meanwhile, and this thread hands nothing to another
     * (a test helper's deletes and stores made ahead, issue 48). Holds its connection until then.
     */
    Exchange start(String method, String target, byte[] body, String contentType, String headers, Duration timeout)
            throws IOException {
        return startAll(List.of(new Request(method, target, body, contentType, headers, timeout))).get(0);
    }

    /** A request for {@link #startAll}. */
    record Request(String method, String target, byte[] body, String contentType, String headers, Duration timeout) {}

    /**
     * Sends {@code requests} on one connection, in one write (HTTP/1.1 pipelining: the server answers them in
     * order), and answers without waiting; each {@link Exchange#finish} reads the answers up to its own. One
     * write wakes the server once: on a busy 2-core machine each wakeup of its thread took the test's core for
     * as long as the server's work (issue 48).
     */
    List<Exchange> startAll(List<Request> requests) throws IOException {
        ByteArrayOutputStream all = new ByteArrayOutputStream(256 * requests.size());
        String[] methods = new String[requests.size()];
        int soTimeout = 1;
        for (int i = 0; i < requests.size(); i++) {
            Request r = requests.get(i);
            StringBuilder head = new StringBuilder(160)
                    .append(r.method()).append(' ').append(r.target()).append(" HTTP/1.1\r\nHost: ").append(hostHeader).append("\r\n")
                    .append(r.headers());
            if (r.contentType() != null) head.append("Content-Type: ").append(r.contentType()).append("\r\n");
            head.append("Content-Length: ").append(r.body() == null ? 0 : r.body().length).append("\r\n\r\n");
            all.write(head.toString().getBytes(StandardCharsets.UTF_8));
            if (r.body() != null) all.write(r.body());
            methods[i] = r.method();
            soTimeout = (int) Math.max(soTimeout, Math.min(Integer.MAX_VALUE, r.timeout().toMillis()));
        }
        // One write: with TCP_NODELAY more would be more packets, and more wakeups of the server.
        Pipeline p = new Pipeline(all.toByteArray(), methods, soTimeout);
        p.send();
        List<Exchange> exchanges = new ArrayList<>();
        for (int i = 0; i < methods.length; i++) exchanges.add(new Exchange(p, i));
        return exchanges;
    }

    /** One request of a {@link Pipeline}: its answer, read when asked for. Thread-safe. */
    static final class Exchange {
        private final Pipeline pipeline;
        private final int index;

        private Exchange(Pipeline pipeline, int index) {
            this.pipeline = pipeline;
            this.index = index;
        }

        /** Whether the answer is known or the connection has bytes to read (a read would hardly wait): without blocking. */
        boolean arrived() {
            return pipeline.arrived(index);
        }

        /** Reads the answer (once; later calls answer it again). */
        Reply finish() throws IOException {
            return pipeline.finish(index, 0);
        }

        /** {@link #finish()}, waiting at most {@code maxWaitMs} (0: the request's own limit) for each read. */
        Reply finish(int maxWaitMs) throws IOException {
            return pipeline.finish(index, maxWaitMs);
        }
    }

    /** Requests written at once on one connection; their answers, read in order. Thread-safe. */
    private final class Pipeline {
        private final byte[] requests;
        private final String[] methods;
        private final int soTimeout;
        private final Reply[] replies;
        private Connection connection; // guarded by this: until the last answer is read
        private boolean reused; // guarded by this
        private int next; // guarded by this: the answer to read next
        private IOException failure; // guarded by this: of the answers from `next` on

        Pipeline(byte[] requests, String[] methods, int soTimeout) {
            this.requests = requests;
            this.methods = methods;
            this.soTimeout = soTimeout;
            this.replies = new Reply[methods.length];
        }

        /** Writes the requests on a kept-alive connection, or a new one (also when writing on the kept one fails). */
        synchronized void send() throws IOException {
            while (true) {
                Connection c = take();
                reused = c != null;
                if (c == null) c = open();
                try {
                    c.socket.setSoTimeout(soTimeout);
                    c.out.write(requests);
                    c.out.flush();
                    connection = c;
                    return;
                } catch (IOException e) {
                    c.close();
                    if (!reused) throw e;
                }
            }
        }

        synchronized boolean arrived(int index) {
            if (index < next || connection == null) return true;
            try {
                return connection.in.available() > 0;
            } catch (IOException e) {
                return true; // finish() says what
            }
        }

        synchronized Reply finish(int index, int maxWaitMs) throws IOException {
            while (next <= index) {
                if (failure != null) throw failure;
                Connection c = connection;
                boolean answered = false;
                try {
                    c.socket.setSoTimeout(maxWaitMs > 0 ? Math.min(soTimeout, maxWaitMs) : soTimeout);
                    int first = c.in.read();
                    if (first < 0) throw new EOFException("the server closed the connection");
                    answered = true;
                    boolean last = next == methods.length - 1;
                    Read r = read(c, first, methods[next], last);
                    replies[next++] = r.reply();
                    if (last || r.closed()) connection = null;
                    if (r.closed() && !last) failure = new EOFException("the server closed the connection after answer " + next + " of " + methods.length);
                } catch (IOException | NumberFormatException e) {
                    c.close();
                    connection = null;
                    // The server closed a kept-alive connection before it read these requests: send them on a new one.
                    if (reused && !answered && next == 0) {
                        send();
                        continue;
                    }
                    failure = e instanceof IOException io ? io
                            : new IOException("an answer with a malformed number in its head: " + e.getMessage(), e);
                }
            }
            if (replies[index] != null) return replies[index];
            throw failure;
        }
    }

    private Connection open() throws IOException {
        Socket s = new Socket();
        try {
            s.setTcpNoDelay(true);
            s.connect(new InetSocketAddress(host, port), CONNECT_TIMEOUT_MS);
            return new Connection(s);
        } catch (IOException e) {
            s.close();
            throw e;
        }
    }

    private synchronized Connection take() {
        long now = System.nanoTime();
        while (!idle.isEmpty()) {
            Connection c = idle.pollLast();
            if (now - c.idleSince < IDLE_NANOS) return c;
            c.close();
        }
        return null;
    }

    private void release(Connection c) {
        c.idleSince = System.nanoTime();
        synchronized (this) {
            if (idle.size() < MAX_IDLE) {
                idle.addLast(c);
                return;
            }
        }
        c.close();
    }

    /** An answer, and whether the server ended the connection with it (so that nothing follows on it). */
    private record Read(Reply reply, boolean closed) {}

    /**
     * The answer whose first byte is {@code first}; when it is the {@code last} one expected, the connection goes
     * back to the pool if it may be reused.
     */
    private Read read(Connection c, int first, String method, boolean last) throws IOException {
        while (true) {
            String status = line(c.in, first);
            first = -1;
            // "HTTP/1.1 201 Created"
            String[] parts = status.split(" ", 3);
            if (parts.length < 2 || !parts[0].startsWith("HTTP/")) throw new IOException("not an HTTP answer: " + status);
            int code;
            try {
                code = Integer.parseInt(parts[1]);
            } catch (NumberFormatException e) {
                throw new IOException("not an HTTP status line: " + status, e);
            }
            long length = -1;
            boolean chunked = false;
            boolean close = parts[0].equals("HTTP/1.0");
            String retryAfter = "";
            for (String h = line(c.in, -1); !h.isEmpty(); h = line(c.in, -1)) {
                int colon = h.indexOf(':');
                if (colon <= 0) continue;
                String name = h.substring(0, colon).trim().toLowerCase(Locale.ROOT);
                String value = h.substring(colon + 1).trim();
                switch (name) {
                    case "content-length" -> length = Long.parseLong(value);
                    case "transfer-encoding" -> chunked = value.toLowerCase(Locale.ROOT).contains("chunked");
                    case "connection" -> {
                        String v = value.toLowerCase(Locale.ROOT);
                        if (v.contains("close")) close = true;
                        else if (v.contains("keep-alive")) close = false;
                    }
                    case "retry-after" -> retryAfter = value;
                    default -> { }
                }
            }
            if (code / 100 == 1) continue; // 100 Continue and the like: the answer follows
            byte[] body;
            if (method.equals("HEAD") || code == 204 || code == 304) {
                body = new byte[0];
            } else if (chunked) {
                body = chunks(c.in);
            } else if (length >= 0) {
                if (length > Integer.MAX_VALUE - 8) throw new IOException("an answer of " + length + " bytes");
                body = c.in.readNBytes((int) length);
                if (body.length < length) throw new EOFException("the answer ended after " + body.length + " of " + length + " bytes");
            } else {
                body = c.in.readAllBytes(); // no length: the body ends with the connection
                close = true;
            }
            if (close) c.close();
            else if (last) release(c);
            return new Read(new Reply(code, new String(body, StandardCharsets.UTF_8), retryAfter), close);
        }
    }

    private static byte[] chunks(InputStream in) throws IOException {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        while (true) {
            String size = line(in, -1);
            int semicolon = size.indexOf(';');
            long n = Long.parseLong((semicolon < 0 ? size : size.substring(0, semicolon)).trim(), 16);
            if (n == 0) {
                while (!line(in, -1).isEmpty()) { /* trailers */ }
                return all.toByteArray();
            }
            if (n > Integer.MAX_VALUE - 8 - all.size()) throw new IOException("an answer too large");
            byte[] chunk = in.readNBytes((int) n);
            if (chunk.length < n) throw new EOFException("the answer ended inside a chunk");
            all.write(chunk);
            if (!line(in, -1).isEmpty()) throw new IOException("a chunk not followed by CRLF");
        }
    }

    /** One header line without its CRLF ({@code first}: its first byte, already read, or -1). */
    private static String line(InputStream in, int first) throws IOException {
        StringBuilder sb = new StringBuilder(64);
        int b = first >= 0 ? first : in.read();
        while (b != '\n') {
            if (b < 0) throw new EOFException("the answer ended inside its headers");
            if (b != '\r') sb.append((char) b);
            if (sb.length() > 65_536) throw new IOException("a header line over 64 KiB");
            b = in.read();
        }
        return sb.toString();
    }
}
