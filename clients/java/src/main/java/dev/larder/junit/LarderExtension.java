// SPDX-License-Identifier: Apache-2.0
package dev.larder.junit;

import dev.larder.Larder;
import dev.larder.LarderException;
import dev.larder.SharedServer;
import dev.larder.Store;
import dev.larder.StoreOptions;
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
 * when it failed the store is kept ({@code PATCH keep}) and its artifact saved into
 * {@code LARDER_ARTIFACTS} (default {@code larder-artifacts/} in the working directory) as
 * {@code <test name>-<store id>.zip}; the path is published as the report entry
 * {@code larder.artifact} and printed to standard error.
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
        final Map<Object, Store> byKey = new LinkedHashMap<>();
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
            Store existing = stores.byKey.get(key);
            if (existing != null) return existing;
            StoreOptions options = options(annotation, label(context));
            Larder larder;
            try {
                larder = SharedServer.client();
            } catch (LarderException e) {
                // No server to use, or `larder up` failed: its message says why, first.
                throw new ParameterResolutionException(e.getMessage(), e);
            }
            Store store;
            try {
                store = larder.createStore(options);
            } catch (LarderException e) {
                throw new ParameterResolutionException("Larder could not make the store " + options + ": " + e, e);
            }
            stores.byKey.put(key, store);
            context.publishReportEntry("larder.store", store.id());
            return store;
        }
    }

    @Override
    public void afterEach(ExtensionContext context) {
        Stores stores = context.getStore(NAMESPACE).remove(STORES, Stores.class);
        if (stores == null) return;
        boolean failed = context.getExecutionException().isPresent();
        List<RuntimeException> problems = new ArrayList<>();
        List<Store> made;
        synchronized (stores) {
            made = new ArrayList<>(stores.byKey.values());
        }
        for (Store store : made) {
            try {
                if (failed) keepWithArtifact(store, context, problems);
                else store.delete();
            } catch (RuntimeException e) {
                problems.add(e);
            } finally {
                store.close(); // remote mode: the local copy's folder goes
            }
        }
        if (!problems.isEmpty()) {
            RuntimeException first = problems.get(0);
            for (RuntimeException other : problems.subList(1, problems.size())) first.addSuppressed(other);
            throw first;
        }
    }

    private static void keepWithArtifact(Store store, ExtensionContext context, List<RuntimeException> problems) {
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
        store.keep();
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

    private static StoreOptions options(LarderStore a, String label) {
        StoreOptions o = StoreOptions.create();
        if (a != null) {
            if (!a.template().isEmpty()) o.template(a.template());
            if (a.fixtures().length > 0) o.fixtures(a.fixtures());
            if (!a.version().isEmpty()) o.version(a.version());
            if (!a.snapshot().isEmpty()) o.snapshot(a.snapshot());
            if (!a.build().isEmpty()) o.build(a.build());
        }
        o.label(a != null && !a.label().isEmpty() ? a.label() : label);
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
