// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * One template the server serves ({@link Larder#templates()}): its {@code name} (a folder of the fixtures
 * directory), its migration {@code format} ({@code plain}, {@code flyway}, {@code golang-migrate} ...),
 * its {@code versions} in order and the {@code latest} (null without migrations), the data
 * {@code fixtures} it can load, those a store gets when it names none ({@code defaultFixtures}), and its
 * {@code snapshots} (without {@code .sqlite}).
 */
public record TemplateInfo(String name, String format, List<String> versions, String latest,
                           List<String> fixtures, List<String> defaultFixtures, List<String> snapshots) {
    public TemplateInfo {
        versions = Collections.unmodifiableList(new ArrayList<>(versions));
        fixtures = Collections.unmodifiableList(new ArrayList<>(fixtures));
        defaultFixtures = Collections.unmodifiableList(new ArrayList<>(defaultFixtures));
        snapshots = Collections.unmodifiableList(new ArrayList<>(snapshots));
    }

    /** Reads one template of {@code GET /templates}. */
    static TemplateInfo from(Map<String, Object> json) {
        return new TemplateInfo(Json.text(json.get("name")), Json.text(json.get("format")),
                Json.texts(json.get("versions"), "versions"), Json.text(json.get("latest")),
                Json.texts(json.get("fixtures"), "fixtures"), Json.texts(json.get("default_fixtures"), "default_fixtures"),
                Json.texts(json.get("snapshots"), "snapshots"));
    }
}
