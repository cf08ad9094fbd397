// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Remote mode: a store's local copy, checked out (`GET /stores/{id}/database`)
// and checked in (`PUT /stores/{id}/database`). See `LarderClient.Mode`.

/// A remote store's local copy: `folder/store.sqlite`, in a private folder
/// of its own. Shared by every copy of the ``LarderStore`` value; the calls
/// that check it out or in take turns (``exclusive(_:)``), so each sees the
/// other's whole work.
final class LocalCopy: @unchecked Sendable {
    static let fileName = "store.sqlite"
    static let folderPrefix = "larder-remote-"
    /// How far modification times are set back after a check-out or a
    /// check-in: well over any file system's timestamp granularity, so that
    /// a write right after it that keeps the size still changes the state.
    static let settleBack: TimeInterval = 3

    let folder: URL
    let file: URL

    private let lock = NSLock()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var syncedState: FileState?
    private var removed = false

    /// A fresh private folder (mode 0700) in the temporary directory.
    init() throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent(LocalCopy.folderPrefix + "XXXXXX").path
        var bytes = Array(template.utf8CString)
        let made = bytes.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!) != nil }
        guard made else {
            let code = errno
            throw LarderError(status: 0, code: "local_copy",
                              message: "could not make a folder for a store's local copy in \(FileManager.default.temporaryDirectory.path): "
                                  + String(cString: strerror(code)))
        }
        folder = URL(fileURLWithPath: String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                     isDirectory: true)
        file = folder.appendingPathComponent(LocalCopy.fileName)
    }

    /// The files as they were last checked out or in.
    var synced: FileState? {
        get { lock.withLock { syncedState } }
        set { lock.withLock { syncedState = newValue } }
    }

    /// Removed (``LarderStore/close()``, ``LarderStore/delete()``).
    var isRemoved: Bool { lock.withLock { removed } }

    /// Runs `body` while no other check-out, check-in or removal of this copy runs.
    func exclusive<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let free: Bool = lock.withLock {
                if busy {
                    waiters.append(continuation)
                    return false
                }
                busy = true
                return true
            }
            if free { continuation.resume() }
        }
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiters.isEmpty {
                busy = false
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()
    }

    /// Removes the folder; the caller is ``exclusive(_:)`` (or owns the copy).
    func remove() throws {
        let first: Bool = lock.withLock {
            defer { removed = true }
            return !removed
        }
        guard first else { return }
        try FileManager.default.removeItem(at: folder)
    }

    /// Whether the files changed since they were last checked out or in.
    func changed() throws -> Bool { try FileState(of: file) != synced }

    /// Sets the modification times of the database and its -wal back by
    /// ``settleBack`` and answers the files' state then.
    func settle() throws -> FileState {
        let past = Date(timeIntervalSinceNow: -LocalCopy.settleBack)
        for path in [file.path, file.path + "-wal"] where FileManager.default.fileExists(atPath: path) {
            try FileManager.default.setAttributes([.modificationDate: past], ofItemAtPath: path)
        }
        return try FileState(of: file)
    }
}

/// What tells that a local copy changed: the size and modification time of
/// the database and of its `-wal` (size 0 and no time when there is none,
/// or an empty one).
struct FileState: Equatable {
    var size: Int64
    var modified: Date?
    var walSize: Int64 = 0
    var walModified: Date?

    init(of file: URL) throws {
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        modified = attributes[.modificationDate] as? Date
        if let wal = try? FileManager.default.attributesOfItem(atPath: file.path + "-wal"),
           let walSize = (wal[.size] as? NSNumber)?.int64Value, walSize > 0 {
            self.walSize = walSize
            walModified = wal[.modificationDate] as? Date
        }
    }
}

extension LarderStore {
    /// Whether this store is a local copy of the server's (remote mode):
    /// ``path`` is then that copy, ``Info/path`` the server's file, and
    /// ``checkIn()`` hands the copy back.
    public var isRemote: Bool { copy != nil }

