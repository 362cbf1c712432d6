"""Strategies that run synchronous servant code on threads.

Coroutine methods (``async def``, including async AMH methods) need the event
loop, so every strategy runs them there as tasks; these strategies decide
where *synchronous* servant code runs.  The event loop never waits for them:
each reply goes back to its connection thread-safely (see ReplySink).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque
from queue import SimpleQueue
from typing import Hashable

from omniORB import CORBA

from pyorb.server.call.dispatch import Call, run_blocking, run_on_loop
from pyorb.server.call.stats import Gauges

log = logging.getLogger(__name__)

JOIN_TIMEOUT = 5.0
"""Seconds ``close`` waits for each dispatcher thread (servant code may be stuck)."""


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def run_admitted(call: Call) -> None:
    """Run a call a thread took from its queue, unless its admission control sheds it now (or did)."""
    admission = call.stats.admission
    if admission is None or admission.start(call):
        run_blocking(call)


def no_thread(call: Call, exc: BaseException) -> None:
    """Answer a call for which no thread could be started: TRANSIENT, completed NO (the client may retry)."""
    log.warning("cannot start a dispatcher thread for %s: %s; answering TRANSIENT", call.op.name, exc)
    call.exception(CORBA.TRANSIENT(0, CORBA.COMPLETED_NO), f"no thread could be started for it ({exc})")


class _ThreadStrategy:
    """Coroutines to the loop, synchronous code to ``_submit`` (thread_pool and
    thread_per_connection do both in their own ``dispatch``: one frame per call).

    A thread that cannot be started (``RuntimeError`` from ``Thread.start``:
    the process is out of threads or memory) costs only the call that needed
    it, which gets TRANSIENT; ``_submit`` leaves no trace of the thread.
    """

    judges_arrivals = "queue"
    """``dispatch`` judges each synchronous call by the queue's age as it arrives
    (``Admission.arrive``): a connection may ask the same before it reads the
    arguments (``Route.admission``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = Gauges()
        self._short = 0  # threads a pool had when it last could not start more

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        if call.entry.on_loop:
            return run_on_loop(call)
        admission = call.stats.admission
        if admission is not None and not admission.arrive(call):
            return None  # shed: answered TRANSIENT
        try:
            self._submit(call)
        except RuntimeError as exc:
            no_thread(call, exc)
        return None

    def _submit(self, call: Call) -> None:
        raise NotImplementedError

    def connection_closed(self, connection: Hashable) -> None:
        pass

    def _grow(self, threads: list[threading.Thread], size: int, prefix: str, target: object) -> None:
        """Start threads until ``threads`` holds ``size``.

        One that fails is tried again with the next call, and the pool
        serves with the threads it has meanwhile; only a pool with none
        raises (the call gets TRANSIENT).
        """
        while len(threads) < size:
            try:
                threads.append(self._thread(target, name=f"{prefix}-{len(threads)}"))
            except RuntimeError:
                if not threads:
                    raise
                if self._short != len(threads):  # once per shortfall, not once per call
                    self._short = len(threads)
                    log.warning("%s serves with %d threads: cannot start more", self.name, len(threads))
                return

    def _thread(self, target: object, *args: object, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        thread.start()
        return thread


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        if thread is not threading.current_thread() and thread.ident is not None:  # None: being started
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("dispatcher thread %s still busy in servant code at shutdown", thread.name)


class ThreadPoolStrategy(_ThreadStrategy):
    """``thread_pool(n)``: ``n`` dispatcher threads serving the connections round-robin.

    Guarantees: at most ``n`` calls in servant code at once; the calls of one
    connection start in arrival order (they may overlap); between
    connections, a free thread takes the next call of the connection whose
    turn it is, so one connection with thousands of calls queued delays
    another's call by at most one call per busy connection, not by its whole
    queue.  The queued calls of a connection whose client does not read its
    replies wait until it does (or is dropped).  Threads start with the
    first call.
    """

    def __init__(self, n: int) -> None:
        self.size = _positive("thread_pool size", n)
        super().__init__(f"thread_pool({n})")
        # A connection with calls queued has exactly one entry in _turns;
        # a thread takes the entry, one call, and puts the entry back at
        # the end if calls remain.
        self._turns: SimpleQueue[Hashable | None] = SimpleQueue()
        self._queues: dict[Hashable, deque[Call]] = {}
        self._parked: set[Hashable] = set()  # connections with calls queued and no turn: replies not read
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.stats.queued = lambda: sum(len(q) for q in list(self._queues.values()))
        self.stats.threads = lambda: sum(t.is_alive() for t in self._threads)

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        # _ThreadStrategy.dispatch and a _submit in one frame: the per-call path.
        if call.entry.on_loop:
            return run_on_loop(call)
        admission = call.stats.admission
        if admission is not None and not admission.arrive(call):
            return None  # shed: answered TRANSIENT
        if len(self._threads) < self.size:
            try:
                self._grow(self._threads, self.size, "pyorb-pool", self._work)
            except RuntimeError as exc:
                no_thread(call, exc)
                return None
        key = call.connection
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                self._queues[key] = deque((call,))
                self._turns.put(key)
            else:
                queue.append(call)
        return None

    def _work(self) -> None:
        get, lock, queues, turns = self._turns.get, self._lock, self._queues, self._turns
        parked = self._parked
        while (key := get()) is not None:
            with lock:
                queue = queues[key]
                call = queue[0]
                channel = call.channel
                # (unsent and write_paused first: congested is a property, read per call)
                if not call.done and (channel.unsent or channel.write_paused) and channel.congested:
                    # Until connection_resumed (the channel unparks itself
                    # once not congested) or connection_closed.  Looked at
                    # again after the flag is set: the loop may have drained
                    # it in between, and then it would never unpark.
                    parked.add(key)
                    channel.parked = True
                    if channel.congested:
                        continue
                    parked.discard(key)
                queue.popleft()
                if queue:
                    turns.put(key)  # the connection's next call waits for the others' turns
                else:
                    del queues[key]
            admission = call.stats.admission
            if admission is None or admission.start(call):
                run_blocking(call)
            call = None  # type: ignore[assignment]  # an idle thread keeps no finished request alive

    def connection_resumed(self, connection: Hashable) -> None:
        with self._lock:
            if connection in self._parked:
                self._parked.discard(connection)
                self._turns.put(connection)

    def connection_closed(self, connection: Hashable) -> None:
        # Its queued calls were cancelled with the connection: let a thread drop them.
        self.connection_resumed(connection)

    def close(self) -> None:
        for _ in self._threads:
            self._turns.put(None)
        _join(self._threads)


class ThreadPerRequestStrategy(_ThreadStrategy):
    """``thread_per_request`` or ``thread_per_request(max)``: a new thread per call.

    Guarantees: calls of one connection overlap.  With ``max``, at most that
    many threads exist; when no thread can be started (the cap, or
    ``Thread.start`` failing: the process is out of threads or memory) the
    call waits, and a thread that ends starts one for the next waiting call,
    taking the connections round-robin as ``thread_pool`` does: a connection
    with thousands of calls waiting delays another's call by one call per
    busy connection, not by its whole queue.  A connection's own calls start
    in arrival order.  The wait is bounded by ``Config.queue_limit``
    (admission control): a call that reaches it is answered TRANSIENT,
    completed NO.
    """

    def __init__(self, max_threads: int | None = None) -> None:
        self.max_threads = None if max_threads is None else _positive("thread_per_request max", max_threads)
        super().__init__("thread_per_request" if max_threads is None else f"thread_per_request({max_threads})")
        self._lock = threading.Lock()
        # A connection with calls waiting has one entry in _turns; the next
        # call to start is the first of the connection whose turn it is.
        self._turns: deque[Hashable] = deque()
        self._waiting: dict[Hashable, deque[Call]] = {}
        self._active: set[threading.Thread] = set()
        self._count = itertools.count(1)
        self._launches: SimpleQueue[threading.Thread | None] = SimpleQueue()
        self._launcher: threading.Thread | None = None
        self.stats.queued = lambda: sum(len(q) for q in list(self._waiting.values()))
        self.stats.threads = lambda: len(self._active)

    def _submit(self, call: Call) -> None:
        # The loop only queues the call and, under the cap, a thread to take
        # it; the launcher thread starts that thread.  Thread.start waits
        # until the new thread has run, which takes the interpreter lock's
        # turns of every thread busy in servant code: the loop, which reads
        # requests and refuses the excess, must not wait for that.
        with self._lock:
            self._wait(call)
            if self.max_threads is not None and len(self._active) >= self.max_threads:
                return  # a running thread takes it when it ends
            thread = self._new(None)
        if self._launcher is None:  # the loop thread alone submits
            try:
                self._launcher = self._thread(self._launch, name="pyorb-request-launcher")
            except RuntimeError as exc:
                self._not_started(thread, exc)
                return
        self._launches.put(thread)

    def _launch(self) -> None:
        while (thread := self._launches.get()) is not None:
            try:
                thread.start()
            except RuntimeError as exc:
                self._not_started(thread, exc)
            else:
                self._short = 0
            thread = None  # an idle launcher keeps no finished thread alive

    def _not_started(self, thread: threading.Thread, exc: RuntimeError) -> None:
        """``thread`` could not start: its call waits for a running thread, or,
        with none running, is answered TRANSIENT (nothing would ever run it)."""
        with self._lock:
            self._active.discard(thread)
            orphan = None if self._active else self._next()
            if self._active and not self._short:  # once per shortage, not once per call
                self._short = len(self._active)
                log.warning("%s: cannot start a thread (%s); calls wait for one of the %d running",
                            self.name, exc, len(self._active))
        if orphan is not None:
            no_thread(orphan, exc)

    def _wait(self, call: Call) -> None:  # holds the lock
        queue = self._waiting.get(call.connection)
        if queue is None:
            self._waiting[call.connection] = deque((call,))
            self._turns.append(call.connection)
        else:
            queue.append(call)

    def _next(self) -> Call | None:  # holds the lock
        """The waiting call whose turn it is (None if none); calls answered
        while they waited (cancelled, or shed at the limit) are dropped."""
        while self._turns:
            key = self._turns.popleft()
            queue = self._waiting.get(key)
            while queue and queue[0].done:
                queue.popleft()
            if not queue:
                self._waiting.pop(key, None)
                continue
            call = queue.popleft()
            if queue:
                self._turns.append(key)
            else:
                del self._waiting[key]
            return call
        return None

    def _new(self, call: Call | None) -> threading.Thread:  # holds the lock
        """A thread for ``call`` (None: whichever call's turn it is), counted
        against the cap from now on; the caller starts it, without the lock."""
        thread = threading.Thread(target=self._run, args=(call,), name=f"pyorb-request-{next(self._count)}",
                                  daemon=True)
        self._active.add(thread)
        return thread

    def _run(self, call: Call | None) -> None:
        # A thread that ends starts one for the next waiting call; if it
        # cannot, it runs that call itself: a waiting call is never lost.
        # ``call``, when given, was admitted by the thread that started this one.
        me = threading.current_thread()
        if call is None:  # started for whichever call's turn it is
            call = self._take(me)
        while call is not None:
            run_blocking(call)
            call = self._take(me)
            if call is None:
                return
            with self._lock:
                successor = self._new(call)
                self._active.discard(me)  # the successor takes this thread's place under the cap
            try:
                successor.start()
            except RuntimeError:
                with self._lock:
                    self._active.discard(successor)
                    self._active.add(me)
                continue
            return

    def _take(self, me: threading.Thread) -> Call | None:
        """The next waiting call its admission control lets start, answering the
        ones it sheds on the way (no thread is made for a call that will not
        run).  None: no call waits, and ``me`` no longer counts under the cap."""
        while True:
            with self._lock:
                call = self._next()
                if call is None:
                    self._active.discard(me)
                    return None
            admission = call.stats.admission
            if admission is None or admission.start(call):
                return call

    def connection_closed(self, connection: Hashable) -> None:
        # Its waiting calls were cancelled with the connection: forget them now.
        with self._lock:
            self._waiting.pop(connection, None)

    def close(self) -> None:
        with self._lock:
            waiting = [call for queue in self._waiting.values() for call in queue]
            self._waiting.clear()
            self._turns.clear()
            threads = list(self._active)
            launcher, self._launcher = self._launcher, None
        for call in waiting:
            call.cancelled()
        if launcher is not None:
            self._launches.put(None)
            threads.append(launcher)
        _join(threads)


class _ConnectionWorker:
    __slots__ = ("queue", "thread")

    def __init__(self, queue: SimpleQueue[Call | None], thread: threading.Thread) -> None:
        self.queue = queue
        self.thread = thread


class ThreadPerConnectionStrategy(_ThreadStrategy):
    """``thread_per_connection``: one dispatcher thread per client connection.

    Guarantees: the calls of one connection run one at a time in arrival
    order; calls of different connections run concurrently.  The thread
    starts with the connection's first call and ends, after finishing the
    calls already queued, when the connection closes.
    """

    def __init__(self, name: str = "thread_per_connection", lock: threading.Lock | None = None) -> None:
        super().__init__(name)
        self._lock = lock
        self._workers: dict[Hashable, _ConnectionWorker] = {}
        self._retired: list[threading.Thread] = []
        self.stats.queued = lambda: sum(w.queue.qsize() for w in list(self._workers.values()))
        self.stats.threads = lambda: sum(w.thread.is_alive() for w in list(self._workers.values()))

    def dispatch(self, call: Call) -> asyncio.Task[None] | None:
        # _ThreadStrategy.dispatch and a _submit in one frame: the per-call path.
        if call.entry.on_loop:
            return run_on_loop(call)
        admission = call.stats.admission
        if admission is not None and not admission.arrive(call):
            return None  # shed: answered TRANSIENT
        worker = self._workers.get(call.connection)
        if worker is None:
            queue: SimpleQueue[Call | None] = SimpleQueue()
            try:
                thread = self._thread(self._work, queue, name="pyorb-connection")
            except RuntimeError as exc:
                no_thread(call, exc)
                return None
            worker = self._workers[call.connection] = _ConnectionWorker(queue, thread)
        worker.queue.put(call)
        return None

    def _work(self, queue: SimpleQueue[Call | None]) -> None:
        lock = self._lock
        while (call := queue.get()) is not None:
            if lock is None:
                run_admitted(call)
            else:
                admission = call.stats.admission
                if admission is None or not admission.overdue(call):
                    with lock:  # judged again once it holds the lock: the wait for it counts
                        run_admitted(call)
                elif admission.start(call):  # judged otherwise by the time it was decided
                    with lock:
                        run_blocking(call)
                # else shed without waiting for the lock the servants hold: a backlog
                # drains at the cost of its refusals, not one servant call per refusal
            call = None  # an idle thread keeps no finished request alive

    def connection_closed(self, connection: Hashable) -> None:
        worker = self._workers.pop(connection, None)
        if worker is not None:
            worker.queue.put(None)
            self._retired = [t for t in self._retired if t.is_alive()]
            self._retired.append(worker.thread)

    def close(self) -> None:
        for connection in list(self._workers):
            self.connection_closed(connection)
        _join(self._retired)


class ThreadedStrategy(ThreadPerConnectionStrategy):
    """``threaded``: ORB-wide serialization (ORBacus 'threaded').

    A dispatcher thread per connection as in ``thread_per_connection``, but
    one lock held around servant code: at most one call of all the servants
    that use this strategy is in user code at a time.  Calls of one
    connection keep their arrival order.
    """

    def __init__(self) -> None:
        super().__init__("threaded", threading.Lock())
