import LarderCore
import SQLite
import TestSupport
import XCTest

final class CountWaiterTests: XCTestCase {
    func testAWaitAnswersWhenAnotherConnectionCommitsOrTimesOut() throws {
        let scratch = Scratch()
        let core = try CoreServices(scratch)
        let provisioner = core.provisioner
        let (store, _) = try provisioner.createEmpty(label: nil, ttlSeconds: nil)
        let test = try Connection(path: store.databasePath)
        try test.execute("CREATE TABLE events (x)")
        let waiter = CountWaiter()
        let satisfied = expectation(description: "satisfied")
        waiter.wait(on: store, for: try CountCondition.parseList("events>=2"), tables: nil, timeoutMs: 5000) { result in
            if case .satisfied(let counts) = result, counts.first(where: { $0.0 == "events" })?.1 == 2 { satisfied.fulfill() }
        }
        try test.execute("INSERT INTO events VALUES (1)")
        try test.execute("INSERT INTO events VALUES (2)")
        let timedOut = expectation(description: "timed out")
        waiter.wait(on: store, for: try CountCondition.parseList("events>=5"), tables: ["events"], timeoutMs: 200) { result in
            if case .timedOut(let counts) = result, counts.map(\.0) == ["events"] { timedOut.fulfill() }
        }
        wait(for: [satisfied, timedOut], timeout: 10)
        XCTAssertEqual(waiter.waiting, 0)
        XCTAssertThrowsError(try CountCondition.parseList("events~3"))
        XCTAssertEqual(try CountCondition.parseList("a==1, b<2").map(\.description), ["a=1", "b<2"])
    }
}
