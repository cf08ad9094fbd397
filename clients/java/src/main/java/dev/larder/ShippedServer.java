// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * The {@code larder} server that the published jar carries for one platform, as resources under
 * {@code dev/larder/server/PLATFORM/} ({@code larder}, {@code lib/*.so*} and an {@code INDEX} of them
 * written by {@code package.sh}), unpacked once per version into
 * {@code ${XDG_CACHE_HOME:-~/.cache}/larder/VERSION/PLATFORM/} and run from there.
 *
 * <p>The unpacking is atomic: the files go into a temporary sibling folder, get their modes, and the
 * folder is renamed into place; a process that loses the rename to another one (parallel test forks
 * of one build) uses the winner's copy. A copy is used when its {@code INDEX} is the jar's, so a rebuilt
 * jar of the same version replaces it.
 */
final class ShippedServer {
    static final String RESOURCES = "/dev/larder/server/";
    static final String INDEX = "INDEX";

    private ShippedServer() {}

    /** {@code linux-x86_64}, {@code linux-aarch64}, {@code macos-arm64} …, or null when unknown. */
    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String o = os.startsWith("linux") ? "linux" : os.startsWith("mac") ? "macos" : null;
        String a = switch (arch) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> o != null && o.equals("macos") ? "arm64" : "aarch64";
            default -> null;
        };
        return o == null || a == null ? null : o + "-" + a;
    }

    /** One file of the index: its mode ({@code 0755}), size, SHA-256 and path under the platform folder. */
    record Entry(String mode, long size, String sha256, String path) {}

    /** What an {@code INDEX} says: the version and the files. */
    record Index(String text, String version, List<Entry> files) {
        static Index parse(String text) {
            String version = null;
            List<Entry> files = new ArrayList<>();
            for (String line : text.split("\n")) {
                String[] f = line.strip().split(" ");
                if (f.length == 2 && f[0].equals("version")) version = f[1];
                else if (f.length == 5 && f[0].equals("file")) {
                    if (f[4].startsWith("/") || f[4].contains("..")) throw new IllegalArgumentException("bad path in INDEX: " + f[4]);
                    files.add(new Entry(f[1], Long.parseLong(f[2]), f[3], f[4]));
                }
            }
            if (version == null || files.stream().noneMatch(e -> e.path().equals("larder"))) {
                throw new IllegalArgumentException("INDEX names no version or no larder");
            }
            return new Index(text, version, List.copyOf(files));
        }
    }

    /** The jar's index for this platform, or null when the jar carries no server for it. */
    static Index index() {
        String platform = platform();
        if (platform == null) return null;
        try (InputStream in = ShippedServer.class.getResourceAsStream(RESOURCES + platform + "/" + INDEX)) {
            if (in == null) return null;
            return Index.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            throw new LarderException(0, "no_server", "Larder: the server packed in the larder-client jar is unreadable: " + e, null, e);
        }
    }

    /** {@code ${XDG_CACHE_HOME:-~/.cache}/larder}. */
    static Path cacheRoot() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute()) return Path.of(xdg, "larder");
        return Path.of(System.getProperty("user.home"), ".cache", "larder");
    }

    /**
     * The unpacked {@code larder} of this jar for this platform, unpacking it first when the cache has no
     * copy of it; null when the jar carries none for this platform.
     *
     * @throws LarderException when it cannot be unpacked
     */
    static Path binary() {
        Index index = index();
        if (index == null) return null;
        Path dir = cacheRoot().resolve(index.version()).resolve(platform());
        try {
            return unpack(index, dir).resolve("larder");
        } catch (IOException | RuntimeException e) {
            throw new LarderException(0, "no_server", "Larder: could not unpack the server packed in the larder-client jar into "
                    + dir + ": " + e + " (set XDG_CACHE_HOME to a writable folder, or LARDER_BINARY to a larder binary)", null, e);
        }
    }

    /** Unpacks {@code index}'s files into {@code dir} unless a complete copy is there; answers {@code dir}. */
    static Path unpack(Index index, Path dir) throws IOException {
        if (complete(index, dir)) return dir;
        Path parent = Files.createDirectories(dir.getParent());
        String platform = dir.getFileName().toString();
        Path tmp = Files.createTempDirectory(parent, "." + platform + ".unpacking-");
        Path old = null;
        try {
            for (Entry e : index.files()) {
                Path target = tmp.resolve(e.path());
                Files.createDirectories(target.getParent());
                try (InputStream in = ShippedServer.class.getResourceAsStream(RESOURCES + platform + "/" + e.path())) {
                    if (in == null) throw new NoSuchFileException(RESOURCES + platform + "/" + e.path() + " (in the jar)");
                    Files.copy(in, target);
                }
                if (Files.size(target) != e.size()) throw new IOException(e.path() + " is not " + e.size() + " bytes long");
                Files.setPosixFilePermissions(target, PosixFilePermissions.fromString(e.mode().equals("0755") ? "rwxr-xr-x" : "rw-r--r--"));
            }
            Files.writeString(tmp.resolve(INDEX), index.text());
            try {
                Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException taken) {
                // Another process renamed its copy in first: use it. Or a stale copy (another jar of this
                // version, or one damaged) is in the way: move it aside and ours in.
                if (complete(index, dir)) return dir;
                old = Files.createTempDirectory(parent, "." + platform + ".old-");
                try {
                    Files.move(dir, old.resolve("copy"), StandardCopyOption.ATOMIC_MOVE);
                } catch (NoSuchFileException gone) {
                    // another process moved it already
                }
                try {
                    Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
                } catch (IOException again) {
                    if (!complete(index, dir)) throw again;
                }
            }
            return dir;
        } finally {
            deleteTree(tmp);
            if (old != null) deleteTree(old);
        }
    }

    /** {@code dir} holds this index's files: its INDEX is the same text and every file is there, as long. */
    static boolean complete(Index index, Path dir) {
        try {
            if (!Files.readString(dir.resolve(INDEX)).equals(index.text())) return false;
            for (Entry e : index.files()) {
                Path f = dir.resolve(e.path());
                if (!Files.isRegularFile(f) || Files.size(f) != e.size()) return false;
            }
            return Files.isExecutable(dir.resolve("larder"));
        } catch (IOException e) {
            return false;
        }
    }

    static void deleteTree(Path root) {
        if (!Files.exists(root)) return;
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort
                }
            });
        } catch (IOException ignored) {
            // best effort
        }
    }
}
