// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.Objects;

/**
 * How {@link Larder#checkSnapshot} checks an old database: the reference, the application's own
 * migrator, and optionally the expectations, the data-kept rule and the store's label.
 *
 * <pre>{@code
 * SnapshotCheck.against(Reference.build(key)).migrate(path -> flyway("jdbc:sqlite:" + path).migrate())
 * }</pre>
 */
public final class SnapshotCheck {
    private final Reference against;
    private BuildStep migrate;
    private Expectations expect;
    private boolean skipDataCheck;
    private String label;

    private SnapshotCheck(Reference against) {
        this.against = Objects.requireNonNull(against, "against");
    }

    /** A check against {@code reference}; usually {@link Reference#build} of a build the same migrator made. */
    public static SnapshotCheck against(Reference reference) {
        return new SnapshotCheck(reference);
    }

    /**
     * The application's own migrator, run on the uploaded store's file: open it with your driver
     * ({@code "jdbc:sqlite:" + path}), migrate, and close every connection. A {@link BuildStep}, so the
     * one that built the reference can migrate the snapshots. Required.
     */
    public SnapshotCheck migrate(BuildStep migrate) {
        this.migrate = Objects.requireNonNull(migrate, "migrate");
        return this;
    }

    /**
     * The expectations ({@link CheckOptions#expect}) instead of those of {@code NAME.expect.json} beside
     * the file. Not for a directory: each snapshot has its own.
     */
    public SnapshotCheck expect(Expectations expect) {
        this.expect = expect;
        return this;
    }

    /** Leaves out the data-kept rule (a migration that drops data on purpose). */
    public SnapshotCheck skipDataCheck() {
        this.skipDataCheck = true;
        return this;
    }

    /** The uploaded store's label (default: the file's name). Not for a directory. */
    public SnapshotCheck label(String label) {
        this.label = label;
        return this;
    }

    /**
     * A copy of this check whose uploaded store is labelled {@code label} (as {@link #label}); this check is
     * left as it is. {@link dev.larder.junit.LarderSnapshots} labels each snapshot's store so.
     */
    public SnapshotCheck labelled(String label) {
        SnapshotCheck copy = new SnapshotCheck(against);
        copy.migrate = migrate;
        copy.expect = expect;
        copy.skipDataCheck = skipDataCheck;
        copy.label = label;
        return copy;
    }

    Reference reference() {
        return against;
    }

    BuildStep migrator() {
        if (migrate == null) throw new IllegalArgumentException("SnapshotCheck needs migrate(...), the app's own migrator");
        return migrate;
    }

    Expectations expectations() {
        return expect;
    }

    boolean skipsDataCheck() {
        return skipDataCheck;
    }

    String storeLabel() {
        return label;
    }

    /** Throws unless this can check a whole directory (no expect, no label: they are per snapshot). */
    public SnapshotCheck forDirectory() {
        migrator();
        if (expect != null || label != null) {
            throw new IllegalArgumentException("expect and label are per snapshot (each NAME.sqlite has its own "
                    + "NAME.expect.json): use checkSnapshot for one file");
        }
        return this;
    }
}
