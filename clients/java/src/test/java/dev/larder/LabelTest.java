package dev.larder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * How the test helpers label their stores (clients/README.md, "How a test helper labels its stores"):
 * {@link SharedServer#run(String, Map)} with environments given as maps (a running JVM's own cannot be
 * set), {@link SharedServer#label} and {@link SharedServer#cut}. ExtensionTest runs the extension with
 * them for real.
 */
class LabelTest {
    static final String PACKAGE = "com.acme.shop.OrdersTest";

    @Test
    void larderRunIsThePrefix() {
        String run = SharedServer.run(null, Map.of("LARDER_RUN", "nightly-7"));
        assertEquals("nightly-7", run);
        assertEquals("nightly-7/com.acme.shop.OrdersTest/checkout", SharedServer.label(run, PACKAGE, "checkout"));
        // It comes first, before a CI system's run id.
        assertEquals("nightly-7", SharedServer.run(null,
                Map.of("LARDER_RUN", "nightly-7", "GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123")));
        // Empty is not set.
        assertEquals("123", SharedServer.run(null, Map.of("LARDER_RUN", "", "GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123")));
    }

    @Test
    void aCiSystemsRunIdIsThePrefixOnlyOnThatSystem() {
        assertEquals("123", SharedServer.run(null, Map.of("GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123")));
        assertEquals("123/com.acme.shop.OrdersTest/checkout", SharedServer.label(
                SharedServer.run(null, Map.of("GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123")), PACKAGE, "checkout"));
        // Without its condition variable (or with it empty) the variable is ignored ...
        assertNull(SharedServer.run(null, Map.of("GITHUB_RUN_ID", "123")));
        assertNull(SharedServer.run(null, Map.of("GITHUB_RUN_ID", "123", "GITHUB_ACTIONS", "")));
        assertNull(SharedServer.run(null, Map.of("BUILD_TAG", "jenkins-shop-42")));
        // ... and the next pair that holds is taken.
        assertEquals("456", SharedServer.run(null, Map.of("GITHUB_RUN_ID", "123", "GITLAB_CI", "true", "CI_PIPELINE_ID", "456")));
        // Every system of run_variables.
        assertEquals("456", SharedServer.run(null, Map.of("GITLAB_CI", "true", "CI_PIPELINE_ID", "456")));
        assertEquals("0190-ab", SharedServer.run(null, Map.of("BUILDKITE", "true", "BUILDKITE_BUILD_ID", "0190-ab")));
        assertEquals("jenkins-shop-42", SharedServer.run(null, Map.of("JENKINS_URL", "https://ci/", "BUILD_TAG", "jenkins-shop-42")));
        assertEquals("wf-1", SharedServer.run(null, Map.of("CIRCLECI", "true", "CIRCLE_WORKFLOW_ID", "wf-1")));
        // Order: GitHub before GitLab when both hold.
        assertEquals("123", SharedServer.run(null, Map.of("GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123",
                "GITLAB_CI", "true", "CI_PIPELINE_ID", "456")));
    }

    @Test
    void theOptionWins() {
        Map<String, String> env = Map.of("LARDER_RUN", "env", "GITHUB_ACTIONS", "true", "GITHUB_RUN_ID", "123");
        assertEquals("mine", SharedServer.run("mine", env));
        assertEquals("mine/com.acme.shop.OrdersTest/checkout", SharedServer.label(SharedServer.run("mine", env), PACKAGE, "checkout"));
        // A blank option is none.
        assertEquals("env", SharedServer.run(" ", env));
        assertEquals("mine", SharedServer.run("mine", Map.of()));
    }

    @Test
    void withoutAnyTheLabelIsPackageSlashTest() {
        assertNull(SharedServer.run(null, Map.of()));
        assertNull(SharedServer.run(null, Map.of("PATH", "/usr/bin", "CI", "true")));
        assertEquals("com.acme.shop.OrdersTest/checkout", SharedServer.label(null, PACKAGE, "checkout"));
        assertEquals("com.acme.shop.OrdersTest/checkout", SharedServer.label("", PACKAGE, "checkout"));
        assertEquals("com.acme.shop.OrdersTest$Refunds/checkout", SharedServer.label(null, PACKAGE + "$Refunds", "checkout"));
    }

    @Test
    void twoTestsOfTheSameNameInTwoClassesAreToldApart() {
        String a = SharedServer.label("7", "com.acme.shop.OrdersTest", "checkout");
        String b = SharedServer.label("7", "com.acme.billing.OrdersTest", "checkout");
        assertNotEquals(a, b);
        assertEquals("7/com.acme.billing.OrdersTest/checkout", b);
    }

    @Test
    void aLongLabelIsCutTo256BytesAtACharacterBoundary() {
        assertEquals(256, SharedServer.LABEL_MAX_BYTES);
        // "rr/com.acme.shop.OrdersTest/" is 28 bytes; 100 euro signs are 300: 228 bytes are left, 76 signs.
        String euros = "\u20ac".repeat(100);
        String label = SharedServer.label("rr", PACKAGE, euros);
        assertEquals("rr/com.acme.shop.OrdersTest/" + "\u20ac".repeat(76), label);
        assertEquals(256, label.getBytes(StandardCharsets.UTF_8).length);
        // One byte more of prefix: the 76th sign no longer fits whole, and goes.
        String shorter = SharedServer.label("rrr", PACKAGE, euros);
        assertEquals("rrr/com.acme.shop.OrdersTest/" + "\u20ac".repeat(75), shorter);
        assertEquals(254, shorter.getBytes(StandardCharsets.UTF_8).length);
        // Four-byte characters (surrogate pairs in Java) are not split either.
        String emoji = SharedServer.label("r", PACKAGE, "\ud83e\uddc0".repeat(80));
        int bytes = emoji.getBytes(StandardCharsets.UTF_8).length;
        assertTrue(bytes <= 256 && bytes > 252, bytes + "");
        assertTrue(emoji.endsWith("\ud83e\uddc0"), emoji);
        assertEquals(emoji, new String(emoji.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8));
        // Two-byte ones, at every offset.
        for (int pad = 0; pad < 4; pad++) {
            String cut = SharedServer.label("x".repeat(pad + 1), PACKAGE, "\u00e4".repeat(200));
            int n = cut.getBytes(StandardCharsets.UTF_8).length;
            assertTrue(n == 256 || n == 255, n + "");
            assertTrue(cut.endsWith("\u00e4"), cut);
        }
        // Short enough: as it is.
        String exact = "a".repeat(256);
        assertEquals(exact, SharedServer.cut(exact, 256));
        assertEquals("a".repeat(256), SharedServer.cut(exact + "b", 256));
        assertEquals("", SharedServer.cut("\u20ac", 2));
        assertEquals("ab", SharedServer.cut("ab\u20ac", 4));
    }
}
