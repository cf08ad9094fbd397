package dev.larder;

import java.util.Collections;
import java.util.Map;

/**
 * A {@link Store#waitFor} whose condition did not hold in time (the server's 408 {@code timeout}
 * answer to a long poll). {@link #counts()} are the last counts the server saw.
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

    /** The condition that was waited for, e.g. {@code "artworks>=13"}. */
    public String condition() {
        return condition;
    }

    /** The last counts seen before the wait gave up ({@code details.counts}). */
    public Map<String, Long> counts() {
        return counts;
    }
}
