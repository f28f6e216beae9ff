"""One Work stream, read by a thread of its own."""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any, Iterator

import grpc

from evora.v1 import worker_pb2 as pb
from evora.v1 import worker_pb2_grpc as pb_grpc
from reports import DEFAULT_MAX_MESSAGE_BYTES


class Session:
    """One Work stream: an outgoing queue feeding the request iterator, and a reader thread
    that forwards every server message (and the stream's end) to the worker's event queue."""

    _END = object()

    def __init__(self, stub: pb_grpc.WorkerServiceStub, events: queue.Queue, sid: int,
                 metadata: tuple[tuple[str, str], ...] = ()):
        self.sid = sid
        self.out: queue.Queue = queue.Queue()
        self.fence_set = False  # we sent drain + a fencing heartbeat
        self.fenced = False  # ... and its ack arrived: no more jobs will come
        # Heartbeats sent and heartbeat acks received on this stream, and the count of
        # heartbeats sent up to the fencing one: acks carry no id, so the fence holds once
        # that many have been answered (an earlier heartbeat's ack may come after the drain,
        # and jobs after it).
        self.beats_sent = self.beats_acked = self.fence_beats = 0
        # When each heartbeat not yet answered was sent (monotonic), oldest first (the server
        # answers them in order): a lease its ack extends surely lasts from then for its length.
        self.beats_sent_at: collections.deque[float] = collections.deque()
        self.ended = False
        self.drain: pb.ServerDrain | None = None  # the server's drain, once it asked for one
        self.last_heard = time.monotonic()  # when the server last sent anything (set by the worker)
        # The largest message the server receives (its welcome's max_message_bytes; set by
        # the worker): no report may be larger.
        self.max_message = DEFAULT_MAX_MESSAGE_BYTES
        # How often to heartbeat: the welcome's interval, or a third of the shortest lease
        # pushed on this stream if that is shorter (Worker.beat_for); beat_changed: the
        # worker must reschedule its next heartbeat.
        self.beat_every = 0.0
        self.beat_changed = False
        # The metadata (the API token's `authorization: Bearer <token>`) goes with the call.
        self.call = stub.Work(self._requests(), metadata=metadata)
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _requests(self) -> Iterator[pb.WorkRequest]:
        while True:
            item = self.out.get()
            if item is Session._END:
                return
            yield item

    def _read(self, events: queue.Queue) -> None:
        try:
            for msg in self.call:
                events.put(("msg", self.sid, msg))
            events.put(("end", self.sid, None))
        except grpc.RpcError as err:
            events.put(("end", self.sid, err))

    def send(self, req: pb.WorkRequest) -> None:
        self.out.put(req)

    def close_send(self) -> None:
        self.out.put(Session._END)

    def cancel(self) -> None:
        self.close_send()
        self.call.cancel()


def describe(err: Any) -> str:
    """Why a stream ended, for logs."""
    if err is None:
        return "closed by the server"
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"  # type: ignore[attr-defined]
    return str(err)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata carrying an API token as `authorization: Bearer <token>` (none for "")."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def refused(err: Any) -> bool:
    """Whether a stream ended because the server refuses this worker's token: UNAUTHENTICATED
    (none, or not a valid one) or PERMISSION_DENIED (not a worker token, or not for this
    queue). Retrying cannot help, so the worker exits instead."""
    return isinstance(err, grpc.RpcError) and err.code() in (  # type: ignore[attr-defined]
        grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
