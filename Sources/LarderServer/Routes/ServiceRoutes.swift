// SPDX-License-Identifier: Apache-2.0
import LarderCore
import MicroHTTP

/// `/openapi.json`, `/health`, `/metrics`.
enum ServiceRoutes {
    static func openAPI(_ request: Request, _ c: RouteContext) -> Outcome {
        .now(Response(status: 200, contentType: jsonType, bytes: c.server.openAPI))
    }

    static func health(_ request: Request, _ c: RouteContext) -> Outcome {
        .now(json(200, HealthAnswer.json(c.server)))
    }

    static func metrics(_ request: Request, _ c: RouteContext) -> Outcome {
        let s = c.server
        let ready = s.provisioner.readyCopies.stats
        let text = s.metrics.render(gauges: [
            ("larder_live_stores", "Stores on disk now.", "gauge", String(s.registry.count)),
            ("larder_count_waits", "Count waits (long polls) under way.", "gauge", String(s.waiter.waiting)),
            ("larder_trash_backlog", "Deleted stores whose files are still being removed.", "gauge", String(s.registry.trashBacklog)),
            ("larder_undeclared_answers", "Answers with a status their operation does not declare (a contract bug; 0 expected).",
             "gauge", String(s.undeclared.withLock { $0.values.reduce(0, +) })),
            ("larder_store_bytes", "Bytes the stores take on disk (refreshed by the reaper).", "gauge", String(s.registry.diskBytes)),
            ("larder_quota_used_bytes", "Bytes counted against --max-disk-bytes: stores, their own bases, ready copies, copies and builds under way, the trash.",
             "gauge", String(s.registry.usedBytes)),
            ("larder_template_cache_hits_total", "Stores copied from a cached template.", "counter", String(s.cache.stats.hits)),
            ("larder_template_cache_misses_total", "Template databases built.", "counter", String(s.cache.stats.misses)),
            ("larder_template_cache_bytes", "Bytes the template cache takes.", "gauge", String(s.cache.stats.bytes)),
            ("larder_build_waits", "Store requests waiting for an app-built template to finish.", "gauge", String(s.builds.waiting)),
            ("larder_ready_copies", "Ready copies waiting to be handed out.", "gauge", String(ready.copies)),
            ("larder_ready_copy_bytes", "Bytes the ready copies take.", "gauge", String(ready.bytes)),
            ("larder_ready_copy_handouts_total", "Stores handed out from ready copies.", "counter", String(ready.handouts)),
            ("larder_ready_copy_misses_total", "Stores of a template entry made with no ready copy at hand.", "counter", String(ready.misses)),
        ])
        return .now(Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", bytes: Array(text.utf8)))
    }
}
