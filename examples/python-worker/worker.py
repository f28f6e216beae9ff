#!/usr/bin/env python3
"""An Evora worker written against the generated gRPC stubs only (grpcio + protobuf).

It opens a WorkerService.Work stream, says hello (worker id, queue, slots), runs the jobs
the server pushes (type "resize", see resize.py) up to --slots at a time in a thread pool,
sends a heartbeat for the leases it holds every heartbeat_interval_ms the server gave in
its welcome, or faster for a job pushed with a shorter lease (a job's until its report is
settled), reports each job with complete or fail,
and waits for the server's ack. It acts on the protocol's codes, never on their text: the
ack's result (see reports.py) and the lease_lost, cancel and drain messages (Worker.handle).
When the stream breaks it reconnects with backoff and finishes the jobs it holds with their
lease tokens; a stream refused UNAUTHENTICATED or PERMISSION_DENIED (a missing, bad or
revoked --token) exits with code 3 instead. SIGTERM or SIGINT drains: no new jobs, finish the running ones, then exit 0
(a second signal exits at once).

Usage: python worker.py --address 127.0.0.1:50051 --queue images [--slots 4]

Worker is the one event loop that owns every piece of the worker's state, so it stays whole
in this file (over 400 lines) where each change of state can be read in one place; what
needs no state lives beside it: options.py, session.py (the stream), reports.py (the
decisions taken from codes), resize.py (the job).
"""

from __future__ import annotations

import argparse
import enum
import logging
import os
import queue
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gen"))  # the generated stubs import `evora.v1.*`
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # keep gRPC's C core quiet about GOAWAYs on reconnect

import grpc  # noqa: E402
from google.protobuf import json_format, struct_pb2  # noqa: E402

from evora.v1 import worker_pb2 as pb  # noqa: E402
from evora.v1 import worker_pb2_grpc as pb_grpc  # noqa: E402
from options import parse_args  # noqa: E402
from reports import (  # noqa: E402
    DEFAULT_MAX_MESSAGE_BYTES, ack_result, acked_report, code_name, cut_error, fail_instead, lease_length, outage_resend_delay,
    report_too_large, report_under, resend_delay, token_of,
)
from resize import JOB_TYPE, JobError, JobInfo, resize  # noqa: E402
from session import Session, bearer, describe, refused  # noqa: E402

log = logging.getLogger("python-worker")


# The wait before each new Work call: full jitter (random up to the backoff, plus 50 ms), the
# backoff doubling from FIRST_RECONNECT_WAIT up to MAX_RECONNECT_WAIT (seconds). The cap stays
# short (the TypeScript SDK's): after a database outage the leader's sweeper waits one lease
# length before it requeues expired leases, and a worker that comes back within it keeps its
# jobs; a 10 s cap lost them on queues with short leases, and those jobs ran a second time.
FIRST_RECONNECT_WAIT = 0.25
MAX_RECONNECT_WAIT = 2.0


def reconnect_wait(backoff: float) -> float:
    """How long to wait before the next Work call, given the current backoff."""
    return random.uniform(0, backoff) + 0.05


def next_reconnect_backoff(backoff: float) -> float:
    """The backoff doubled, up to MAX_RECONNECT_WAIT."""
    return min(backoff * 2, MAX_RECONNECT_WAIT)


# How long a session must last (seconds) for the reconnect backoff to start again from its
# shortest wait; a session that ends sooner counts as a failed attempt.
STABLE_SESSION = 10.0


# No message at all from the server for this long (seconds; or three heartbeat intervals,
# if longer), while it answers every heartbeat: it is taken for dead and the worker
# reconnects (as the TypeScript SDK does).
STALE_SECONDS = 30.0
# The shortest heartbeat interval, whatever the leases.
MIN_BEAT_SECONDS = 0.1


class Stop(enum.Enum):
    """Why the worker stops a running job; the value is what the handler's Stopped says."""

    CANCELLED = "cancelled by an operator"
    LEASE_LOST = "lease lost"
    SHUTDOWN = "worker shutting down"


