// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An error answered by the Larder server ({@code {"error": {"code", "message", "details"}}}), or a
 * failure to reach it. Unchecked.
 *
 * <p>{@link #status()} is the HTTP status (0 when no answer came: {@code code()} is then
 * {@code "connection_failed"}, or {@code "bad_response"} for an answer that is not the API's).
 * {@link #getMessage()} is the server's message as it was sent.
 */
public class LarderException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;
    private final transient Map<String, Object> details;

    public LarderException(int status, String code, String message, Map<String, Object> details) {
        this(status, code, message, details, null);
    }

    public LarderException(int status, String code, String message, Map<String, Object> details, Throwable cause) {
        super(message, cause);
        this.status = status;
        this.code = code == null ? "unknown" : code;
        this.details = details == null
                ? Collections.emptyMap()
                : Collections.unmodifiableMap(new LinkedHashMap<>(details));
    }

    /** The HTTP status, or 0 when the server gave no usable answer. */
    public int status() {
        return status;
    }

    /** The error code, e.g. {@code "store_not_found"}, {@code "unknown_template"}, {@code "timeout"}. */
    public String code() {
        return code;
    }

    /** The server's message (same as {@link #getMessage()}). */
    public String message() {
        return getMessage();
    }

    /** The error's {@code details} object (empty when the server sent none). */
    public Map<String, Object> details() {
        return details;
    }

    @Override
    public String toString() {
        return getClass().getName() + ": " + (status == 0 ? "" : status + " ") + code + ": " + getMessage();
    }
}
