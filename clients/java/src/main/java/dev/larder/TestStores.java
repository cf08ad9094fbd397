// SPDX-License-Identifier: Apache-2.0
package dev.larder;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * A test helper's stores for one test run (one JVM, one server), with the server's round trips off the tests'
 * path (issue 48); {@link dev.larder.junit.LarderExtension} uses one, and so can the helpers of other test
 * frameworks. Thread-safe.
 *
 * <ul>
 *   <li>{@link #take}: the test's store. When the last store taken had the same spec (template, fixtures,
 *       version, snapshot, build), the one asked for ahead is handed out (its answer read, waiting for it if it
 *       has not come yet); else, and when that one is older than {@link #READY_MAX_AGE} or could not be made,
 *       the store is made now, as {@link Larder#createStore} makes it. Then one more store of the same spec is
 *       asked for ahead, labelled {@code RUN/PACKAGE/}{@value #READY_NAME}; a ready store of another spec is
 *       deleted. Forks ({@code from}) and a client in remote mode make every store now and nothing ahead.</li>
 *   <li>{@link #delete}: a passing test's store, deleted in the background; the {@link Request} answered says how
 *       that went ({@link Request#await}).</li>
 *   <li>{@link #close}: the session's end. The ready store is deleted, every answer not read yet is read (at
 *       most {@link #CLOSE_TIMEOUT} in all), and the failed deletes no caller awaited are thrown. Call it before
 *       the server goes.</li>
 * </ul>
 *
 * <p><b>The label of a store made ahead.</b> It is relabelled to the test's label ({@code PATCH /stores/{id}})
 * before the first request of the test's handle (so that the test sees its label), by a failed test's
 * {@link Store#keep(String)} (one request: kept and labelled), and by a daemon thread once the test has held it
 * {@link #RELABEL_AFTER} (so that the dashboard and {@code GET /stores} name a test that runs long, or waits at
 * a breakpoint). A passing test quicker than that which does not use its handle is deleted under the ready label:
 * the server's PATCH (a durable journal line) cost 0.9 ms of its CPU, three times a create's, on a 2-core
 * machine where every test shares the CPU with it (issue 48).
 *
 * <p><b>"In the background"</b> means: no other thread. A passing test's delete waits in this object until the next
 * test asks for its store ahead: the deletes and that {@code POST /stores} go on one kept-alive connection in one
 * write (pipelined, answered in order), so that the server is woken once a test, and their answers are read later,
 * by the thread that next needs them or has time for them. The server works on them while the tests run: on a busy
 * 2-core machine, handing each request to a thread, or waking the server twice a test, cost more than the
 * request (issue 48). A store made ahead is read when the next test takes it; deletes are sent at once when
 * {@link #MAX_IN_FLIGHT} wait, or when someone awaits one, or at {@link #close}; their answers are read when they
 * have come, when more than {@link #MAX_IN_FLIGHT} are unread (the oldest first, waiting), when the caller awaits
 * them, or at {@link #close}. A failed delete is printed to standard error when its answer is read, and thrown by
 * {@link Request#await} or else by {@link #close}. A failed relabel is printed only (a failed test's keep sets the
 * label again). A ready store that could not be made is printed only: the test's store is then made now, and
 * should that fail too, the ready store's failure is suppressed in its exception.
 */
public final class TestStores implements AutoCloseable {
    /**
     * A ready store older than this, or than a fifth of its own lifetime (its {@code expires_at} less its
     * {@code created_at}: the server's {@code --ttl-seconds}, an hour by default), is deleted, not handed out.
     */
    public static final Duration READY_MAX_AGE = Duration.ofSeconds(60);

    /** The most deletes not sent (then they are sent), and not read (beyond it, the oldest is read, waited for). */
    public static final int MAX_IN_FLIGHT = 4;

    /** How long {@link #close} waits for the answers not read yet, in all. */
    public static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);

    /** The TEST part of a ready store's label, until its test's label replaces it. */
    public static final String READY_NAME = "(ready for the next test)";

    /** A store made ahead that a test has held this long is relabelled to the test's label by a daemon thread. */
    public static final Duration RELABEL_AFTER = Duration.ofMillis(500);

    private final Larder larder;
    private final Duration readyMaxAge;
    private final Object lock = new Object();
    private Ready ready; // guarded by lock
    private final ArrayDeque<Request> unread = new ArrayDeque<>(); // guarded by lock: deletes not read, oldest first
    private final List<Request> unsent = new ArrayList<>(); // guarded by lock: deletes to send with the next request
    /** Held while deletes are sent, so that a reader of one finds it sent once it has the lock. */
    private final Object sending = new Object();
    private final List<Request> failed = new ArrayList<>(); // guarded by lock: failed deletes, not yet thrown to anyone
    private boolean closed; // guarded by lock
    /** Stores made ahead that tests hold, their relabel not sent yet; the watch thread's. */
    private final ConcurrentLinkedQueue<Held> held = new ConcurrentLinkedQueue<>();
    private Thread watch; // guarded by lock: started with the first store made ahead that is taken

    private record Held(Store store, long since) {}

    /** A store asked for ahead: its spec (the request's body without the label), the request, when it was sent. */
    private record Ready(Map<String, Object> spec, Larder.Deferred create, long askedAt) {}

    /** The stores of a run on {@code larder}'s server. */
    public TestStores(Larder larder) {
        this(larder, READY_MAX_AGE);
    }

    /** As {@link #TestStores(Larder)}, with another bound than {@link #READY_MAX_AGE} (the tests': none). */
    TestStores(Larder larder, Duration readyMaxAge) {
        this.larder = larder;
        this.readyMaxAge = readyMaxAge;
    }

    /** The client whose stores these are. */
    public Larder larder() {
        return larder;
    }

    /** A delete sent in the background: what it does, and how it went. Thread-safe. */
    public static final class Request {
        private final TestStores owner;
        private final String what;
        private final String path;
        private volatile Larder.Deferred request; // null until sent (TestStores#flush)
        private final boolean goneIsFine;
        private boolean read; // guarded by this
        private LarderException failure; // guarded by this
        private boolean thrown; // guarded by owner.lock

        private Request(TestStores owner, String what, String path, boolean goneIsFine) {
            this.owner = owner;
            this.what = what;
            this.path = path;
            this.goneIsFine = goneIsFine;
        }

        /** Whether its answer is read or could be read without waiting long (false while it is not even sent). */
        private boolean arrived() {
            Larder.Deferred d = request;
            return d != null && d.arrived();
        }

        /** What it does, e.g. {@code deleting store st_… (OrdersTest.checkout passed)}. */
        public String what() {
            return what;
        }

        /** Reads its answer, once, waiting at most {@code maxWaitMs} a read (0: the request's own limit). */
        private void read(int maxWaitMs) {
            if (request == null) owner.flush();
            LarderException f = null;
            synchronized (this) {
                if (read) return;
                read = true;
                try {
                    request.answer(maxWaitMs);
                } catch (LarderException e) {
                    if (goneIsFine && e.status() == 404 && "store_not_found".equals(e.code())) return; // its ttl took it
                    failure = f = e;
                }
            }
            if (f != null) {
                System.err.println("larder: " + what + " failed: " + f.getMessage());
                synchronized (owner.lock) {
                    owner.failed.add(this);
                }
            }
        }

        /** Waits for its answer; throws its failure (and {@link TestStores#close} then does not throw it again). */
        public void await() {
            read(0);
            LarderException f;
            synchronized (this) {
                f = failure;
            }
            if (f == null) return;
            synchronized (owner.lock) {
                thrown = true;
            }
            throw failure(what, f);
        }

        @Override
        public String toString() {
            return "Request(" + what + ")";
        }
    }

    /**
     * The store for a test: {@code options} (not changed) labelled {@code label}; {@code readyLabel} is the
     * label of the store then asked for ahead for the next test (the same {@code RUN/PACKAGE/} as {@code label},
     * so that {@code DELETE /stores?label_prefix=RUN/} takes it too). See the class comment. A store made ahead
     * comes as a handle whose {@link Store#created()} says {@code label} already, and whose own requests first read
     * the relabel's answer.
     *
     * @throws LarderException as {@link Larder#createStore} does
     */
    public Store take(StoreOptions options, String label, String readyLabel) {
        StoreOptions wanted = (options == null ? StoreOptions.create() : options).copy().label(label);
        if (larder.isRemote() || wanted.isFork()) return larder.createStore(wanted);
        Map<String, Object> spec = spec(wanted);
        Ready found;
        synchronized (lock) {
            if (closed) return larder.createStore(wanted);
            found = ready;
            ready = null;
        }
        if (found != null && !found.spec().equals(spec)) {
            discard(found, 0);
            found = null;
        }
        if (found != null && System.nanoTime() - found.askedAt() >= readyMaxAge.toNanos()) {
            discard(found, 0);
            found = null;
        }
        Store store = null;
        LarderException aheadFailed = null;
        if (found != null) {
            Store made = null;
            try {
                made = found.create().store();
            } catch (LarderException e) {
                aheadFailed = e;
                System.err.println("larder: a store asked for ahead could not be made, so this test's is made now: " + e.getMessage());
            }
            if (made != null && System.nanoTime() - found.askedAt() >= maxAge(made.created(), readyMaxAge).toNanos()) {
                deleteMade(made.id()); // a short --ttl-seconds: it might expire under its test
            } else if (made != null) {
                store = relabel(made, label);
            }
        }
        if (store == null) {
            try {
                store = larder.createStore(wanted);
            } catch (RuntimeException e) {
                if (aheadFailed != null) e.addSuppressed(aheadFailed);
                throw e;
            }
        }
        // Only once this spec made a store: one that cannot be made is not asked for again and again.
        askAhead(wanted.copy().label(readyLabel), spec);
        readArrived();
        return store;
    }

    /**
     * Deletes a passing test's {@code store} in the background ({@code DELETE /stores/{id}}); {@code test} names
     * the test in messages. For a store in remote mode, and after {@link #close}, it is deleted now (its failure
     * thrown). See {@link Request}.
     */
    public Request delete(Store store, String test) {
        String what = "deleting store " + store.id() + " (" + test + " passed)";
        boolean now;
        synchronized (lock) {
            now = closed || store.isRemote();
        }
        if (now) {
            store.dropSettling();
            store.delete();
            Request r = new Request(this, what, Larder.storePath(store.id()), false);
            r.read = true;
            return r;
        }
        store.dropSettling(); // a relabel not sent yet: no one will see it (one being sent is waited for)
        // Sent with the next test's request ahead, in one write (or now, when MAX_IN_FLIGHT wait).
        Request r = new Request(this, what, Larder.storePath(store.id()), false);
        boolean full;
        synchronized (lock) {
            unread.addLast(r);
            unsent.add(r);
            full = unsent.size() >= MAX_IN_FLIGHT;
        }
        if (full) flush();
        readArrived();
        return r;
    }

    /**
     * Deletes the ready store, reads every answer not read yet (at most {@link #CLOSE_TIMEOUT} in all: a request
     * still unanswered then fails as timed out). Throws the failed deletes no {@link Request#await} threw (the
     * first, the others suppressed in it). Later calls do nothing.
     */
    @Override
    public void close() {
        long deadline = System.nanoTime() + CLOSE_TIMEOUT.toNanos();
        Ready left;
        synchronized (lock) {
            if (closed) return;
            closed = true; // from now on take() asks for nothing ahead, and delete() deletes at once
            left = ready;
            ready = null;
            if (watch != null) LockSupport.unpark(watch);
        }
        if (left != null) discard(left, waitMs(deadline));
        flush();
        while (true) {
            Request r;
            synchronized (lock) {
                r = unread.pollFirst();
            }
            if (r == null) break;
            r.read(waitMs(deadline));
        }
        List<LarderException> failures = new ArrayList<>();
        synchronized (lock) {
            for (Request r : failed) {
                if (!r.thrown) {
                    r.thrown = true;
                    failures.add(failure(r.what(), r.failure));
                }
            }
            failed.clear();
        }
        if (failures.isEmpty()) return;
        LarderException first = failures.get(0);
        for (LarderException other : failures.subList(1, failures.size())) first.addSuppressed(other);
        throw first;
    }

    // ---------------------------------------------------------------- in the background

    /** The request's body without its label: what makes two stores alike. */
    private static Map<String, Object> spec(StoreOptions options) {
        Map<String, Object> spec = options.toJson();
        spec.remove("label");
        return spec;
    }

    /** Asks for a store of {@code options} ahead, with the deletes not sent yet; it becomes {@link #ready}. */
    private void askAhead(StoreOptions options, Map<String, Object> spec) {
        Ready next = new Ready(spec, flush(new Larder.Call("POST", "/stores", options.toJson(), options.serverWait())), System.nanoTime());
        Ready displaced;
        synchronized (lock) {
            displaced = ready;
            ready = next;
            if (closed) { // close() ran meanwhile: this one goes too
                displaced = next;
                ready = null;
            }
        }
        if (displaced != null) discard(displaced, 0);
    }

    /**
     * Deletes a ready store no test will take: reads its answer (waiting at most {@code maxWaitMs} a read, 0: the
     * request's limit; it was asked for while the last test ran, and has mostly come), then sends its delete.
     */
    private void discard(Ready r, int maxWaitMs) {
        String id;
        try {
            id = StoreInfo.from(Json.asObject(r.create().answer(maxWaitMs), "store")).id();
        } catch (LarderException e) {
            System.err.println("larder: a store asked for ahead could not be made: " + e.getMessage());
            return;
        }
        deleteMade(id);
    }

    /** Sends the delete of the store made ahead {@code id}, which no test will take. */
    private void deleteMade(String id) {
        Request d = new Request(this, "deleting store " + id + ", made ahead and not taken", Larder.storePath(id), true);
        synchronized (lock) {
            unread.addLast(d);
            unsent.add(d);
        }
    }

    /** Sends the deletes not sent yet (one write). */
    private void flush() {
        flush(null);
    }

    /**
     * Sends the deletes not sent yet and {@code then} (null: none), pipelined in one write: the server is woken
     * once. Answers {@code then}'s request.
     */
    private Larder.Deferred flush(Larder.Call then) {
        synchronized (sending) {
            List<Request> deletes;
            synchronized (lock) {
                deletes = new ArrayList<>(unsent);
                unsent.clear();
            }
            if (deletes.isEmpty() && then == null) return null;
            List<Larder.Call> calls = new ArrayList<>();
            for (Request r : deletes) calls.add(new Larder.Call("DELETE", r.path, null, Duration.ZERO));
            if (then != null) calls.add(then);
            List<Larder.Deferred> sent = larder.sendAll(calls);
            for (int i = 0; i < deletes.size(); i++) deletes.get(i).request = sent.get(i);
            return then == null ? null : sent.get(sent.size() - 1);
        }
    }

    /** The oldest a store made ahead may be handed out: {@code cap}, or a fifth of its lifetime when that is less. */
    static Duration maxAge(StoreInfo info, Duration cap) {
        if (info.createdAt() == null || info.expiresAt() == null) return cap;
        Duration fifth = Duration.between(info.createdAt(), info.expiresAt()).dividedBy(5);
        return fifth.compareTo(cap) < 0 ? fifth : cap;
    }

    /** What is left until {@code deadline}, in ms, for a read: at least 1. */
    private static int waitMs(long deadline) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, (deadline - System.nanoTime()) / 1_000_000));
    }

    /**
     * The ready store as the test's: a handle that says {@code label} already, whose first request first sends
     * {@code PATCH /stores/{id} {"label": label}}, as does the watch thread after {@link #RELABEL_AFTER}.
     */
    private Store relabel(Store ready, String label) {
        Store store = new Store(larder, ready.created().withLabel(label));
        store.settleFirst(() -> {
            try {
                larder.call("PATCH", Larder.storePath(ready.id()), Map.of("label", label), Duration.ZERO);
            } catch (LarderException e) {
                System.err.println("larder: relabelling store " + ready.id() + " to '" + label + "' failed: " + e.getMessage());
            }
        });
        held.add(new Held(store, System.nanoTime()));
        synchronized (lock) {
            if (watch == null && !closed) {
                watch = new Thread(this::watch, "larder-relabel");
                watch.setDaemon(true);
                watch.start();
            }
        }
        return store;
    }

    /** The watch thread: every half {@link #RELABEL_AFTER}, relabels the stores held that long; until {@link #close}. */
    private void watch() {
        long tick = RELABEL_AFTER.toNanos() / 2;
        while (true) {
            LockSupport.parkNanos(tick);
            synchronized (lock) {
                if (closed) return;
            }
            long now = System.nanoTime();
            for (Iterator<Held> i = held.iterator(); i.hasNext(); ) {
                Held h = i.next();
                if (!h.store().unsettled()) i.remove(); // relabelled, kept or deleted meanwhile
                else if (now - h.since() >= RELABEL_AFTER.toNanos()) {
                    h.store().settled();
                    i.remove();
                }
            }
        }
    }

    /**
     * Reads the answers that have come, oldest first, without waiting (their connections serve again); and while
     * more than {@link #MAX_IN_FLIGHT} deletes are unread, the oldest, waiting.
     */
    private void readArrived() {
        while (true) {
            Request r;
            synchronized (lock) {
                r = unread.peekFirst();
                if (r == null || (unread.size() <= MAX_IN_FLIGHT && !r.arrived())) return;
                unread.pollFirst();
            }
            r.read(0);
        }
    }

    /** A failure as the caller gets it: a LarderException saying which request it was. */
    private static LarderException failure(String what, LarderException cause) {
        return new LarderException(cause.status(), cause.code(), "larder: " + what + " failed: " + cause.getMessage(), cause.details(), cause);
    }
}