@dataclass
class Task:
    id: str
    token: str
    # By this worker's monotonic clock, a time before which the lease surely still lasts: when
    # its push came (or the heartbeat that last extended it was sent) plus lease_len. Never the
    # server's lease_expires_at itself: the two clocks may differ.
    lease_end: float
    lease_len: float = 0.0  # the lease's length in seconds (lease_length)
    stop: threading.Event = field(default_factory=threading.Event)
    stop_reason: list[str] = field(default_factory=list)
    stopped_by: Stop | None = None  # the first reason it was stopped
    lost: bool = False  # the server took the lease away: never report this job

    def cancel(self, why: Stop) -> None:
        if self.stopped_by is None:
            self.stopped_by = why
            self.stop_reason.append(why.value)
            self.stop.set()


# The channel's own reconnect backoff, short (as the TypeScript SDK's: 0.2 s doubling to 2 s).
# gRPC's default grows to 2 minutes, and while it waits every call fails at once with
# UNAVAILABLE: a server back after an outage of a minute went unseen for tens of seconds,
# whatever the worker's own backoff, and the leases it held could expire meanwhile.
# Any size of pushed job: a payload that passed the server's limit as JSON text takes up to
# several times that as a Struct (docs/api.md, "Size limits on the Work stream"), past gRPC's
# default of 4 MiB, which would end the stream on every push.
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    ("grpc.max_receive_message_length", -1),
]


def open_channel(args: argparse.Namespace) -> grpc.Channel:
    """Plaintext unless a CA or a client certificate is given; then TLS trusting that CA (or
    the system's roots), presenting the client certificate if given (mTLS)."""
    ca, cert, key = (getattr(args, name, "") or "" for name in ("tls_ca", "tls_cert", "tls_key"))
    if not ca and not cert:
        return grpc.insecure_channel(args.address, options=CHANNEL_OPTIONS)

    def read(path: str) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    creds = grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=read(key), certificate_chain=read(cert))
    return grpc.secure_channel(args.address, creds, options=CHANNEL_OPTIONS)


class Refused(Exception):
    """The server refused this worker's token (see session.refused): the worker exits."""

    def __init__(self, cause: grpc.RpcError):
        super().__init__(describe(cause))
        self.cause = cause


class Exit(Exception):
    """A signal ended the worker while it waited for a welcome; `code` is its exit status."""

    def __init__(self, code: int):
        super().__init__(f"exit {code}")
        self.code = code


@dataclass
class Report:
    req: pb.WorkRequest
    # lease_end and lease_len: as the task's (it is heartbeated until the report is settled).
    lease_end: float
    lease_len: float = 0.0
    tries: int = 0  # times sent
    resend_at: float | None = None  # set after ACK_RESULT_RETRY_LATER: when to send it again (monotonic)
    # Resends after RETRY_LATER with database_unavailable: they pace the backoff and are not
    # counted toward MAX_SENDS.
    outage_resends: int = 0
    # The fail sent in place of a report the server refused as invalid (fail_instead): a
    # second refusal gives the job up.
    instead_of_refused: bool = False


