// SPDX-License-Identifier: Apache-2.0
import FileSystem

/// Who may open a store besides the server: `--store-mode` gives the
/// permission bits of its files and `--store-group` their group. A store's
/// directory gets the same bits with `x` wherever there is `r` (0660: 0770),
/// and is setgid with a group, so the `-wal` and `-shm` that SQLite makes
/// later (with the database file's own bits) land in that group too. Test
/// code running as another user can then open, read and write the store:
/// in WAL mode even a reader needs to write `-shm`.
public struct StoreAccess: Sendable {
    public let fileMode: Int
    public let group: UInt32?

    public init(mode: Int, group name: String?) throws {
        fileMode = mode
        if let name {
            guard let id = FileSystem.groupID(name) else {
                throw LarderError(.internalError, "--store-group: there is no group '\(name)'")
            }
            group = id
        } else {
            group = nil
        }
    }

    /// The file bits with `x` wherever there is `r`.
    private var searchable: Int { fileMode | (fileMode & 0o444) >> 2 }

    /// A store's directory: searchable, setgid with a group.
    public var directoryMode: Int { searchable | (group == nil ? 0 : 0o2000) }

    /// The root, `stores/` and `builds/`: enough to pass through to a store
    /// or a build whose name one was given, never to list them (0710, or
    /// 0711 where others may open stores too).
    var passageMode: Int { 0o700 | (fileMode & 0o060 != 0 ? 0o010 : 0) | (fileMode & 0o006 != 0 ? 0o001 : 0) }

    /// Lets the users the setting names pass through `directory` (the root, `stores/`).
    func open(_ directory: String) throws {
        do {
            try FileSystem.setAccess(directory, mode: passageMode, group: group)
        } catch let failure as FileSystem.Failure {
            throw LarderError(.internalError, "cannot open '\(directory)' to the stores' users (--store-mode, --store-group; the server's user must belong to the group): \(failure)")
        }
    }

    /// A store's directory just made, by descriptor (the files made in it
    /// are given their bits as they are made).
    func grant(new directory: OpenDirectory) throws {
        try directory.setAccess(mode: directoryMode, group: group)
    }

    /// Gives a store's directory (or a build's) and its database files their bits and group.
    func grant(store directory: String, database: String = "store.sqlite") throws {
        try FileSystem.setAccess(directory, mode: directoryMode, group: group)
        for suffix in ["", "-wal", "-shm"] where FileSystem.exists(directory + "/" + database + suffix) {
            try FileSystem.setAccess(directory + "/" + database + suffix, mode: fileMode, group: group)
        }
    }
}
