#!/usr/bin/env python3
"""An Evora worker written against the generated gRPC stubs only (grpcio + protobuf).

It opens a WorkerService.Work stream, says hello (worker id, queue, slots), runs the jobs
the server pushes (type "resize", see resize.py) up to --slots at a time in a thread pool,
sends a heartbeat for the leases it holds every heartbeat_interval_seconds the server gave
in its welcome, reports each job with complete or fail, and waits for the server's ack.
When the stream breaks it reconnects with backoff and finishes the jobs it holds with their
lease tokens. SIGTERM or SIGINT drains: no new jobs, finish the running ones, then exit 0
(a second signal exits at once).

Usage: python worker.py --address 127.0.0.1:50051 --queue images [--slots 4]
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import random
import re
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gen"))  # the generated stubs import `evora.v1.*`
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # keep gRPC's C core quiet about GOAWAYs on reconnect

import grpc  # noqa: E402
from google.protobuf import json_format, struct_pb2  # noqa: E402

from evora.v1 import worker_pb2 as pb  # noqa: E402
from evora.v1 import worker_pb2_grpc as pb_grpc  # noqa: E402
from resize import JOB_TYPE, JobError, JobInfo, Stopped, resize  # noqa: E402

log = logging.getLogger("python-worker")

INTERNAL_RETRY = "internal error; retry the write"


def duration(text: str) -> float:
    """Seconds from "5", "2.5s", "500ms" or "1m"."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m.group(2)]


def parse_args() -> argparse.Namespace:
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", default=env("EVORA_ADDRESS", "127.0.0.1:50051"), help="server host:port (env EVORA_ADDRESS)")
    ap.add_argument("--queue", default=env("EVORA_QUEUE", "images"), help="queue to take jobs from (env EVORA_QUEUE)")
    ap.add_argument("--worker-id", default=env("EVORA_WORKER_ID", f"py-{socket.gethostname()}-{os.getpid()}"),
                    help="worker id recorded on jobs (env EVORA_WORKER_ID)")
    ap.add_argument("--slots", type=int, default=int(env("EVORA_SLOTS", "4")), help="jobs run at once (env EVORA_SLOTS)")
    ap.add_argument("--max-jobs", type=int, default=0,
                    help="drain and exit after this many reports (complete or fail) were acknowledged; 0 = never")
    ap.add_argument("--idle-exit", type=duration, default=0.0, help="drain and exit after this long with no job (e.g. 5s); 0 = never")
    ap.add_argument("--drain-timeout", type=duration, default=30.0, help="on drain, how long to wait for running jobs")
    args = ap.parse_args()
    if args.slots < 1:
        ap.error("--slots must be at least 1")
    return args


@dataclass
class Task:
    id: str
    token: str
    stop: threading.Event = field(default_factory=threading.Event)
    stop_reason: list[str] = field(default_factory=list)
    lost: bool = False  # the server took the lease away: never report this job

    def cancel(self, reason: str) -> None:
        if not self.stop.is_set():
            self.stop_reason.append(reason)
            self.stop.set()


@dataclass
class Report:
    req: pb.WorkRequest
    tries: int = 1


class Session:
    """One Work stream: an outgoing queue feeding the request iterator, and a reader thread
    that forwards every server message (and the stream's end) to the worker's event queue."""

    _END = object()

    def __init__(self, stub: pb_grpc.WorkerServiceStub, events: queue.Queue, sid: int):
        self.sid = sid
        self.out: queue.Queue = queue.Queue()
        self.fence_set = False  # we sent drain + a fencing heartbeat
        self.fenced = False  # ... and its ack arrived: no more jobs will come
        self.ended = False
        self.call = stub.Work(self._requests())
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


