// SPDX-License-Identifier: Apache-2.0

/// The live stores by id and in creation order (their `sequence`), so that
/// a page of the newest-first listing costs its own length, not the number
/// of stores: the order is kept as stores come and go (a store almost
/// always comes last: a binary search finds its place), and a page is a
/// walk down from the cursor's place.
struct StoreIndex {
    private var byID: [String: Store] = [:]
    /// Ascending by sequence from `head`; what is before `head` has been
    /// removed (and is nil).
    private var ordered: [Store?] = []
    private var head = 0

    init(_ stores: [Store] = []) {
        ordered = stores.sorted { $0.sequence < $1.sequence }
        byID = Dictionary(stores.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    var count: Int { byID.count }

    /// Every store, oldest first.
    var all: [Store] { ordered[head...].map { $0! } }

    subscript(id: String) -> Store? { byID[id] }

    /// The place of the first store whose sequence is `sequence` or more.
    private func place(of sequence: Int64) -> Int {
        var low = head, high = ordered.count
        while low < high {
            let middle = (low + high) / 2
            if ordered[middle]!.sequence < sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    mutating func insert(_ store: Store) {
        byID[store.id] = store
        if let last = ordered.last, let last, last.sequence > store.sequence {
            ordered.insert(store, at: place(of: store.sequence))
        } else {
            ordered.append(store)
        }
    }

    /// Moves the stores on the shorter side of the one removed, so that
    /// removing the oldest (the reaper, oldest first) or one of the newest
    /// (a test's own) costs O(1), not a shift of every store.
    mutating func remove(_ id: String) -> Store? {
        guard let store = byID.removeValue(forKey: id) else { return nil }
        var at = place(of: store.sequence)
        while at < ordered.count, ordered[at] !== store { at += 1 } // (sequences are unique: found at once)
        guard at < ordered.count else { return store }
        if at - head < ordered.count - at {
            var i = at
            while i > head { ordered[i] = ordered[i - 1]; i -= 1 }
            ordered[head] = nil
            head += 1
            // What has gone before `head` is given back once it is half the array.
            if head > 64 && head * 2 > ordered.count {
                ordered.removeFirst(head)
                head = 0
            }
        } else {
            ordered.remove(at: at)
        }
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
            let stores = ordered[max(head, start - limit)..<start].reversed().map { $0! }
            return (stores, start - head, ordered.count - head)
        }
        var stores: [Store] = []
        var remaining = 0, matching = 0
        for index in (head..<ordered.count).reversed() {
            let store = ordered[index]!
            guard wanted(store) else { continue }
            matching += 1
            guard index < start else { continue }
            remaining += 1
            if stores.count < limit { stores.append(store) }
        }
        return (stores, remaining, matching)
    }
}
