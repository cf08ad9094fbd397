// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The answer of {@link Store#load}: what was loaded, and the store's counts afterwards. */
public record LoadResult(List<String> loaded, Map<String, Long> counts) {
    public LoadResult {
        loaded = Collections.unmodifiableList(new ArrayList<>(loaded));
        counts = Collections.unmodifiableMap(new LinkedHashMap<>(counts));
    }
}