    /// Hands the local copy back to the server (`PUT /stores/{id}/database`):
    /// the server's store becomes the copy, all or nothing. A copy with a
    /// non-empty `store.sqlite-wal` beside it (a WAL-mode database still
    /// open, or closed without a checkpoint, as Core Data leaves its files)
    /// goes as a zip of the two (`application/zip`); one without, as the
    /// file itself (`application/vnd.sqlite3`). The store's creation state
    /// stays the server's, so ``diff(tables:limit:)``, ``reset()``,
    /// ``artifact(to:)`` and snapshot checks compare the copy against what
    /// the store was made as. Answers the store as the server describes it
    /// now (``info`` stays as this value was made).
    ///
    /// Close your own connections to ``path`` first, or at least let no write
    /// run: a copy read while a connection writes may be torn. While
    /// something on the server holds a write transaction on the store (409
    /// `conflict`), it asks again a few times, as `Retry-After` says.
    ///
    /// In local mode there is nothing to hand back: it answers ``info`` and
    /// sends nothing.
    ///
    /// - Throws: ``LarderError``: 400/415/422 for a copy that is not a sound
    ///   SQLite database, 413 when it is too big, 429 over the server's disk
    ///   limit; `no_local_copy` (status 0) after ``close()`` or ``delete()``;
    ///   `check_in_failed` (status 0) when the files changed while they were read.
    @discardableResult
    public func checkIn() async throws -> Info {
        guard let copy else { return info }
        return try await copy.exclusive {
            guard !copy.isRemoved else {
                throw LarderError(status: 0, code: "no_local_copy",
                                  message: "store \(id): its local copy was removed (close() or delete()): nothing to check in")
            }
            return try await checkInHeld(copy)
        }
    }

    /// Removes the local copy of a remote store and its folder; the store
    /// stays on the server (``delete()`` removes both). ``path`` is gone
    /// afterwards, ``checkIn()`` an error, and the other calls work on the
    /// server's store alone. In local mode it does nothing. Close your own
    /// connections to ``path`` first.
    public func close() async throws {
        guard let copy else { return }
        try await copy.exclusive { try copy.remove() }
    }

    /// The check-in itself; the caller is `copy.exclusive`.
    func checkInHeld(_ copy: LocalCopy) async throws -> Info {
        let state = try FileState(of: copy.file)
        func read(_ file: URL, _ size: Int64) throws -> Data {
            let data = try Data(contentsOf: file)
            guard data.count == size else {
                throw LarderError(status: 0, code: "check_in_failed",
                                  message: "store \(id): \(file.lastPathComponent) changed while it was read (\(data.count) bytes, "
                                      + "not \(size)): close your connections to \(path) before checking it in")
            }
            return data
        }
        let body: Data, type: String
        if state.walSize > 0 {
            // The database without its WAL is not the store: both go, zipped.
            let wal = URL(fileURLWithPath: copy.file.path + "-wal")
            body = try StoredZip.archive([
                .init(name: LocalCopy.fileName, data: try read(copy.file, state.size), modified: state.modified ?? Date()),
                .init(name: LocalCopy.fileName + "-wal", data: try read(wal, state.walSize), modified: state.walModified ?? Date()),
            ])
            type = "application/zip"
        } else {
            body = try read(copy.file, state.size)
            type = "application/vnd.sqlite3"
        }
        let answer: Info = try await client.withConflictRetries {
            try await client.send("PUT", base + "/database", raw: body, contentType: type,
                                  timeout: max(client.requestTimeout, LarderClient.Defaults.downloadTimeout))
        }
        // What was sent is the server's now: unless the files changed
        // meanwhile (a write during the check-in), the next change is told from it.
        copy.synced = state
        if try FileState(of: copy.file) == state { copy.synced = try copy.settle() }
        return answer
    }

    /// Downloads the store over the local copy: into a temporary file of the
    /// copy's folder, checked against the server's `X-Larder-SHA256`, then
    /// the old copy's `-wal` and `-shm` removed (they would be read as the
    /// new file's) and the file renamed over `store.sqlite`. The caller is
    /// `copy.exclusive`, or owns the copy.
    func checkOutHeld(_ copy: LocalCopy) async throws {
        let part = copy.folder.appendingPathComponent(".\(LocalCopy.fileName).\(UUID().uuidString).part")
        do {
            try await client.downloadDatabase(base + "/database", to: part)
            for suffix in ["-wal", "-shm"] {
                let stale = copy.file.path + suffix
                if FileManager.default.fileExists(atPath: stale) { try FileManager.default.removeItem(atPath: stale) }
            }
            guard rename(part.path, copy.file.path) == 0 else {
                let code = errno
                throw LarderError(status: 0, code: "local_copy",
                                  message: "store \(id): could not rename its download over \(copy.file.path): " + String(cString: strerror(code)))
            }
        } catch {
            try? FileManager.default.removeItem(at: part)
            throw error
        }
        copy.synced = try copy.settle()
    }

