// SPDX-License-Identifier: Apache-2.0
package dev.larder.junit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * What store {@link LarderExtension} gives a {@link dev.larder.Store} parameter. On a parameter it
 * describes that parameter's store; on a test class it is the default for parameters without one.
 * Empty strings mean "not set" (the server's defaults apply).
 *
 * <pre>{@code
 * @Test
 * void sync(@LarderStore(template = "gallery", fixtures = {"artists"}) Store store) { ... }
 * }</pre>
 *
 * Within one test, parameters with equal annotations (a {@code @BeforeEach} method's and the
 * test's, say) get the same store.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.PARAMETER, ElementType.TYPE})
public @interface LarderStore {
    /** The template (a folder of the server's fixtures directory). */
    String template() default "";

    /** Data fixtures applied in order after migrating. */
    String[] fixtures() default {};

    /** The version to migrate to (the server's default: latest). */
    String version() default "";

    /** A snapshot to start from. */
    String snapshot() default "";

    /** The key of an app-built template ({@code POST /builds}). */
    String build() default "";

    /**
     * The store's label, as it is; by default {@code RUN/PACKAGE/TEST}: the run prefix ({@code -Dlarder.run},
     * {@code LARDER_RUN}, the CI system's run id), the test class's fully qualified name, the method's name
     * (and the display name when it differs), e.g. {@code 123/com.acme.shop.OrdersTest/checkout}.
     */
    String label() default "";
}
