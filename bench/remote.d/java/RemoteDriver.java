// SPDX-License-Identifier: Apache-2.0
import dev.larder.Larder;
import dev.larder.Store;
import dev.larder.StoreOptions;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * bench/remote's Java driver: ITERATIONS tests of one SCENARIO against the server at URL with clients/java
 * ({@code new Larder(url, null)}, its mode from LARDER_MODE), after WARMUP tests not counted; prints one JSON
 * object.
 *
 * <pre>java -cp larder-client.jar:CLASSES RemoteDriver SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS</pre>
 *
 * As driver.py, with the row written by the sqlite3 command-line tool (ProcessBuilder: the client has no SQLite
 * of its own), whose process start is most of "write"; a failure is ended as LarderExtension ends one.
 */
public final class RemoteDriver {
    private static final String ROW = "INSERT INTO albums (title) VALUES ('Summer')";

    private RemoteDriver() {}

    private static void write(Path path) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("sqlite3", path.toString(), ROW)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        int code = p.waitFor();
        if (code != 0) throw new IOException("sqlite3 " + path + " exited " + code);
    }

    private static final class Timer {
        final Map<String, Double> steps = new LinkedHashMap<>();
        final long began = System.nanoTime();
        long last = began;

        void step(String name) {
            long now = System.nanoTime();
            steps.put(name, (now - last) / 1e6);
            last = now;
        }

        void total() {
            steps.put("total", (last - began) / 1e6);
        }
    }

    private static Map<String, Object> one(Larder client, String scenario, String template, List<String> fixtures,
                                           Path artifacts, int n, List<Map<String, Double>> into) throws Exception {
        boolean remote = scenario.startsWith("remote");
        boolean failing = scenario.endsWith("fail");
        Map<String, Object> facts = new LinkedHashMap<>();
        Timer t = new Timer();
        StoreOptions options = StoreOptions.forTemplate(template);
        if (!fixtures.isEmpty()) options.fixtures(fixtures);
        Store store = client.createStore(options);
        t.step("create");
        Path path = store.path();
        write(path);
        t.step("write");
        if (store.isRemote() != remote || path.equals(store.created().path()) == remote) {
            throw new IllegalStateException(scenario + ": the store is remote=" + store.isRemote() + ", path " + path
                    + ", the server's " + store.created().path());
        }
        if (!failing) {
            store.delete();
            t.step("delete");
            t.total();
            into.add(t.steps);
            return facts;
        }
        if (remote) {
            store.checkIn();
            t.step("checkin");
        }
        store.keep();
        t.step("keep");
        Path artifact = store.artifact(artifacts.resolve("java-" + scenario + "-" + n + "-" + store.id() + ".zip"));
        t.step("artifact");
        store.close();
        t.step("close");
        t.total();
        facts.put("albums", store.lastInfo().counts().get("albums"));
        facts.put("size_bytes", store.lastInfo().sizeBytes());
        facts.put("artifact_bytes", Files.size(artifact));
        Files.delete(artifact);
        t.last = System.nanoTime();
        store.delete();
        t.step("delete");
        into.add(t.steps);
        return facts;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: RemoteDriver SCENARIO URL ITERATIONS WARMUP TEMPLATE FIXTURES ARTIFACTS");
            System.exit(2);
        }
        String scenario = args[0];
        int iterations = Integer.parseInt(args[2]);
        int warmup = Integer.parseInt(args[3]);
        List<String> fixtures = args[5].equals("-") ? List.of() : List.of(args[5].split(","));
        Path artifacts = Path.of(args[6]);
        Larder client = new Larder(args[1], null);
        Process v = new ProcessBuilder("sqlite3", "--version").redirectErrorStream(true).start();
        String version = new String(v.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim().split(" ")[0];
        v.waitFor();
        List<Map<String, Double>> measured = new ArrayList<>();
        List<Map<String, Object>> facts = new ArrayList<>();
        List<Map<String, Double>> ignored = new ArrayList<>();
        for (int n = 0; n < warmup + iterations; n++) {
            Map<String, Object> f = one(client, scenario, args[4], fixtures, artifacts, n, n < warmup ? ignored : measured);
            if (n >= warmup) facts.add(f);
        }
        StringBuilder out = new StringBuilder();
        out.append("{\"client\":\"java\",\"scenario\":\"").append(scenario).append("\",\"mode\":\"")
                .append(client.mode().toString().toLowerCase(Locale.ROOT)).append("\",\"writer\":\"sqlite3 ").append(version)
                .append(" (a process per write)\",\"iterations\":[");
        for (int i = 0; i < measured.size(); i++) {
            out.append(i == 0 ? "" : ",").append(object(measured.get(i)));
        }
        out.append("],\"facts\":[");
        for (int i = 0; i < facts.size(); i++) {
            out.append(i == 0 ? "" : ",").append(object(facts.get(i)));
        }
        System.out.println(out.append("]}"));
    }

    /** A flat map of numbers (or null) as a JSON object. */
    private static String object(Map<String, ?> map) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, ?> e : map.entrySet()) {
            if (b.length() > 1) b.append(',');
            b.append('"').append(e.getKey()).append("\":").append(e.getValue() == null ? "null" : e.getValue().toString());
        }
        return b.append('}').toString();
    }
}