    /// Runs `change`, a call that changes the store on the server, keeping a
    /// remote store's local copy the test's working copy: checked in first
    /// when it changed since it was last checked out or in (unless
    /// `checkInFirst` is false), downloaded over again afterwards when
    /// `refresh` says the answer changed the store. In local mode: `change`.
    func serverChange<Answer>(checkInFirst: Bool = true, _ change: () async throws -> Answer,
                              refresh: (Answer) -> Bool = { _ in true }) async throws -> Answer {
        guard let copy else { return try await change() }
        return try await copy.exclusive {
            if checkInFirst, !copy.isRemoved, try copy.changed() { _ = try await checkInHeld(copy) }
            let answer = try await change()
            if refresh(answer), !copy.isRemoved { try await checkOutHeld(copy) }
            return answer
        }
    }
}

extension LarderClient {
    /// The store `info` just made, in `mode`: in remote mode with its local
    /// copy (a store whose copy cannot be made is deleted again: nobody
    /// would delete it).
    func madeStore(_ info: LarderStore.Info, mode: Mode) async throws -> LarderStore {
        guard mode == .remote else { return LarderStore(client: self, info: info) }
        let copy: LocalCopy
        do {
            copy = try LocalCopy()
        } catch {
            await deleteQuietly(info.id)
            throw error
        }
        let store = LarderStore(client: self, info: info, copy: copy)
        do {
            try await store.checkOutHeld(copy)
        } catch {
            try? copy.remove()
            await deleteQuietly(info.id)
            throw error
        }
        return store
    }

    func deleteQuietly(_ id: String) async {
        let _: Empty? = try? await send("DELETE", "/stores/" + LarderClient.escapePath(id))
    }

    /// `GET path` (a store's database) into `destination`, which must not
    /// exist, checked against the SHA-256 the server sends with it
    /// (`X-Larder-SHA256`), if any.
    func downloadDatabase(_ path: String, to destination: URL) async throws {
        let request = makeRequest("GET", path, query: [], timeout: max(requestTimeout, Defaults.downloadTimeout))
        let (temporary, response) = try await session.download(for: request)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let http = try LarderClient.httpResponse(response)
        guard (200..<300).contains(http.statusCode) else {
            throw LarderClient.error(status: http.statusCode, body: (try? Data(contentsOf: temporary)) ?? Data(), response: http)
        }
        if let expected = http.value(forHTTPHeaderField: "X-Larder-SHA256"), !expected.isEmpty {
            var sum = SHA256()
            let handle = try FileHandle(forReadingFrom: temporary)
            defer { try? handle.close() }
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { sum.update(chunk) }
            let got = sum.hex()
            guard got == expected.lowercased() else {
                throw LarderError(status: http.statusCode, code: "download_failed",
                                  message: "GET \(path): the database downloaded has the SHA-256 \(got), not the \(expected) the server sent",
                                  requestID: http.value(forHTTPHeaderField: "X-Request-Id"))
            }
        }
        do {
            try FileManager.default.moveItem(at: temporary, to: destination)
        } catch {
            // Another file system: copy instead.
            try FileManager.default.copyItem(at: temporary, to: destination)
        }
    }

    /// `call`'s answer, asked again while the server answers 409 `conflict`
    /// (a write transaction open on the store or build), up to
    /// ``Defaults/finishAttempts`` times, pausing as `Retry-After` says
    /// (``Defaults/retryAfterDefault`` when it says nothing, at most ``Defaults/retryAfterMax``).
    func withConflictRetries<Answer>(_ call: () async throws -> Answer) async throws -> Answer {
        var attempt = 1
        while true {
            do {
                return try await call()
            } catch let error as LarderError where error.code == "conflict" && attempt < Defaults.finishAttempts {
                let asked = error.retryAfter.map { Duration.seconds($0) } ?? Defaults.retryAfterDefault
                try await Task.sleep(for: max(.zero, min(asked, Defaults.retryAfterMax)))
                attempt += 1
            }
        }
    }
}
