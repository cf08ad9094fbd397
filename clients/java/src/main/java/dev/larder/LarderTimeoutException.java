// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.Collections;
import java.util.Map;

/**
 * A wait that gave up: a {@link Store#waitFor} whose condition did not hold in time (the server's 408
 * {@code timeout} answer to a long poll; {@link #counts()} are the last counts the server saw), or a
 * {@link Larder#build} still waiting for another caller's build at its deadline (status 408, code
 * {@code timeout}, {@code details} with {@code key} and {@code timeout_ms}; no condition, no counts).
 */
public class LarderTimeoutException extends LarderException {
    private static final long serialVersionUID = 1L;

    private final String condition;
    private final transient Map<String, Long> counts;

    public LarderTimeoutException(int status, String code, String message, Map<String, Object> details,
                                  String condition, Map<String, Long> counts) {
        super(status, code, message, details);
        this.condition = condition;
        this.counts = counts == null ? Collections.emptyMap() : Collections.unmodifiableMap(counts);
    }

    /** A timeout without a condition or counts (a {@link Larder#build} that waited too long). */
    public LarderTimeoutException(int status, String code, String message, Map<String, Object> details) {
        this(status, code, message, details, null, null);
    }

    /** The condition that was waited for, e.g. {@code "artworks>=13"}; null for a build. */
    public String condition() {
        return condition;
    }

    /** The last counts seen before the wait gave up ({@code details.counts}); empty for a build. */
    public Map<String, Long> counts() {
        return counts;
    }
}
