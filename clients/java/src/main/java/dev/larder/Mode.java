// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.Locale;
import java.util.Map;

/**
 * Where a test's SQLite file lives: on the server ({@link #LOCAL}) or in a copy of its own
 * ({@link #REMOTE}), for a test that cannot open the server's files (a container on another CI node,
 * an emulator, a server on another host).
 *
 * <p>A {@link Larder} made without a mode takes it from {@code LARDER_MODE} ({@code remote} or
 * {@code local}; any other non-empty value is an error), else from the server's URL: remote when its
 * host is not a loopback address ({@code localhost}, {@code 127.0.0.0/8}, {@code ::1}), local when it
 * is. So a server the test helper starts itself is local unless {@code LARDER_MODE=remote}.
 */
public enum Mode {
    /** The store's {@link Store#path()} is the server's own file: the test and the server share a machine. */
    LOCAL,
    /**
     * The store's {@link Store#path()} is a local copy, checked out ({@code GET /stores/{id}/database}) when
     * the store is made and handed back with {@link Store#checkIn()} ({@code PUT /stores/{id}/database}).
     */
    REMOTE;

    /** The environment variable that chooses the mode. */
    public static final String VARIABLE = "LARDER_MODE";

    /** {@link #resolve(String, String)} with {@code LARDER_MODE} from the environment. */
    public static Mode fromEnvironment(String url) {
        return resolve(url, System.getenv(VARIABLE));
    }

    /**
     * The mode for the server at {@code url} when {@code LARDER_MODE} is {@code variable}: {@code remote}
     * or {@code local} (case and surrounding blanks aside) as it says; null or blank, remote when
     * {@code url}'s host is not a loopback address ({@link #isLoopback}), else local.
     *
     * @throws LarderException code {@code bad_mode} for any other value
     */
    public static Mode resolve(String url, String variable) {
        if (variable != null && !variable.isBlank()) {
            switch (variable.strip().toLowerCase(Locale.ROOT)) {
                case "remote":
                    return REMOTE;
                case "local":
                    return LOCAL;
                default:
                    throw new LarderException(0, "bad_mode", VARIABLE + " is '" + variable
                            + "': it must be 'remote' or 'local' (or unset: remote for a server whose URL is not a loopback address)",
                            Map.of("variable", VARIABLE, "value", variable));
            }
        }
        String host = url == null || url.isBlank() ? null : URI.create(url.strip()).getHost();
        return host == null || isLoopback(host) ? LOCAL : REMOTE;
    }

    /**
     * Whether {@code host} (as a URL names it) is a loopback address: {@code localhost}, an IPv4 address of
     * {@code 127.0.0.0/8}, {@code ::1} (with or without brackets). Names are not looked up.
     */
    public static boolean isLoopback(String host) {
        String h = host.strip().toLowerCase(Locale.ROOT);
        if (h.endsWith(".")) h = h.substring(0, h.length() - 1);
        if (h.equals("localhost")) return true;
        if (h.startsWith("[") && h.endsWith("]")) h = h.substring(1, h.length() - 1);
        boolean ipv4 = h.matches("\\d{1,3}(\\.\\d{1,3}){3}");
        if (!ipv4 && !h.contains(":")) return false; // a name: not looked up
        if (ipv4) {
            for (String octet : h.split("\\.")) if (Integer.parseInt(octet) > 255) return false;
        }
        try {
            return InetAddress.getByName(h).isLoopbackAddress(); // a literal: no lookup
        } catch (UnknownHostException e) {
            return false;
        }
    }
}