class Worker:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.channel = grpc.insecure_channel(args.address)
        self.stub = pb_grpc.WorkerServiceStub(self.channel)
        self.pool = ThreadPoolExecutor(max_workers=args.slots, thread_name_prefix="job")
        self.events: queue.Queue = queue.Queue()
        self.running: dict[str, Task] = {}
        self.pending: dict[str, Report] = {}  # reports sent (or to send) and not yet acknowledged
        self.acked = 0
        self.stopping = False
        self.stop_at = 0.0
        self.idle_since = time.monotonic()
        self.signals: list[int] = []  # appended by the signal handler, read by the loop
        self.session: Session | None = None
        self.sid = 0

    # ----- the event loop: it alone touches the state above and sends on the stream -----

    def run(self) -> int:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, lambda signum, _frame: self.signals.append(signum))
        backoff = 0.25
        while True:
            hb_every = self.connect()
            if hb_every is None:
                if self.stopping and self.finished():
                    return 0
                if self.stopping and time.monotonic() > self.stop_at + self.args.drain_timeout:
                    log.error("giving up: cannot reach the server while draining (held=%d)", len(self.running) + len(self.pending))
                    return 1
                wait = random.uniform(0, backoff) + 0.05  # full jitter
                log.warning("cannot open a Work session; retrying in %.2fs", wait)
                code = self.pause(wait)
                if code is not None:
                    return code
                backoff = min(backoff * 2, 10.0)
                continue
            backoff = 0.25
            code = self.serve(hb_every)
            if code is not None:
                return code

    def connect(self) -> float | None:
        """Opens a Work stream, says hello with the leases still held from an earlier stream,
        waits for the welcome and resends unacknowledged reports. None if that failed."""
        self.sid += 1
        s = Session(self.stub, self.events, self.sid)
        held = [pb.Lease(job_id=t.id, lease_token=t.token) for t in self.running.values() if not t.lost]
        held += [pb.Lease(job_id=job_id, lease_token=token_of(r.req)) for job_id, r in self.pending.items()]
        s.send(pb.WorkRequest(hello=pb.WorkerHello(
            worker_id=self.args.worker_id, queues=[self.args.queue], slots=self.args.slots, held=held)))
        deadline = time.monotonic() + 30
        while True:
            try:
                kind, sid, value = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                log.warning("no welcome from the server in 30s")
                s.cancel()
                return None
            if kind == "done":
                self.finish(None, value)  # a job finished while we were disconnected
                continue
            if sid != s.sid:
                continue  # left over from an earlier stream
            if kind == "end":
                log.warning("stream ended before the welcome: %s", describe(value))
                s.close_send()
                return None
            if value.WhichOneof("msg") != "welcome":
                log.warning("expected welcome, got %s", value.WhichOneof("msg"))
                s.cancel()
                return None
            w = value.welcome
            hb_every = float(max(1, w.heartbeat_interval_seconds))
            log.info("session opened session_id=%s queue=%s slots=%d lease_seconds=%d heartbeat_every=%.0fs held=%d",
                     w.session_id, self.args.queue, self.args.slots, w.lease_seconds, hb_every, len(held))
            self.session = s
            for r in self.pending.values():
                r.tries += 1
                s.send(r.req)
            return hb_every

    def serve(self, hb_every: float) -> int | None:
        """Handles one session until it ends; returns an exit code when the worker is done."""
        s = self.session
        assert s is not None
        next_hb = time.monotonic() + hb_every
        if self.stopping:
            self.fence(s)
        while True:
            try:
                kind, sid, value = self.events.get(timeout=0.2)
            except queue.Empty:
                kind = None
            if kind == "msg" and sid == s.sid:
                self.handle(s, value)
            elif kind == "end" and sid == s.sid:
                self.session = None
                s.close_send()
                if self.stopping and self.finished():
                    return 0
                log.warning("stream ended (%s); reconnecting (held=%d)", describe(value), len(self.running) + len(self.pending))
                return None
            elif kind == "done":
                self.finish(s, value)

            now = time.monotonic()
            if now >= next_hb:
                self.heartbeat(s)
                next_hb = now + hb_every
            while self.signals:
                signum = self.signals.pop(0)
                if self.stopping:
                    log.warning("second signal: exiting now (abandoned=%d)", len(self.running) + len(self.pending))
                    s.cancel()
                    return 1
                log.info("draining on %s (running=%d)", signal.Signals(signum).name, len(self.running))
                self.begin_stop(s)
            if (not self.stopping and self.args.idle_exit > 0 and self.finished()
                    and now - self.idle_since >= self.args.idle_exit):
                log.info("idle for %.1fs; draining", self.args.idle_exit)
                self.begin_stop(s)
            if self.stopping:
                if s.fenced and self.finished():
                    # Nothing held and nothing more will be pushed: close our side and let
                    # the server end the stream.
                    s.close_send()
                    self.wait_end(s)
                    log.info("drained; exiting (reports_acked=%d)", self.acked)
                    return 0
                if now > self.stop_at + self.args.drain_timeout:
                    for t in self.running.values():
                        t.cancel("worker shutting down")
                    log.error("drain timed out; exiting with jobs held (running=%d unacked=%d); "
                              "their leases will expire and they will be retried", len(self.running), len(self.pending))
                    s.cancel()
                    return 1

    def finished(self) -> bool:
        return not self.running and not self.pending

    def begin_stop(self, s: Session) -> None:
        self.stopping = True
        self.stop_at = time.monotonic()
        self.fence(s)

    def fence(self, s: Session) -> None:
        """Sends drain, then a heartbeat: the server handles a stream's messages in order,
        so once the heartbeat is acknowledged every job pushed before the drain has arrived."""
        if s.fence_set:
            return
        s.fence_set = True
        s.send(pb.WorkRequest(drain=pb.WorkerDrain()))
        self.heartbeat(s)

    def wait_end(self, s: Session) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                kind, sid, _ = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if kind == "end" and sid == s.sid:
                return
        s.cancel()

    def pause(self, seconds: float) -> int | None:
        """Waits between reconnects; a signal while nothing is held exits at once."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                kind, _, value = self.events.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                if kind == "done":
                    self.finish(None, value)
            except queue.Empty:
                pass
            if self.signals:
                self.signals.clear()
                if self.finished():
                    log.info("exiting on signal")
                    return 0
                if self.stopping:
                    return 1
                self.stopping = True
                self.stop_at = time.monotonic()
        return None

    # ----- messages from the server -----

    def handle(self, s: Session, msg: pb.WorkResponse) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "job":
            self.start(msg.job)
        elif kind == "ack":
            a = msg.ack
            r = self.pending.get(a.job_id)
            if r is None:
                return
            if not a.accepted and a.reason == INTERNAL_RETRY and r.tries < 3:
                r.tries += 1
                log.warning("report not stored; sending it again job_id=%s", a.job_id)
                s.send(r.req)
                return
            del self.pending[a.job_id]
            self.acked += 1
            if a.accepted:
                log.info("report acknowledged job_id=%s", a.job_id)
            else:
                log.warning("report rejected job_id=%s reason=%s", a.job_id, a.reason)
            self.mark_idle()
            if not self.stopping and self.args.max_jobs > 0 and self.acked >= self.args.max_jobs:
                log.info("reached --max-jobs=%d; draining", self.args.max_jobs)
                self.begin_stop(s)
        elif kind == "cancel":
            t = self.running.get(msg.cancel.job_id)
            if t:
                log.info("job cancelled by an operator job_id=%s", t.id)
                t.cancel("cancelled by an operator")
        elif kind == "lease_lost":
            t = self.running.get(msg.lease_lost.job_id)
            if t:
                log.warning("lease lost; abandoning the job job_id=%s reason=%s", t.id, msg.lease_lost.reason)
                t.lost = True
                t.cancel("lease lost")
        elif kind == "heartbeat_ack":
            if s.fence_set:
                s.fenced = True
            for lease in msg.heartbeat_ack.leases:
                t = self.running.get(lease.job_id)
                if t and lease.cancel_requested:
                    t.cancel("cancelled by an operator")
        elif kind == "drain":
            # The server is shutting down: it sends nothing new; we finish what we hold and
            # reconnect (to this server once it is back, or another one) when it closes.
            log.info("server asked to drain reason=%r running=%d", msg.drain.reason, len(self.running))

    def start(self, leased: pb.LeasedJob) -> None:
        job = leased.job
        t = Task(id=job.id, token=leased.lease_token)
        self.running[t.id] = t
        log.info("job received job_id=%s type=%s attempt=%d", job.id, job.type, job.attempt)
        info = JobInfo(id=job.id, attempt=job.attempt, payload=json_format.MessageToDict(job.payload),
                       worker_id=self.args.worker_id, stop=t.stop, stop_reason=t.stop_reason)
        job_type = job.type

        def run() -> None:
            try:
                if job_type != JOB_TYPE:
                    raise JobError(f"this worker runs only {JOB_TYPE!r} jobs, not {job_type!r}", retryable=False)
                outcome: tuple[Any, BaseException | None] = (resize(info), None)
            except BaseException as err:  # noqa: BLE001 - every failure is reported
                outcome = (None, err)
            self.events.put(("done", 0, (t, *outcome)))

        self.pool.submit(run)

    def finish(self, s: Session | None, value: tuple[Task, Any, BaseException | None]) -> None:
        """Turns a handler's outcome into a complete or fail report."""
        t, result, err = value
        self.running.pop(t.id, None)
        try:
            if t.lost:
                return
            if err is None:
                try:
                    st = struct_pb2.Struct()
                    st.update(result)
                    req = pb.WorkRequest(complete=pb.WorkerComplete(job_id=t.id, lease_token=t.token, result=st))
                    log.info("job done job_id=%s", t.id)
                except (TypeError, ValueError) as e:
                    err = JobError(f"result is not JSON: {e}", retryable=False)
            if err is not None:
                non_retryable = isinstance(err, JobError) and not err.retryable
                req = pb.WorkRequest(fail=pb.WorkerFail(job_id=t.id, lease_token=t.token, error=str(err) or type(err).__name__,
                                                        non_retryable=non_retryable))
                log.info("job failed job_id=%s err=%r retryable=%s", t.id, str(err), not non_retryable)
            self.pending[t.id] = Report(req)
            if s is not None:
                s.send(req)  # if the stream is gone, the next session sends it again
        finally:
            self.mark_idle()

    def heartbeat(self, s: Session) -> None:
        """Extends every lease the worker holds (an empty heartbeat is a plain keep-alive)."""
        leases = [pb.Lease(job_id=t.id, lease_token=t.token) for t in self.running.values() if not t.lost]
        s.send(pb.WorkRequest(heartbeat=pb.WorkerHeartbeat(leases=leases)))

    def mark_idle(self) -> None:
        if self.finished():
            self.idle_since = time.monotonic()


def token_of(req: pb.WorkRequest) -> str:
    return req.complete.lease_token if req.WhichOneof("msg") == "complete" else req.fail.lease_token


def describe(err: Any) -> str:
    if err is None:
        return "closed by the server"
    if isinstance(err, grpc.RpcError):
        return f"{err.code().name}: {err.details()}"  # type: ignore[attr-defined]
    return str(err)


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s worker_id={args.worker_id} %(message)s")
    worker = Worker(args)
    try:
        return worker.run()
    finally:
        for t in worker.running.values():
            t.cancel("worker shutting down")
        worker.pool.shutdown(wait=False, cancel_futures=True)
        worker.channel.close()


if __name__ == "__main__":
    sys.exit(main())
