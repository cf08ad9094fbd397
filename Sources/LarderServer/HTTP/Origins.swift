// SPDX-License-Identifier: Apache-2.0
import LarderCore
import Synchronization
import MicroHTTP
import Text

/// Which names a request may give in `Host` and `Origin`: a web page on
/// another site (a form POST, a DNS-rebinding page) must not drive the
/// server. Loopback addresses (parsed as addresses: a DNS name that starts
/// with `127.` is not one), the listen address, the public URL's host and
/// `--allowed-hosts` may; a server listening on every address (which needs
/// a token) takes any `Host` unless `--allowed-hosts` narrows it.
struct Origins: Sendable {
    let names: Set<String>
    let anyHost: Bool
    /// What was answered of each `Host` and `Origin` value seen, for the
    /// next request that gives it (a suite sends one or two values, each
    /// thousands of times). Bounded: past `Origins.remembered` values, new
    /// ones are parsed each time.
    private let verdicts = Verdicts()
    static let remembered = 256

    private final class Verdicts: Sendable {
        let known = Mutex<[String: Bool]>([:])
    }

    init(configuration c: Configuration) {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        names.insert(Origins.bare(c.host))
        if let url = c.publicURL, let host = Origins.host(ofURL: url) { names.insert(host) }
        names.formUnion(c.allowedHosts.map(Origins.bare))
        self.names = names
        let wildcard = c.host == "0.0.0.0" || c.host == "::" || c.host == "[::]"
        anyHost = c.allowedHosts.contains("*") || (wildcard && c.allowedHosts.isEmpty)
    }

    func check(_ request: Request) throws {
        if let host = request.header("host"), !remembering("h" + host, { allows(Origins.bare(host)) }) {
            throw LarderError(.forbidden, "the Host '\(host)' is not one of this server's names; add it with --allowed-hosts",
                              details: [("host", .string(host))])
        }
        if let origin = request.header("origin") {
            guard remembering("o" + origin, { Origins.host(ofURL: origin).map(allows) ?? false }) else {
                throw LarderError(.forbidden, "requests from the web page '\(origin)' are refused", details: [("origin", .string(origin))])
            }
            // A page of another port of this machine is another server's (another
            // user's, another run's): on loopback the port is part of who asks.
            if let originHost = Origins.host(ofURL: origin), originHost == "localhost" || Loopback.contains(originHost),
               let host = request.header("host"), Origins.port(ofURL: origin) != Origins.port(ofHost: host) {
                throw LarderError(.forbidden, "requests from the web page '\(origin)' (another port) are refused", details: [("origin", .string(origin))])
            }
        }
    }

    /// The port of `scheme://host[:port]...` (the scheme's own when none is given).
    static func port(ofURL url: String) -> Int? {
        authority(ofURL: url).flatMap { port(ofHost: $0, default: url.lowercased().hasPrefix("https") ? 443 : 80) }
    }

    /// The port of a `Host` value (`[::1]:7464`, `127.0.0.1:7464`, `localhost`).
    static func port(ofHost host: String, default fallback: Int = 80) -> Int? {
        let h = Substring(host.trimmingSpaces())
        let after: Substring
        if h.hasPrefix("[") {
            guard let end = h.firstIndex(of: "]") else { return nil }
            after = h[h.index(after: end)...]
        } else {
            guard h.filter({ $0 == ":" }).count <= 1 else { return nil }
            after = h.firstIndex(of: ":").map { h[$0...] } ?? ""
        }
        guard after.hasPrefix(":") else { return after.isEmpty ? fallback : nil }
        return Int(after.dropFirst())
    }

    /// `verdict()`, or what it answered last time for `key`.
    private func remembering(_ key: String, _ verdict: () -> Bool) -> Bool {
        if let known = verdicts.known.withLock({ $0[key] }) { return known }
        let answer = verdict()
        verdicts.known.withLock { if $0.count < Origins.remembered { $0[key] = answer } }
        return answer
    }

    private func allows(_ host: String) -> Bool {
        anyHost || names.contains(host) || Loopback.contains(host)
    }

    /// `Host: [::1]:7464` → `::1`, `Example.org.:80` → `example.org`.
    static func bare(_ host: String) -> String {
        var h = Substring(host.trimmingSpaces().lowercased())
        if h.hasPrefix("[") {
            h = h.dropFirst()
            if let end = h.firstIndex(of: "]") { h = h[..<end] }
        } else if h.filter({ $0 == ":" }).count == 1, let colon = h.firstIndex(of: ":") {
            h = h[..<colon]
        }
        while h.hasSuffix(".") { h = h.dropLast() }
        return String(h)
    }

    /// The host of `scheme://host[:port][/...]`, or nil (`null`, no scheme).
    static func host(ofURL url: String) -> String? {
        guard let authority = authority(ofURL: url) else { return nil }
        let host = bare(authority)
        return host.isEmpty ? nil : host
    }

    /// `host[:port]` of `scheme://[user@]host[:port][/...]`, or nil without a scheme.
    private static func authority(ofURL url: String) -> String? {
        guard let scheme = url.firstRange(of: "://") else { return nil }
        let authority = url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return authority.split(separator: "@").last.map(String.init) ?? ""
    }
}
