// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.nio.file.Path;

/**
 * What {@link Larder#build(String, BuildStep)} runs when this caller builds an app-built template:
 * the application's own migrator (Flyway, Liquibase, plain JDBC ...) on an empty SQLite file.
 *
 * <pre>{@code
 * larder.build(key, path -> Flyway.configure().dataSource("jdbc:sqlite:" + path, null, null).load().migrate());
 * }</pre>
 *
 * Open {@code path} with your own driver ({@code "jdbc:sqlite:" + path}), migrate, load what every
 * test needs, commit, and <b>close every connection</b> before returning: the build is then checked
 * and frozen. Throwing discards the build (the next {@code build} of the key builds again).
 */
@FunctionalInterface
public interface BuildStep {
    /** Builds the template in the SQLite file at {@code path} (empty, in WAL mode). */
    void run(Path path) throws Exception;
}
