// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Remote mode (issue 47): for tests that cannot open the server's files.
/// Tests in the iOS Simulator (or on a device, in a container on another CI
/// node, against a server on another host) cannot open a store's `path` on
/// the server's machine; in remote mode a store's ``LarderStore/path`` is a
/// local copy of it instead (`GET /stores/{id}/database`), which the test
/// hands back with ``LarderStore/checkIn()`` (`PUT /stores/{id}/database`).
extension LarderClient {
    /// Whether the stores a client makes are the server's own files or local copies of them.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// `LARDER_MODE` when it is set, else ``remote`` for a server whose
        /// host is not a loopback address and ``local`` for one that is.
        case automatic
        /// A store's ``LarderStore/path`` is the server's live file: the test
        /// runs on the server's machine and opens it with its own SQLite.
        case local
        /// A store's ``LarderStore/path`` is a local copy of the server's
        /// file (`larder-remote-XXXXXX/store.sqlite` in the temporary
        /// directory), handed back with ``LarderStore/checkIn()``.
        case remote
    }

    /// The environment variable that sets the mode: `remote` or `local`.
    public static let modeVariable = "LARDER_MODE"

    /// The mode of the stores this client makes, ``Mode/local`` or
    /// ``Mode/remote``: the initializer's `mode` when not ``Mode/automatic``;
    /// else `LARDER_MODE` (as the environment was when the client was made);
    /// else remote when ``url``'s host is not a loopback address.
    ///
    /// - Throws: ``LarderError`` `bad_mode` (status 0) for a `LARDER_MODE`
    ///   that is neither `remote` nor `local`. The calls whose work depends
    ///   on the mode (``createStore(template:fixtures:version:snapshot:keepSnapshotVersion:label:build:from:ttlSeconds:buildTimeout:)``,
    ///   ``uploadStore(file:label:ttlSeconds:)``, ``build(key:label:timeout:migrate:)``) throw it too.
    public func resolvedMode() throws -> Mode { try resolved.get() }

    /// Whether this client's stores are local copies (``resolvedMode()`` is
    /// ``Mode/remote``); false when the mode does not resolve.
    public var isRemote: Bool { (try? resolved.get()) == .remote }

    /// The mode for a server at `url` (nil: one the test helpers start
    /// themselves, on the loopback address) when `mode` is given and the
    /// environment is `environment`: `mode` unless ``Mode/automatic``; else
    /// `LARDER_MODE` when set and not empty; else ``Mode/remote`` when
    /// `url`'s host is not a loopback address (``isLoopback(host:)``), else
    /// ``Mode/local``.
    ///
    /// - Throws: ``LarderError`` `bad_mode` (status 0) for any other value of `LARDER_MODE`.
    public static func resolveMode(_ mode: Mode = .automatic, url: URL?,
                                   environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Mode {
        if mode != .automatic { return mode }
        if let value = environment[modeVariable], !value.isEmpty {
            switch value {
            case Mode.remote.rawValue: return .remote
            case Mode.local.rawValue: return .local
            default:
                throw LarderError(status: 0, code: "bad_mode",
                                  message: "\(modeVariable) is \"\(value)\": set it to \"remote\" or \"local\" (or leave it unset: "
                                      + "remote for a server that is not on this machine's loopback address)",
                                  details: ["variable": .string(modeVariable), "value": .string(value)])
            }
        }
        guard let url else { return .local }
        return isLoopback(host: url.host ?? "") ? .local : .remote
    }

    /// Whether `host` (as a URL names it, with or without IPv6's brackets) is
    /// a loopback address: `localhost`, an IPv4 address of 127.0.0.0/8, or
    /// `::1`. Names are not looked up.
    public static func isLoopback(host: String) -> Bool {
        var host = host.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        if octets.count == 4, octets.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && UInt8($0) != nil }) {
            return octets[0] == "127"
        }
        return ipv6(host) == Array(repeating: 0, count: 15) + [1]
    }

    /// The 16 bytes of an IPv6 address in text (no zone, no embedded IPv4), or nil.
    static func ipv6(_ text: String) -> [UInt8]? {
        func groups(_ part: Substring) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            for group in part.split(separator: ":", omittingEmptySubsequences: false) {
                guard (1...4).contains(group.count), let value = UInt16(group, radix: 16) else { return nil }
                out.append(value)
            }
            return out
        }
        let halves = text.components(separatedBy: "::")
        let words: [UInt16]
        switch halves.count {
        case 1:
            guard let all = groups(Substring(text)), all.count == 8 else { return nil }
            words = all
        case 2:
            guard let head = groups(Substring(halves[0])), let tail = groups(Substring(halves[1])), head.count + tail.count <= 7 else { return nil }
            words = head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        default:
            return nil
        }
        return words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
    }
}
