// SPDX-License-Identifier: Apache-2.0
package dev.larder.junit;

import dev.larder.Larder;
import dev.larder.LarderException;
import dev.larder.SharedServer;
import dev.larder.Store;
import dev.larder.StoreOptions;
import dev.larder.TestStores;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * JUnit 5 extension: gives each test a fresh Larder {@link Store} through a parameter.
 *
 * <pre>{@code
 * @ExtendWith(LarderExtension.class)
 * class GalleryTest {
 *     @Test
 *     void counts(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) { ... }
 * }
 * }</pre>
 *
 * <p>The server is {@link SharedServer#client()}'s: the URL given by {@code -Dlarder.url} or
 * {@code LARDER_URL}, else one that {@code larder up} starts once per JVM and shares with the other
 * processes of the run (the binary: {@code -Dlarder.binary}, {@code LARDER_BINARY}, the one this jar
 * carries, {@code larder} on {@code PATH}); {@code LARDER_TOKEN} is sent when set. The
 * store is labelled {@code RUN/PACKAGE/TEST} ({@link #label}): the run prefix of {@code -Dlarder.run}, else of
 * {@code LARDER_RUN} or the CI system's run id ({@link SharedServer#run()}), the test class's fully
 * qualified name, the method's name; unless {@link LarderStore#label()} names one. After the test, a store
 * is deleted when the test passed;
 * when it failed the store is kept ({@code PATCH keep}, with the test's label) and its artifact saved into
 * {@code LARDER_ARTIFACTS} (default {@code larder-artifacts/} in the working directory) as
 * {@code <test name>-<store id>.zip}; the path is published as the report entry
 * {@code larder.artifact} and printed to standard error.
 *
 * <p>The server's round trips are kept off the tests' path by a {@link TestStores} per server for the run
 * (issue 48): a test whose spec is the last test's gets the store made ahead while that one ran (relabelled to
 * its own label), and one more is asked for; a passing test's delete is sent and its answer read later. A
 * delete that fails is printed to standard error at once and fails the test's class (the test itself has passed
 * by then), naming the test. When the engine's tests are done (JUnit closes the root context's store, before the
 * JVM exits and a self-started server goes), the store made ahead and not taken is deleted, every answer still
 * unread is read, and a failure not reported yet fails the "JUnit Jupiter" container. A fork or a store in remote
 * mode is made and deleted at once, as before.
 *
 * <p>In remote mode ({@link dev.larder.Mode}: {@code LARDER_MODE=remote}, or a {@code LARDER_URL} whose host is
 * not a loopback address) the store's {@link Store#path()} is a local copy. A failed test's copy is checked in
 * first ({@link Store#checkIn()}), so that the kept store and its artifact hold what the test did; when that
 * check-in fails the store is still kept and its artifact saved (holding what was last checked in), and the
 * failure is added to the test's. A passed test's store is deleted without an upload. The local copy's folder
 * is removed either way.
 */
public final class LarderExtension implements ParameterResolver, AfterEachCallback {
    /** Where artifacts go when {@code LARDER_ARTIFACTS} is not set (shared with the other clients: clients/defaults.json). */
    public static final String DEFAULT_ARTIFACTS_DIR = "larder-artifacts";

    /** The longest file-safe test name in an artifact's file name (shared with the other clients). */
    public static final int ARTIFACT_NAME_MAX = 120;

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(LarderExtension.class);
    private static final String STORES = "stores";
    private static final Object NO_ANNOTATION = new Object();

    /** The stores one test asked for, by annotation, in the order they were made. */
    private static final class Stores {
        final Map<Object, Made> byKey = new LinkedHashMap<>();
    }

    /** A test's store, the session that made it, and its label (which a failed test's kept store carries). */
    private record Made(Store store, TestStores session, String label) {}

    /**
     * The run's {@link TestStores} of one server, in the root context's store: JUnit closes it when the engine's
     * tests are done, before the JVM exits (and so before a self-started server goes): the ready store is
     * deleted, the background deletes waited for, and what failed among them and was not yet reported fails the
     * "JUnit Jupiter" container.
     */
    private record Session(TestStores stores) implements ExtensionContext.Store.CloseableResource {
        @Override
        public void close() {
            stores.close();
        }
    }

    /**
     * The background deletes of a test class's passing tests, in the class's context store: JUnit closes it when
     * the class is done, and a delete that failed fails the class (the nearest a test's own outcome, already
     * reported, allows); its message names the test.
     */
    private static final class ClassDeletes implements ExtensionContext.Store.CloseableResource {
        final List<TestStores.Request> requests = new ArrayList<>();

        synchronized void add(TestStores.Request r) {
            requests.add(r);
        }

        @Override
        public void close() {
            List<TestStores.Request> all;
            synchronized (this) {
                all = new ArrayList<>(requests);
                requests.clear();
            }
            List<RuntimeException> problems = new ArrayList<>();
            for (TestStores.Request r : all) {
                try {
                    r.await();
                } catch (RuntimeException e) {
                    problems.add(e);
                }
            }
            throwAll(problems);
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        return parameterContext.getParameter().getType() == Store.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameterContext, ExtensionContext context) {
        if (context.getTestMethod().isEmpty()) {
            throw new ParameterResolutionException(
                    "a Larder Store parameter belongs on a test method or a @BeforeEach/@AfterEach method, not on "
                            + parameterContext.getDeclaringExecutable());
        }
        LarderStore annotation = parameterContext.findAnnotation(LarderStore.class)
                .or(() -> findOnClass(context))
                .orElse(null);
        Object key = annotation == null ? NO_ANNOTATION : annotation;
        Stores stores = context.getStore(NAMESPACE).getOrComputeIfAbsent(STORES, k -> new Stores(), Stores.class);
        synchronized (stores) {
            Made existing = stores.byKey.get(key);
            if (existing != null) return existing.store();
            String label = annotation != null && !annotation.label().isEmpty() ? annotation.label() : label(context);
            StoreOptions options = options(annotation, label);
            Larder larder;
            try {
                larder = SharedServer.client();
            } catch (LarderException e) {
                // No server to use, or `larder up` failed: its message says why, first.
                throw new ParameterResolutionException(e.getMessage(), e);
            }
            TestStores session = session(context, larder);
            Store store;
            try {
                store = session.take(options, label, readyLabel(context));
            } catch (LarderException e) {
                throw new ParameterResolutionException("Larder could not make the store " + options + ": " + e, e);
            }
            stores.byKey.put(key, new Made(store, session, label));
            context.publishReportEntry("larder.store", store.id());
            return store;
        }
    }

    /** The run's {@link TestStores} for {@code larder}'s server, made by the first test that asks. */
    private static TestStores session(ExtensionContext context, Larder larder) {
        // Keyed by the client itself: SharedServer gives one per server for the JVM.
        return context.getRoot().getStore(NAMESPACE)
                .getOrComputeIfAbsent(larder, k -> new Session(new TestStores(larder)), Session.class).stores();
    }

    /** The deletes of the test class of {@code context} (the nearest context of a class, not of a method). */
    private static ClassDeletes classDeletes(ExtensionContext context) {
        ExtensionContext c = context;
        while (c.getParent().isPresent() && (c.getTestMethod().isPresent() || c.getTestClass().isEmpty())) c = c.getParent().get();
        return c.getStore(NAMESPACE).getOrComputeIfAbsent(ClassDeletes.class, k -> new ClassDeletes(), ClassDeletes.class);
    }

    @Override
    public void afterEach(ExtensionContext context) {
        Stores stores = context.getStore(NAMESPACE).remove(STORES, Stores.class);
        if (stores == null) return;
        boolean failed = context.getExecutionException().isPresent();
        List<RuntimeException> problems = new ArrayList<>();
        List<Made> made;
        synchronized (stores) {
            made = new ArrayList<>(stores.byKey.values());
        }
        for (Made m : made) {
            Store store = m.store();
            try {
                if (failed) keepWithArtifact(store, m.label(), context, problems);
                else if (store.isRemote()) store.delete(); // remote mode: as before, at once
                // In the background: a delete that fails fails the test's class (ClassDeletes) and is printed.
                else classDeletes(context).add(m.session().delete(store, testName(context)));
            } catch (RuntimeException e) {
                problems.add(e);
            } finally {
                store.close(); // remote mode: the local copy's folder goes
            }
        }
        throwAll(problems);
    }

    /** The first of {@code problems}, the others suppressed in it; nothing when there are none. */
    private static void throwAll(List<RuntimeException> problems) {
        if (problems.isEmpty()) return;
        RuntimeException first = problems.get(0);
        for (RuntimeException other : problems.subList(1, problems.size())) first.addSuppressed(other);
        throw first;
    }

    /** The label of the store made ahead for the next test: {@code RUN/PACKAGE/}{@value TestStores#READY_NAME}. */
    static String readyLabel(ExtensionContext context) {
        return SharedServer.label(context.getTestClass().map(Class::getName).orElse("test"), TestStores.READY_NAME);
    }

    private static void keepWithArtifact(Store store, String label, ExtensionContext context, List<RuntimeException> problems) {
        if (store.isRemote()) {
            try {
                store.checkIn();
            } catch (LarderException e) {
                String message = "larder: " + testName(context) + " failed, and checking in the local copy of store " + store.id()
                        + " failed too, so the kept store and its artifact hold what was last checked in: " + e.getMessage();
                System.err.println(message);
                problems.add(new LarderException(e.status(), e.code(), message, e.details(), e));
            }
        }
        store.keep(label); // the test's label, whether its store was made for it or made ahead and relabelled
        Path file = artifactsDirectory().resolve(fileSafe(testName(context)) + "-" + store.id() + ".zip");
        Path saved = store.artifact(file);
        context.publishReportEntry("larder.artifact", saved.toString());
        System.err.println("larder: " + testName(context) + " failed; kept store " + store.id()
                + ", artifact " + saved);
    }

    /** {@code LARDER_ARTIFACTS}, default {@code larder-artifacts} in the working directory. */
    static Path artifactsDirectory() {
        String dir = System.getenv("LARDER_ARTIFACTS");
        return Path.of(dir == null || dir.isBlank() ? DEFAULT_ARTIFACTS_DIR : dir).toAbsolutePath();
    }

    private static Optional<LarderStore> findOnClass(ExtensionContext context) {
        for (Optional<ExtensionContext> c = Optional.of(context); c.isPresent(); c = c.get().getParent()) {
            Optional<Class<?>> type = c.get().getTestClass();
            if (type.isPresent()) {
                Optional<LarderStore> found = AnnotationSupport.findAnnotation(type.get(), LarderStore.class);
                if (found.isPresent()) return found;
            }
        }
        return Optional.empty();
    }

    /** The annotation's spec, labelled {@code label}. */
    private static StoreOptions options(LarderStore a, String label) {
        StoreOptions o = StoreOptions.create();
        if (a != null) {
            if (!a.template().isEmpty()) o.template(a.template());
            if (a.fixtures().length > 0) o.fixtures(a.fixtures());
            if (!a.version().isEmpty()) o.version(a.version());
            if (!a.snapshot().isEmpty()) o.snapshot(a.snapshot());
            if (!a.build().isEmpty()) o.build(a.build());
        }
        o.label(label);
        return o;
    }

    /**
     * The label of the test's store, {@code RUN/PACKAGE/TEST} ({@link SharedServer#label(String, String)}):
     * {@code RUN} from {@code -Dlarder.run}, else {@code LARDER_RUN} or the CI system's run id, else none;
     * {@code PACKAGE} the test class's fully qualified name ({@code com.acme.shop.OrdersTest}, a nested
     * class {@code com.acme.shop.OrdersTest$Refunds}); {@code TEST} {@link #testInClass}. Cut to
     * {@link SharedServer#LABEL_MAX_BYTES} bytes at a character boundary.
     */
    static String label(ExtensionContext context) {
        return SharedServer.label(context.getTestClass().map(Class::getName).orElse("test"), testInClass(context));
    }

    /** {@code SimpleClassName.method}, plus the display name when it is not just {@code method()}: the artifact's name. */
    static String testName(ExtensionContext context) {
        return context.getTestClass().map(Class::getSimpleName).orElse("test") + "." + testInClass(context);
    }

    /**
     * The method's name, plus a space and the display name when that is not the default {@code method(Types)}:
     * an invocation of a parameterized or repeated test ({@code counts [1] gallery},
     * {@code retries repetition 2 of 3}), a test with a {@code @DisplayName}.
     */
    static String testInClass(ExtensionContext context) {
        Optional<Method> method = context.getTestMethod();
        String display = context.getDisplayName();
        String name = method.map(Method::getName).orElse(display);
        String defaultDisplay = method.map(m -> m.getName() + "(" + Arrays.stream(m.getParameterTypes())
                .map(Class::getSimpleName).collect(Collectors.joining(", ")) + ")").orElse(display);
        return display.equals(defaultDisplay) || display.equals(name) ? name : name + " " + display;
    }

    /** Letters, digits, {@code . _ -}; other runs become one {@code _}; at most 120 characters. */
    static String fileSafe(String name) {
        String s = name.replaceAll("[^A-Za-z0-9._-]+", "_").replaceAll("^[_.]+|_+$", "");
        if (s.length() > ARTIFACT_NAME_MAX) s = s.substring(0, ARTIFACT_NAME_MAX);
        return s.isEmpty() ? "test" : s;
    }
}
