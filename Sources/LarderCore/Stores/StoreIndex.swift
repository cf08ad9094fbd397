// SPDX-License-Identifier: Apache-2.0

/// The live stores by id and in creation order (their `sequence`), so that
/// a page of the newest-first listing costs its own length, not the number
/// of stores: the order is kept as stores come and go (a store almost
/// always comes last: a binary search finds its place), and a page is a
/// walk down from the cursor's place.
struct StoreIndex {
    private var byID: [String: Store] = [:]
    /// Ascending by sequence.
    private var ordered: [Store] = []

    init(_ stores: [Store] = []) {
        ordered = stores.sorted { $0.sequence < $1.sequence }
        byID = Dictionary(stores.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    var count: Int { byID.count }

    /// Every store, oldest first.
    var all: [Store] { ordered }

    subscript(id: String) -> Store? { byID[id] }

    /// The place of the first store whose sequence is `sequence` or more.
    private func place(of sequence: Int64) -> Int {
        var low = 0, high = ordered.count
        while low < high {
            let middle = (low + high) / 2
            if ordered[middle].sequence < sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    mutating func insert(_ store: Store) {
        byID[store.id] = store
        if let last = ordered.last, last.sequence > store.sequence {
            ordered.insert(store, at: place(of: store.sequence))
        } else {
            ordered.append(store)
        }
    }

    mutating func remove(_ id: String) -> Store? {
        guard let store = byID.removeValue(forKey: id) else { return nil }
        var at = place(of: store.sequence)
        while at < ordered.count, ordered[at] !== store { at += 1 } // (sequences are unique: found at once)
        if at < ordered.count { ordered.remove(at: at) }
        return store
    }

    /// Up to `limit` stores older than `below`, newest first, that `wanted`
    /// takes (nil: all); `remaining` is how many it takes older than
    /// `below` in all, `matching` how many in all. Without a filter both
    /// are known without looking at the stores; with one, every store is
    /// asked once.
    func page(below: Int64, limit: Int, wanted: ((Store) -> Bool)?) -> (stores: [Store], remaining: Int, matching: Int) {
        let start = place(of: below)
        guard let wanted else {
            let stores = ordered[max(0, start - limit)..<start].reversed()
            return (Array(stores), start, ordered.count)
        }
        var stores: [Store] = []
        var remaining = 0, matching = 0
        for index in ordered.indices.reversed() where wanted(ordered[index]) {
            matching += 1
            guard index < start else { continue }
            remaining += 1
            if stores.count < limit { stores.append(ordered[index]) }
        }
        return (stores, remaining, matching)
    }
}
