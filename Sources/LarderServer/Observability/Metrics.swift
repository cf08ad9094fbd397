// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Request counters and latency histograms by route, in Prometheus' text format.
final class Metrics: Sendable {
    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Histogram {
        var counts = [Int](repeating: 0, count: Metrics.buckets.count)
        var sum = 0.0
        var total = 0
    }

    struct State {
        var requests: [String: [Int: Int]] = [:]
        var latency: [String: Histogram] = [:]
    }

    private let state = Mutex(State())

    func record(route: String, status: Int, seconds: Double) {
        state.withLock { s in
            s.requests[route, default: [:]][status, default: 0] += 1
            var h = s.latency[route] ?? Histogram()
            if let i = Metrics.buckets.firstIndex(where: { seconds <= $0 }) { h.counts[i] += 1 }
            h.sum += seconds
            h.total += 1
            s.latency[route] = h
        }
    }

    /// A label value as the text format writes it: backslash, quote and newline escaped.
    static func label(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    /// The exposition text; `gauges` are appended as they are.
    func render(gauges: [(name: String, help: String, type: String, value: String)]) -> String {
        let snapshot = state.withLock { $0 }
        var out = "# HELP larder_http_requests_total HTTP requests by route and status.\n# TYPE larder_http_requests_total counter\n"
        for route in snapshot.requests.keys.sorted() {
            for (status, n) in snapshot.requests[route]!.sorted(by: { $0.key < $1.key }) {
                out += "larder_http_requests_total{route=\"\(Metrics.label(route))\",status=\"\(status)\"} \(n)\n"
            }
        }
        out += "# HELP larder_http_request_duration_seconds Time to answer, by route.\n# TYPE larder_http_request_duration_seconds histogram\n"
        for route in snapshot.latency.keys.sorted() {
            let h = snapshot.latency[route]!
            let route = Metrics.label(route)
            var cumulative = 0
            for (i, bound) in Metrics.buckets.enumerated() {
                cumulative += h.counts[i]
                out += "larder_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "larder_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(h.total)\n"
            out += "larder_http_request_duration_seconds_sum{route=\"\(route)\"} \(h.sum)\n"
            out += "larder_http_request_duration_seconds_count{route=\"\(route)\"} \(h.total)\n"
        }
        for gauge in gauges {
            out += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) \(gauge.type)\n\(gauge.name) \(gauge.value)\n"
        }
        return out
    }
}
