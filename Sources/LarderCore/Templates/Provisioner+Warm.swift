// SPDX-License-Identifier: Apache-2.0
import FileSystem
import FoundationEssentials

extension Provisioner {
    /// One cache entry `warm` made or found.
    public struct Warmed: Sendable {
        public var template: String
        public var snapshot: String?
        public var key: String?
        /// False when the entry was already in the cache.
        public var built: Bool
        public var milliseconds: Double
        public var bytes: Int64
        /// Why the entry could not be built.
        public var failure: String?
    }

    /// Builds, ahead of any request, the cache entries a test most likely
    /// asks for first: each template at its latest version with its default
    /// fixtures, and each snapshot migrated to latest with them (what
    /// `POST /stores {"template"}` and `{"template", "snapshot"}` copy).
    /// A template or snapshot that does not build is reported, and the rest
    /// go on. `template` narrows it to one (unknown: `unknown_template`).
    public func warm(template name: String? = nil, each: (Warmed) -> Void = { _ in }) throws -> [Warmed] {
        guard FileSystem.isDirectory(catalog.directory) else {
            throw LarderError(.notFound, "no fixtures directory '\(catalog.directory)'", details: [("fixtures", .string(catalog.directory))])
        }
        let names = name.map { [$0] } ?? catalog.names()
        guard !names.isEmpty else { throw LarderError.badRequest("no templates in '\(catalog.directory)': nothing to warm") }
        var results: [Warmed] = []
        for templateName in names {
            let template: Template
            do {
                template = try catalog.template(templateName)
            } catch let error as LarderError where name == nil {
                // One broken template does not keep the others cold.
                results.append(Warmed(template: templateName, built: false, milliseconds: 0, bytes: 0, failure: error.message))
                each(results[results.count - 1])
                continue
            }
            for snapshot in [nil] + template.snapshotNames.map(Optional.some) {
                var request = Request()
                request.template = template.name
                request.snapshot = snapshot
                let started = ContinuousClock.now
                var result = Warmed(template: template.name, snapshot: snapshot, built: false, milliseconds: 0, bytes: 0)
                do {
                    let plan = try plan(request)
                    result.key = plan.key
                    result.built = !cache.contains(plan.key)
                    result.bytes = try cache.entry(plan.key) { path in try build(plan, at: path) }.size
                } catch {
                    result.failure = (error as? LarderError)?.message ?? "\(error)"
                }
                result.milliseconds = (ContinuousClock.now - started).milliseconds
                each(result)
                results.append(result)
            }
        }
        return results
    }
}
