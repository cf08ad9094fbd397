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
        let ready = s.provisioner.readyCopies.stats, cache = s.cache.stats
        let fleet = s.cache.fleet?.stats ?? FleetCache.Stats(), artifacts = s.artifactUploads?.stats ?? (uploads: 0, errors: 0)
        let fleetGauges: [(name: String, help: String, type: String, value: String)] = [
            ("larder_fleet_cache_hits_total", "Entries downloaded from the fleet's bucket.", "counter", String(fleet.hits)),
            ("larder_fleet_cache_misses_total", "Entries the fleet's bucket did not have.", "counter", String(fleet.misses)),
            ("larder_fleet_cache_errors_total", "Requests to the fleet's bucket that failed (then built here).", "counter", String(fleet.errors)),
            ("larder_fleet_cache_refused_total", "Downloads refused: SHA-256, size, not SQLite, integrity_check.", "counter", String(fleet.refused)),
            ("larder_fleet_cache_skipped_total", "Looks and publishes skipped while a bucket that did not answer is left alone.", "counter", String(fleet.skipped)),
            ("larder_fleet_cache_published_total", "Entries published to the fleet's bucket.", "counter", String(fleet.published)),
            ("larder_fleet_cache_downloaded_bytes_total", "Compressed bytes downloaded from the fleet's bucket.", "counter", String(fleet.downloadedBytes)),
            ("larder_fleet_cache_uploaded_bytes_total", "Compressed bytes uploaded to the fleet's bucket.", "counter", String(fleet.uploadedBytes)),
            ("larder_artifact_uploads_total", "Kept stores' artifacts uploaded (--artifacts-url).", "counter", String(artifacts.uploads)),
            ("larder_artifact_upload_errors_total", "Kept stores' artifacts that could not be uploaded.", "counter", String(artifacts.errors)),
        ]
        let gauges: [(name: String, help: String, type: String, value: String)] = [
            ("larder_live_stores", "Stores on disk now.", "gauge", String(s.registry.count)),
            ("larder_count_waits", "Count waits (long polls) under way.", "gauge", String(s.waiter.waiting)),
            ("larder_trash_backlog", "Deleted stores whose files are still being removed.", "gauge", String(s.registry.trashBacklog)),
            ("larder_undeclared_answers", "Answers with a status their operation does not declare (a contract bug; 0 expected).",
             "gauge", String(s.undeclared.withLock { $0.values.reduce(0, +) })),
            ("larder_store_bytes", "Bytes the stores take on disk (refreshed by the reaper).", "gauge", String(s.registry.diskBytes)),
            ("larder_quota_used_bytes", "Bytes counted against --max-disk-bytes: stores, their own bases, ready copies, copies and builds under way, the trash.",
             "gauge", String(s.registry.usedBytes)),
            ("larder_template_cache_hits_total", "Template entries found in this server's cache or its folder.", "counter", String(cache.hits)),
            ("larder_template_cache_misses_total", "Template entries found in neither (then fetched from the fleet, or built).", "counter", String(cache.misses)),
            ("larder_template_builds_total", "Template databases built by this server (app builds finished through it included).", "counter", String(cache.built)),
            ("larder_template_cache_bytes", "Bytes the template cache's entries known to this server take.", "gauge", String(cache.bytes)),
            ("larder_build_waits", "Store requests waiting for an app-built template to finish.", "gauge", String(s.builds.waiting)),
            ("larder_root_shares_blocks", "1 when copies under the root share blocks (XFS with reflink, btrfs), 0 when each copies every byte.",
             "gauge", s.registry.storage.sharesBlocks ? "1" : "0"),
            ("larder_ready_copies", "Ready copies waiting to be handed out.", "gauge", String(ready.copies)),
            ("larder_ready_copy_bytes", "Bytes the ready copies take.", "gauge", String(ready.bytes)),
            ("larder_ready_copy_handouts_total", "Stores handed out from ready copies.", "counter", String(ready.handouts)),
            ("larder_ready_copy_misses_total", "Stores of a template entry made with no ready copy at hand.", "counter", String(ready.misses)),
        ]
        let text = s.metrics.render(gauges: gauges + fleetGauges)
        return .now(Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", bytes: Array(text.utf8)))
    }
}
