// SPDX-License-Identifier: Apache-2.0
package dev.larder.junit;

import dev.larder.CheckResult;
import dev.larder.Larder;
import dev.larder.SharedServer;
import dev.larder.SnapshotCheck;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.DynamicTest;

/**
 * One JUnit 5 dynamic test per old database of a directory, each migrated by the application's own
 * migrator and judged by the server ({@link Larder#checkSnapshot}).
 *
 * <pre>{@code
 * @TestFactory
 * Stream<DynamicTest> migrations() {
 *     String key = larder.build(fingerprint, MyMigrator::migrate);   // the reference: a fresh database
 *     return LarderSnapshots.tests(Path.of("src/test/resources/snapshots"),
 *             SnapshotCheck.against(Reference.build(key)).migrate(MyMigrator::migrate));
 * }
 * }</pre>
 *
 * <p>The tests are named by the files ({@code v1.sqlite}), in file name order, and point at them (their
 * test source URI). Each one's store is labelled {@code RUN/PACKAGE/TEST} as {@link LarderExtension}'s
 * are: {@code PACKAGE} the fully qualified name of the class that called {@code tests} (the test
 * factory's), {@code TEST} the calling method's name, a space and the file's name
 * ({@code 123/com.acme.shop.MigrationsTest/migrations v1.sqlite}). A snapshot that fails fails its test with
 * an {@link AssertionError} whose message is {@link CheckResult#report()}: the snapshot, its versions, the
 * kept store, then every failure on a line of its own.
 */
public final class LarderSnapshots {
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);

    private LarderSnapshots() {}

    /**
     * {@link #tests(Larder, Path, SnapshotCheck)} with {@link SharedServer#client()}: the server of
     * {@code LARDER_URL}, else one started with {@code larder up} (as {@link LarderExtension}'s).
     */
    public static Stream<DynamicTest> tests(Path dir, SnapshotCheck check) {
        return tests(SharedServer.client(), dir, check);
    }

    /**
     * A dynamic test per {@code *.sqlite} file of {@code dir}, checking it with {@code larder} and
     * {@code check} (which must not set {@code expect} or {@code label}: each file has its own
     * {@code NAME.expect.json}).
     *
     * @throws IllegalArgumentException when {@code dir} holds no {@code *.sqlite} file (lest a mistyped
     *                                  path pass) or {@code check} sets expect or label
     */
    public static Stream<DynamicTest> tests(Larder larder, Path dir, SnapshotCheck check) {
        check.forDirectory();
        List<Path> files = Larder.snapshotFiles(dir);
        if (files.isEmpty()) throw new IllegalArgumentException("no *.sqlite file in " + dir.toAbsolutePath());
        StackWalker.StackFrame caller = WALKER.walk(frames -> frames
                .filter(f -> f.getDeclaringClass() != LarderSnapshots.class).findFirst()).orElse(null);
        String packageName = caller == null ? "test" : caller.getDeclaringClass().getName();
        String method = caller == null ? "tests" : caller.getMethodName();
        String run = SharedServer.run();
        return files.stream().map(file -> {
            String name = file.getFileName().toString();
            SnapshotCheck labelled = check.labelled(SharedServer.label(run, packageName, method + " " + name));
            return DynamicTest.dynamicTest(name, file.toUri(), () -> {
                CheckResult result = larder.checkSnapshot(file, labelled);
                if (!result.passed()) Assertions.fail(result.report());
            });
        });
    }
}
