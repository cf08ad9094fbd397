@testable import LarderServer
import XCTest

final class MetricsTests: XCTestCase {
    func testCountsHistogramsAndEscapedLabels() {
        let metrics = Metrics()
        metrics.record(route: "/stores/{id}", status: 200, seconds: 0.0007)
        metrics.record(route: "/stores/{id}", status: 404, seconds: 0.2)
        metrics.record(route: "we\"ird\\route\n", status: 500, seconds: 20)
        let text = metrics.render(gauges: [("larder_live_stores", "Stores.", "gauge", "3")])
        XCTAssertTrue(text.contains("larder_http_requests_total{route=\"/stores/{id}\",status=\"200\"} 1\n"))
        XCTAssertTrue(text.contains("larder_http_request_duration_seconds_bucket{route=\"/stores/{id}\",le=\"0.001\"} 1\n"))
        XCTAssertTrue(text.contains("larder_http_request_duration_seconds_bucket{route=\"/stores/{id}\",le=\"0.25\"} 2\n"))
        XCTAssertTrue(text.contains("larder_http_request_duration_seconds_count{route=\"/stores/{id}\"} 2\n"))
        XCTAssertTrue(text.contains("route=\"we\\\"ird\\\\route\\n\",status=\"500\"} 1\n"), text)
        XCTAssertTrue(text.contains("le=\"+Inf\"} 1\n"))
        XCTAssertTrue(text.hasSuffix("# TYPE larder_live_stores gauge\nlarder_live_stores 3\n"))
    }
}