class Worker:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.channel = open_channel(args)
        self.stub = pb_grpc.WorkerServiceStub(self.channel)
        self.pool = ThreadPoolExecutor(max_workers=args.slots, thread_name_prefix="job")
        self.events: queue.Queue = queue.Queue()
        self.running: dict[str, Task] = {}
        # Reports sent (or to send) and not yet acknowledged, by job id, oldest first: a job
        # leased again (after a fail) may have the report of its earlier lease still
        # unacknowledged. An ack names the job and the report's lease token (acked_report);
        # one without a token, from an older server, answers the oldest.
        self.pending: dict[str, list[Report]] = {}
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
        backoff = FIRST_RECONNECT_WAIT
        while True:
            try:
                hb_every = self.connect()
            except Exit as done:
                return done.code
            except Refused as err:
                log.error("the server refused the worker (%s); check --token (EVORA_TOKEN)", describe(err.cause))
                return 3
            if hb_every is None:
                if self.stopping and self.finished():
                    return 0
                if self.stopping and time.monotonic() > self.stop_at + self.args.drain_timeout:
                    log.error("giving up: cannot reach the server while draining (held=%d)", len(self.running) + len(self.pending))
                    return 1
                code = self.reconnect_pause(backoff, logging.WARNING, "cannot open a Work session; retrying in %.2fs")
                if code is not None:
                    return code
                backoff = next_reconnect_backoff(backoff)
                continue
            opened = time.monotonic()
            code = self.serve(hb_every)
            if code is not None:
                return code
            # Wait before opening the next session too: a server that ends every session at
            # once (one that cannot read a report resent on each session, a proxy cutting
            # streams) would otherwise be reconnected to in a tight loop. The backoff starts
            # again only after a session that lasted.
            if time.monotonic() - opened >= STABLE_SESSION:
                backoff = FIRST_RECONNECT_WAIT
            code = self.reconnect_pause(backoff, logging.INFO, "reconnecting in %.2fs")
            if code is not None:
                return code
            backoff = next_reconnect_backoff(backoff)

    def reconnect_pause(self, backoff: float, level: int, message: str) -> int | None:
        """Waits one jittered reconnect delay for `backoff`, logging `message` with it; an exit code if told to stop meanwhile."""
        wait = reconnect_wait(backoff)
        log.log(level, message, wait)
        return self.pause(wait)

    def connect(self) -> float | None:
        """Opens a Work stream, says hello with the leases still held from an earlier stream,
        waits for the welcome and resends unacknowledged reports. None if that failed."""
        self.sid += 1
        s = Session(self.stub, self.events, self.sid, bearer(self.args.token))
        held = self.held_leases()
        s.send(pb.WorkRequest(hello=pb.WorkerHello(
            worker_id=self.args.worker_id, queues=[self.args.queue], slots=self.args.slots, held=held,
            # Job-type routing: the server sends only jobs of the types this worker runs.
            job_types=[JOB_TYPE],
            # Batches: the server may push the jobs of one claim as one `jobs` message and
            # answer reports committed together with one `acks` message (handle takes both),
            # instead of a message per job: fewer messages to encode and decode on both sides.
            accepts_batches=True)))
        deadline = time.monotonic() + 30
        while True:
            # A hello left unanswered (a frozen server keeps the connection open and says
            # nothing) must not hold up a SIGTERM: with nothing held the worker exits at once;
            # with jobs held it starts the drain, as pause does (the session opened next is
            # fenced); a second signal exits 1.
            while self.signals:
                self.signals.pop(0)
                if self.finished() or self.stopping:
                    code = 0 if self.finished() else 1
                    log.info("exiting on signal while waiting for the welcome (held=%d)", len(self.running) + len(self.pending))
                    s.cancel()
                    raise Exit(code)
                log.info("draining on signal (running=%d)", len(self.running))
                self.stopping = True
                self.stop_at = time.monotonic()
            if time.monotonic() >= deadline:
                log.warning("no welcome from the server in 30s")
                s.cancel()
                return None
            try:
                kind, sid, value = self.events.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if kind == "done":
                self.finish(None, value)  # a job finished while we were disconnected
                continue
            if sid != s.sid:
                continue  # left over from an earlier stream
            if kind == "end":
                s.close_send()
                if refused(value):
                    raise Refused(value)
                log.warning("stream ended before the welcome: %s", describe(value))
                return None
            if value.WhichOneof("msg") != "welcome":
                log.warning("expected welcome, got %s", value.WhichOneof("msg"))
                s.cancel()
                return None
            w = value.welcome
            # heartbeat_interval_ms is unset (0) only from a server that predates it.
            hb_every = w.heartbeat_interval_ms / 1000 or float(max(1, w.heartbeat_interval_seconds))
            log.info("session opened session_id=%s queue=%s slots=%d lease_seconds=%d heartbeat_every=%.3fs held=%d",
                     w.session_id, self.args.queue, self.args.slots, w.lease_seconds, hb_every, len(held))
            self.session = s
            s.max_message = w.max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES
            s.last_heard = time.monotonic()
            self.on_new_session(s)
            return hb_every

    def serve(self, hb_every: float) -> int | None:
        """Handles one session until it ends; returns an exit code when the worker is done."""
        s = self.session
        assert s is not None
        s.beat_every = hb_every
        next_hb = time.monotonic() + hb_every
        if self.stopping:
            self.fence(s)
        while True:
            try:
                kind, sid, value = self.events.get(timeout=0.2)
            except queue.Empty:
                kind = None
            if kind == "msg" and sid == s.sid:
                s.last_heard = time.monotonic()
                self.handle(s, value)
                if s.beat_changed:  # a job came with a shorter lease than the schedule assumed
                    s.beat_changed = False
                    next_hb = min(next_hb, time.monotonic() + s.beat_every)
            elif kind == "end" and sid == s.sid:
                self.session = None
                s.close_send()
                if self.stopping and self.finished():
                    return 0
                if refused(value):
                    # A revoked or expired token: reconnecting would only be refused again.
                    log.error("the server refused the worker (%s); exiting (abandoned=%d)",
                              describe(value), len(self.running) + len(self.pending))
                    return 3
                if s.drain is not None:
                    log.info("server drained the stream (code=%s); reconnecting (held=%d)",
                             code_name(pb.DrainReason, s.drain.code), len(self.running) + len(self.pending))
                else:
                    log.warning("stream ended (%s); reconnecting (held=%d)", describe(value), len(self.running) + len(self.pending))
                return None
            elif kind == "done":
                self.finish(s, value)

            now = time.monotonic()
            silent = now - s.last_heard
            if silent > max(STALE_SECONDS, 3 * hb_every):
                # Heartbeats are always answered: a server this silent is gone (its host
                # vanished, its process froze) even though the connection was never reset.
                # grpcio's keepalive pings did not notice such a server; this does.
                log.warning("no word from the server for %.0fs; reconnecting (held=%d)", silent, len(self.running) + len(self.pending))
                self.session = None
                s.cancel()
                return None
            self.resend_due(s, now)
            if now >= next_hb:
                self.heartbeat(s)
                next_hb = now + s.beat_every
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
                        t.cancel(Stop.SHUTDOWN)
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
        s.fence_beats = s.beats_sent

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
            self.beat_for(s, msg.job)
            self.start(msg.job)
        elif kind == "jobs":
            for job in msg.jobs.jobs:
                self.beat_for(s, job)
                self.start(job)
        elif kind == "ack":
            self.on_ack(s, msg.ack)
        elif kind == "acks":
            for ack in msg.acks.acks:
                self.on_ack(s, ack)
        elif kind == "cancel":
            # Every code (CANCEL_REASON_OPERATOR, CANCEL_REASON_TIMEOUT, or none from an old
            # server) means the same: stop the job and report it; it fails as non-retryable and
            # becomes CANCELLED (after TIMEOUT the server already failed it: the report is
            # answered LEASE_LOST).
            t = self.running.get(msg.cancel.job_id)
            if t:
                log.info("job cancelled; stopping it job_id=%s code=%s", t.id, code_name(pb.CancelReason, msg.cancel.code))
                t.cancel(Stop.CANCELLED)
        elif kind == "lease_lost":
            self.on_lease_lost(s, msg.lease_lost)
        elif kind == "heartbeat_ack":
            self.on_heartbeat_ack(s, msg.heartbeat_ack)
        elif kind == "drain":
            # Every code (DRAIN_REASON_SERVER_SHUTDOWN, or none from an old server) means: no
            # new jobs on this stream; finish and report the jobs held, and reconnect (to this
            # server once it is back, or another one) when the server ends the stream.
            s.drain = msg.drain
            log.info("server asked to drain; finishing the jobs held code=%s running=%d",
                     code_name(pb.DrainReason, msg.drain.code), len(self.running))

    def on_lease_lost(self, s: Session, lost: pb.ServerLeaseLost) -> None:
        """Every code (EXPIRED, NOT_HELD_ON_RECONNECT, or none from an old server) means that
        lease is no longer ours. A running job under it is stopped and reported to nobody; a
        report made under it, awaiting its ack or a resend, is dropped and never sent again
        (the server applied it already, or never will). A token that names neither (an older
        lease of a job leased again) changes nothing. Without a token (a server that predates
        ServerLeaseLost.lease_token) it is about the job's running lease; a report already on
        its way is then settled by its ack."""
        job_id, token, code = lost.job_id, lost.lease_token, code_name(pb.LeaseLostReason, lost.code)
        t = self.running.get(job_id)
        if t is not None and not t.lost and token in ("", t.token):
            log.warning("lease lost; stopping the job without a report job_id=%s code=%s", job_id, code)
            t.lost = True
            t.cancel(Stop.LEASE_LOST)
            return
        rs = self.pending.get(job_id, [])
        i = report_under([token_of(r.req) for r in rs], token) if token else None
        if i is not None:
            log.warning("lease lost while its report waited; dropping the report, not sending it again "
                        "job_id=%s code=%s awaiting_resend=%s", job_id, code, rs[i].resend_at is not None)
            self.settle(s, job_id, i)
            return
        log.debug("lease_lost for a lease this worker does not hold job_id=%s lease_token=%s code=%s", job_id, token, code)

    def beat_for(self, s: Session, leased: pb.LeasedJob) -> None:
        """Keeps the heartbeats fast enough for a pushed job's lease: at least every third of
        it. The welcome's interval is a third of the queues' shortest lease at hello; a queue's
        lease_seconds lowered since gives its next jobs shorter leases, which that interval
        would let expire (docs/api.md, the heartbeat row). The schedule only gets faster during
        a session; the next welcome's interval is computed from the queues' leases as they are then."""
        if not leased.HasField("lease_expires_at"):
            return
        every = max(MIN_BEAT_SECONDS, lease_length(leased) / 3)
        if s.beat_every == 0 or every < s.beat_every:
            s.beat_every = every
            s.beat_changed = True

    def on_heartbeat_ack(self, s: Session, ack: pb.ServerHeartbeatAck) -> None:
        """Records until when the extended leases surely last (a report's, for how long it may
        still be sent again): the answered heartbeat's send time plus each lease's length, by
        this worker's clock (the ack's lease_expires_at is the server's). It stops the running
        jobs an operator asked to cancel. A lease left out was lost; the server says so with
        lease_lost. Once every heartbeat up to the fencing one is answered, the stream is
        fenced: every job pushed before our drain has arrived."""
        s.beats_acked += 1
        now = time.monotonic()
        # A heartbeat the server could not write is never answered, and acks carry no id:
        # paired by order, every later ack would take a send time one beat older, for good.
        # An answer comes within the silence bound or the stream is dropped, so older send
        # times answer nothing: drop them (the list stays short too).
        oldest = now - max(STALE_SECONDS, 3 * s.beat_every)
        while s.beats_sent_at and s.beats_sent_at[0] < oldest:
            s.beats_sent_at.popleft()
        sent_at = s.beats_sent_at.popleft() if s.beats_sent_at else now
        if s.fence_set and s.beats_acked >= s.fence_beats:
            s.fenced = True
        for lease in ack.leases:
            t = self.running.get(lease.job_id)
            if t is not None and t.token == lease.lease_token:
                t.lease_end = sent_at + t.lease_len
                if lease.cancel_requested:
                    t.cancel(Stop.CANCELLED)
                continue
            rs = self.pending.get(lease.job_id, [])
            i = report_under([token_of(r.req) for r in rs], lease.lease_token)
            if i is not None:
                rs[i].lease_end = sent_at + rs[i].lease_len

    def on_ack(self, s: Session, ack: pb.ServerAck) -> None:
        """Acts on the result code of a report's ack, never on its reason text (only logged)."""
        rs = self.pending.get(ack.job_id, [])
        i = acked_report([token_of(r.req) for r in rs], ack.lease_token)
        if i is None:
            log.debug("an ack for no report this worker waits on job_id=%s lease_token=%s", ack.job_id, ack.lease_token)
            return
        r = rs[i]
        result = ack_result(ack)
        if result == pb.ACK_RESULT_ACCEPTED:
            log.info("report acknowledged job_id=%s", ack.job_id)
        elif result == pb.ACK_RESULT_LEASE_LOST:
            # Nothing changed and the job is no longer ours. After a reconnect this may be the
            # resend of a report the server had already applied.
            log.warning("report not applied: the lease was lost; dropping the job job_id=%s resent=%s", ack.job_id, r.tries > 1)
        elif result == pb.ACK_RESULT_RETRY_LATER:
            if ack.database_unavailable:
                delay = outage_resend_delay(r.outage_resends)
                # One warning per report; an outage answers every resend the same way.
                (log.warning if r.outage_resends == 0 else log.debug)(
                    "the server cannot reach its database; sending the report again until it can "
                    "job_id=%s in=%.1fs resends=%d reason=%r", ack.job_id, delay, r.outage_resends, ack.reason)
                r.outage_resends += 1
                r.resend_at = time.monotonic() + delay
                return
            # The sends made through an outage do not count toward MAX_SENDS.
            delay = resend_delay(r.tries - r.outage_resends, time.monotonic(), r.lease_end)
            if delay is not None:
                r.resend_at = time.monotonic() + delay
                log.warning("the server could not apply the report now; sending it again job_id=%s in=%.1fs reason=%r",
                            ack.job_id, delay, ack.reason)
                return
            log.error("the server could not apply the report; giving up (the lease will expire and the job will run "
                      "again) job_id=%s sends=%d reason=%r", ack.job_id, r.tries, ack.reason)
        elif result == pb.ACK_RESULT_INVALID:
            if not r.instead_of_refused:
                log.error("report refused as invalid; failing the job instead (non-retryable) job_id=%s reason=%r",
                          ack.job_id, ack.reason)
                # A new report: its sends are counted afresh.
                r.req, r.tries, r.outage_resends, r.instead_of_refused = fail_instead(r.req, ack.reason), 0, 0, True
                self.send(s, r)
                return
            log.error("report refused as invalid; not sending it again (the lease will expire and the job will run "
                      "again) job_id=%s reason=%r", ack.job_id, ack.reason)
        else:
            log.error("report answered with an unknown result; dropping it job_id=%s result=%d reason=%r",
                      ack.job_id, result, ack.reason)
        self.settle(s, ack.job_id, i)

    def settle(self, s: Session, job_id: str, i: int) -> None:
        """Forgets the i-th report about a job (see acked_report), whose fate is decided, and
        drains after --max-jobs of them."""
        rs = self.pending[job_id]
        rs.pop(i)
        if not rs:
            del self.pending[job_id]
        self.acked += 1
        self.mark_idle()
        if not self.stopping and self.args.max_jobs > 0 and self.acked >= self.args.max_jobs:
            log.info("reached --max-jobs=%d; draining", self.args.max_jobs)
            self.begin_stop(s)

    def send(self, s: Session, r: Report) -> None:
        """Puts a report on the stream; if the stream is gone, the next session sends it again."""
        r.tries += 1
        r.resend_at = None
        s.send(r.req)

    def on_new_session(self, s: Session) -> None:
        """Heartbeats the leases carried over from the old stream at once, then sends again the
        reports left without an answer. hello.held keeps those leases but does not renew them:
        each still ends a lease length after its last renewal on the old stream, which may come
        before the first scheduled heartbeat; and the heartbeat's answer tells of a cancel made
        while the worker was away, which nothing else repeats."""
        self.heartbeat(s)
        self.resend_on_new_session(s)

    def resend_on_new_session(self, s: Session) -> None:
        """Sends on a new session the reports left without an answer on the old one: each may
        or may not have been applied, and the server answers a resend of one it applied with
        ACK_RESULT_LEASE_LOST. A report answered ACK_RESULT_RETRY_LATER and waiting for its
        resend was answered: it keeps its delay (resend_due sends it), so a reconnect neither
        cuts the backoff short nor spends one of its MAX_SENDS."""
        for rs in self.pending.values():
            for r in rs:
                if r.resend_at is None:
                    self.send(s, r)

    def resend_due(self, s: Session, now: float) -> None:
        """Sends the reports whose retry time has come."""
        for rs in self.pending.values():
            for r in rs:
                if r.resend_at is not None and now >= r.resend_at:
                    self.send(s, r)

    def start(self, leased: pb.LeasedJob) -> None:
        job = leased.job
        lease = lease_length(leased)
        t = Task(id=job.id, token=leased.lease_token, lease_end=time.monotonic() + lease, lease_len=lease)
        old = self.running.get(t.id)
        if old is not None and old.token != t.token and not old.lost:
            # The job was leased again, so its older lease is gone (its lease_lost may come
            # later, or never): stop that run and report nothing for it.
            log.warning("job leased again; stopping the run of its older lease without a report job_id=%s", t.id)
            old.lost = True
            old.cancel(Stop.LEASE_LOST)
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
        if self.running.get(t.id) is t:  # not a later lease of the same job, pushed after this one was lost
            del self.running[t.id]
        try:
            if t.lost:
                return
            if err is None:
                try:
                    st = struct_pb2.Struct()
                    st.update(result)
                    req = pb.WorkRequest(complete=pb.WorkerComplete(job_id=t.id, lease_token=t.token, result=st))
                    too_large = report_too_large(req, s.max_message if s is not None else DEFAULT_MAX_MESSAGE_BYTES)
                    if too_large is not None:
                        err = JobError(too_large, retryable=False)
                    else:
                        log.info("job done job_id=%s", t.id)
                except (TypeError, ValueError) as e:
                    err = JobError(f"result is not JSON: {e}", retryable=False)
            if err is not None:
                # A cancelled job becomes CANCELLED whatever the report says; non_retryable keeps it so.
                non_retryable = t.stopped_by is Stop.CANCELLED or (isinstance(err, JobError) and not err.retryable)
                req = pb.WorkRequest(fail=pb.WorkerFail(job_id=t.id, lease_token=t.token, error=cut_error(str(err) or type(err).__name__),
                                                        non_retryable=non_retryable))
                log.info("job failed job_id=%s err=%r retryable=%s", t.id, str(err), not non_retryable)
            r = Report(req, lease_end=t.lease_end, lease_len=t.lease_len)
            self.pending.setdefault(t.id, []).append(r)
            if s is not None:
                self.send(s, r)
        finally:
            self.mark_idle()

    def held_leases(self) -> list[pb.Lease]:
        """The leases to name in hello.held and in a heartbeat: per job, the newest one the
        worker holds, that is the running job's, or else the one of the job's latest unsettled
        report (so a report sent again after ACK_RESULT_RETRY_LATER goes out under a lease
        kept alive meanwhile). An older lease of the same job cannot be current any more (the
        job was leased again), and naming one lease per job keeps an answer by job id alone
        (a lease_lost without a token, from an older server) from being read as about the other."""
        leases = [pb.Lease(job_id=t.id, lease_token=t.token) for t in self.running.values() if not t.lost]
        leases += [pb.Lease(job_id=job_id, lease_token=token_of(rs[-1].req))
                   for job_id, rs in self.pending.items() if rs and job_id not in self.running]
        return leases

    def heartbeat(self, s: Session) -> None:
        """Extends every lease the worker holds (an empty heartbeat is a plain keep-alive)."""
        sent_at = time.monotonic()
        s.send(pb.WorkRequest(heartbeat=pb.WorkerHeartbeat(leases=self.held_leases())))
        s.beats_sent += 1
        s.beats_sent_at.append(sent_at)

    def mark_idle(self) -> None:
        if self.finished():
            self.idle_since = time.monotonic()


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s worker_id={args.worker_id} %(message)s")
    worker = Worker(args)
    try:
        return worker.run()
    finally:
        for t in worker.running.values():
            t.cancel(Stop.SHUTDOWN)
        worker.pool.shutdown(wait=False, cancel_futures=True)
        worker.channel.close()


if __name__ == "__main__":
    sys.exit(main())
