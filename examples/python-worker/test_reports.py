"""Unit tests of what the worker decides from an ack and a lease_lost: reports.py's
functions, Worker.on_ack matching acks to reports by lease token, and the leases the worker
heartbeats and gives up (no stream is opened).

Run: python -m unittest   (in this folder, with the requirements installed)
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from evora.v1 import job_pb2  # noqa: E402
from evora.v1 import worker_pb2 as pb  # noqa: E402
from google.protobuf.timestamp_pb2 import Timestamp  # noqa: E402
from google.protobuf.struct_pb2 import Struct  # noqa: E402
from reports import (  # noqa: E402
    DEFAULT_MAX_MESSAGE_BYTES, FIRST_RESEND, MAX_ERROR_CHARS, MAX_OUTAGE_RESEND, MAX_SENDS, ack_result, acked_report,
    code_name, cut_error, outage_resend_delay, report_too_large, report_under, resend_delay, token_of,
)
from worker import FIRST_RECONNECT_WAIT, Report, Stop, Task, Worker, next_reconnect_backoff, reconnect_wait  # noqa: E402


class AckResultTest(unittest.TestCase):
    def test_reads_the_code_never_the_text(self) -> None:
        cases = [
            (pb.ServerAck(accepted=True, result=pb.ACK_RESULT_ACCEPTED), pb.ACK_RESULT_ACCEPTED),
            (pb.ServerAck(result=pb.ACK_RESULT_LEASE_LOST, reason="anything"), pb.ACK_RESULT_LEASE_LOST),
            # A reason that reads like a retry does not make one.
            (pb.ServerAck(result=pb.ACK_RESULT_INVALID, reason="internal error; retry the write"), pb.ACK_RESULT_INVALID),
            (pb.ServerAck(result=pb.ACK_RESULT_RETRY_LATER), pb.ACK_RESULT_RETRY_LATER),
        ]
        for ack, want in cases:
            self.assertEqual(ack_result(ack), want, ack)

    def test_an_old_server_without_codes_is_read_from_accepted(self) -> None:
        self.assertEqual(ack_result(pb.ServerAck(accepted=True)), pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(ack_result(pb.ServerAck(reason="internal error; retry the write")), pb.ACK_RESULT_LEASE_LOST)


class ResendDelayTest(unittest.TestCase):
    def test_doubles_and_stops_after_max_sends(self) -> None:
        now, far = 1000.0, 1000.0 + 3600
        delays = []
        sends = 1
        while (d := resend_delay(sends, now, far)) is not None:
            delays.append(d)
            sends += 1
        self.assertEqual(sends, MAX_SENDS)
        self.assertEqual(delays, [0.2, 0.4, 0.8, 1.6])

    def test_never_outlives_the_lease(self) -> None:
        self.assertIsNone(resend_delay(1, 1000.0, 1000.2))
        self.assertIsNone(resend_delay(1, 1000.0, 999.0))
        self.assertEqual(resend_delay(1, 1000.0, 1000.3), 0.2)


class OutageResendDelayTest(unittest.TestCase):
    def test_doubles_up_to_the_cap_and_never_gives_up(self) -> None:
        self.assertEqual([outage_resend_delay(n) for n in range(7)], [0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0])
        self.assertEqual(outage_resend_delay(10**6), MAX_OUTAGE_RESEND)


class AckedReportTest(unittest.TestCase):
    def test_matches_the_lease_token_the_ack_names(self) -> None:
        self.assertEqual(acked_report(["t1", "t2"], "t2"), 1)
        self.assertEqual(acked_report(["t1", "t2"], "t1"), 0)
        # A token none of the reports carried answers none of them.
        self.assertIsNone(acked_report(["t1", "t2"], "t3"))
        self.assertIsNone(acked_report([], "t1"))

    def test_an_old_server_without_tokens_answers_the_oldest(self) -> None:
        self.assertEqual(acked_report(["t1", "t2"], ""), 0)
        self.assertIsNone(acked_report([], ""))

    def test_report_under_finds_only_the_lease_named(self) -> None:
        self.assertEqual(report_under(["t1", "t2"], "t2"), 1)
        self.assertIsNone(report_under(["t1", "t2"], "t3"))
        self.assertIsNone(report_under(["t1", "t2"], ""))


def report(token: str, kind: str) -> Report:
    """A report of job "j" under a lease token, sent once, its lease far off."""
    req = (pb.WorkRequest(complete=pb.WorkerComplete(job_id="j", lease_token=token)) if kind == "complete"
           else pb.WorkRequest(fail=pb.WorkerFail(job_id="j", lease_token=token)))
    return Report(req, lease_end=time.monotonic() + 3600, tries=1)


class OnAckTest(unittest.TestCase):
    """Worker.on_ack with two reports of one job under two leases (no stream is opened)."""

    def setUp(self) -> None:
        self.worker = Worker(argparse.Namespace(address="127.0.0.1:1", slots=1, max_jobs=0))
        self.addCleanup(self.worker.channel.close)
        self.addCleanup(self.worker.pool.shutdown)
        self.first, self.second = report("t1", "fail"), report("t2", "complete")
        self.worker.pending["j"] = [self.first, self.second]
        # Kept off stderr (and every ack is logged, so the capture is never empty). Not
        # enterContext (3.11+): the worker runs on Python 3.10.
        capture = self.assertLogs("python-worker", level="DEBUG")
        self.logs = capture.__enter__()
        self.addCleanup(capture.__exit__, None, None, None)

    def ack(self, token: str, result: int) -> None:
        self.worker.on_ack(None, pb.ServerAck(job_id="j", lease_token=token, result=result,  # type: ignore[arg-type]
                                              accepted=result == pb.ACK_RESULT_ACCEPTED))

    def test_acks_in_reverse_order_settle_the_report_of_their_lease(self) -> None:
        # The later report is answered first: RETRY_LATER schedules its resend, not the older one's.
        self.ack("t2", pb.ACK_RESULT_RETRY_LATER)
        self.assertIsNotNone(self.second.resend_at)
        self.assertIsNone(self.first.resend_at)
        self.ack("t2", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.first])
        # An ack naming a lease no report carried settles nothing.
        self.ack("t3", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.first])
        self.assertIn("lease_token=t3", self.logs.output[-1])
        self.ack("t1", pb.ACK_RESULT_LEASE_LOST)
        self.assertEqual(self.worker.pending, {})
        self.assertEqual(self.worker.acked, 2)

    def test_an_ack_without_a_token_settles_the_oldest(self) -> None:
        self.ack("", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending["j"], [self.second])
        self.ack("", pb.ACK_RESULT_ACCEPTED)
        self.assertEqual(self.worker.pending, {})

    def test_an_outage_is_resent_through_past_the_lease_and_the_send_bound(self) -> None:
        s = SentSession()
        r = self.second
        r.lease_end = time.monotonic() - 60  # as last heard: the heartbeats failed to extend it meanwhile
        outage = pb.ServerAck(job_id="j", lease_token="t2", result=pb.ACK_RESULT_RETRY_LATER, database_unavailable=True)
        logged = len(self.logs.records)
        # Answered RETRY_LATER + database_unavailable twice MAX_SENDS times: every answer
        # schedules a resend, after the capped backoff, and the resend goes out.
        for n in range(2 * MAX_SENDS):
            before = time.monotonic()
            self.worker.on_ack(s, outage)  # type: ignore[arg-type]
            assert r.resend_at is not None, f"outage answer {n + 1}: no resend scheduled"
            self.assertGreaterEqual(r.resend_at - before, outage_resend_delay(n))
            self.assertLess(r.resend_at - before, outage_resend_delay(n) + 1)
            self.worker.resend_due(s, r.resend_at)  # type: ignore[arg-type]
        self.assertEqual(len(s.sent), 2 * MAX_SENDS)
        self.assertEqual(r.tries, 2 * MAX_SENDS + 1)
        self.assertEqual(self.worker.pending["j"], [self.first, r])
        self.assertEqual(self.worker.acked, 0)
        # One warning for the report, the rest at debug.
        self.assertEqual([rec.levelno for rec in self.logs.records[logged:]], [logging.WARNING] + [logging.DEBUG] * (2 * MAX_SENDS - 1))

        # The database is back but the server answers a plain RETRY_LATER: the old rule
        # again, not counting the sends made through the outage...
        r.lease_end = time.monotonic() + 3600
        before = time.monotonic()
        self.ack("t2", pb.ACK_RESULT_RETRY_LATER)
        assert r.resend_at is not None, "plain RETRY_LATER after the outage: no resend scheduled"
        self.assertLess(r.resend_at - before, FIRST_RESEND + 1)
        # ...and never past the lease.
        r.lease_end = time.monotonic()
        self.ack("t2", pb.ACK_RESULT_RETRY_LATER)
        self.assertEqual(self.worker.pending["j"], [self.first])
        self.assertEqual(self.worker.acked, 1)


class InvalidAckTest(unittest.TestCase):
    """Worker.on_ack with ACK_RESULT_INVALID: a non-retryable fail goes instead, once."""

    def setUp(self) -> None:
        self.worker = Worker(argparse.Namespace(address="127.0.0.1:1", slots=1, max_jobs=0))
        self.addCleanup(self.worker.channel.close)
        self.addCleanup(self.worker.pool.shutdown)
        capture = self.assertLogs("python-worker", level="DEBUG")
        capture.__enter__()
        self.addCleanup(capture.__exit__, None, None, None)
        self.s = SentSession()

    def test_a_refused_report_is_replaced_once_by_a_non_retryable_fail(self) -> None:
        r = report("t1", "complete")
        self.worker.pending["j"] = [r]
        invalid = pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_INVALID, reason="result contains a NUL")
        # The server changed nothing and the lease runs on: the fail ends the job now, not
        # after its lease.
        self.worker.on_ack(self.s, invalid)  # type: ignore[arg-type]
        self.assertEqual(len(self.s.sent), 1)
        sent = self.s.sent[0]
        self.assertEqual(sent.WhichOneof("msg"), "fail")
        self.assertEqual((sent.fail.job_id, sent.fail.lease_token, sent.fail.non_retryable, sent.fail.error),
                         ("j", "t1", True, "complete refused: result contains a NUL"))
        self.assertEqual((self.worker.pending["j"], r.tries, self.worker.acked), ([r], 1, 0))
        # The fail refused too: given up, not sent again.
        self.worker.on_ack(self.s, invalid)  # type: ignore[arg-type]
        self.assertEqual((len(self.s.sent), self.worker.pending, self.worker.acked), (1, {}, 1))


class SentSession:
    """What the worker needs of a Session: it keeps what is sent."""

    def __init__(self) -> None:
        self.sent: list[pb.WorkRequest] = []
        self.fence_set = False
        self.fenced = False
        self.beat_every = 0.0
        self.beat_changed = False
        self.beats_sent = self.beats_acked = self.fence_beats = 0
        self.beats_sent_at: collections.deque[float] = collections.deque()

    def send(self, req: pb.WorkRequest) -> None:
        self.sent.append(req)

    def heartbeat_leases(self) -> list[str]:
        """The "job/token" pairs of the last heartbeat sent, sorted."""
        last = self.sent[-1]
        assert last.WhichOneof("msg") == "heartbeat", last
        return sorted(f"{lease.job_id}/{lease.lease_token}" for lease in last.heartbeat.leases)


def lease_lost(job_id: str, token: str) -> pb.WorkResponse:
    return pb.WorkResponse(lease_lost=pb.ServerLeaseLost(job_id=job_id, lease_token=token, code=pb.LEASE_LOST_REASON_EXPIRED))


class LeasesTest(unittest.TestCase):
    """Worker.handle with lease_lost and heartbeat_ack, and the leases its heartbeats name."""

    def setUp(self) -> None:
        self.worker = Worker(argparse.Namespace(address="127.0.0.1:1", slots=2, max_jobs=0, worker_id="w"))
        self.addCleanup(self.worker.channel.close)
        self.addCleanup(self.worker.pool.shutdown)
        self.s = SentSession()
        # The worker's log kept off stderr (as in OnAckTest); a line of the test's own keeps
        # the capture from being empty where the worker logs nothing.
        capture = self.assertLogs("python-worker", level="DEBUG")
        capture.__enter__()
        self.addCleanup(capture.__exit__, None, None, None)
        logging.getLogger("python-worker").debug("test %s", self.id())

    def test_a_new_session_resends_the_unanswered_reports_but_keeps_the_delay_of_a_retry_later(self) -> None:
        unanswered = self.pending("t1")
        waiting = report("t2", "complete")
        waiting.resend_at = time.monotonic() + 1  # answered ACK_RESULT_RETRY_LATER
        self.worker.pending["k"] = [waiting]
        self.worker.resend_on_new_session(self.s)  # type: ignore[arg-type]
        self.assertEqual([token_of(r) for r in self.s.sent], ["t1"])
        self.assertEqual((unanswered.tries, waiting.tries), (2, 1))
        self.assertIsNotNone(waiting.resend_at)

    def test_a_new_session_heartbeats_the_leases_carried_over_at_once(self) -> None:
        self.running("a", "ta")
        self.pending("t1")
        self.worker.on_new_session(self.s)  # type: ignore[arg-type]
        # hello.held does not renew them: the first message after the welcome renews them all,
        # before the unanswered report goes out again.
        self.assertEqual([r.WhichOneof("msg") for r in self.s.sent], ["heartbeat", "complete"])
        del self.s.sent[1:]
        self.assertEqual(self.s.heartbeat_leases(), ["a/ta", "j/t1"])

    def running(self, job_id: str, token: str) -> Task:
        t = Task(id=job_id, token=token, lease_end=time.monotonic() + 60)
        self.worker.running[job_id] = t
        return t

    def pending(self, token: str) -> Report:
        r = report(token, "complete")
        self.worker.pending.setdefault("j", []).append(r)
        return r

    def handle(self, msg: pb.WorkResponse) -> None:
        self.worker.handle(self.s, msg)  # type: ignore[arg-type]

    def test_stops_only_the_lease_it_names(self) -> None:
        t = self.running("j", "t2")
        # An older lease of the job (it was leased again): the running one goes on.
        self.handle(lease_lost("j", "t1"))
        self.assertFalse(t.lost)
        self.assertFalse(t.stop.is_set())
        self.handle(lease_lost("j", "t2"))
        self.assertTrue(t.lost)
        self.assertIs(t.stopped_by, Stop.LEASE_LOST)

    def test_without_a_token_stops_the_running_job_as_before(self) -> None:
        t = self.running("j", "t2")
        r = self.pending("t1")
        self.handle(lease_lost("j", ""))  # a server that predates ServerLeaseLost.lease_token
        self.assertIs(t.stopped_by, Stop.LEASE_LOST)
        self.assertEqual(self.worker.pending["j"], [r])

    def test_drops_the_report_made_under_that_lease_without_resending_it(self) -> None:
        r = self.pending("t1")
        self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_RETRY_LATER))  # type: ignore[arg-type]
        self.assertIsNotNone(r.resend_at)
        self.handle(lease_lost("j", "t1"))
        self.assertEqual(self.worker.pending, {})
        self.assertEqual(self.worker.acked, 1)
        # Its resend time comes, and nothing goes out.
        self.worker.resend_due(self.s, time.monotonic() + 3600)  # type: ignore[arg-type]
        self.assertEqual(self.s.sent, [])

        # A report still awaiting its first ack is dropped the same way; a lease it was not
        # made under leaves it be.
        first = self.pending("t3")
        self.handle(lease_lost("j", "t4"))
        self.assertEqual(self.worker.pending["j"], [first])
        self.handle(lease_lost("j", "t3"))
        self.assertEqual(self.worker.pending, {})

    def test_heartbeats_name_each_jobs_newest_lease_until_its_report_is_settled(self) -> None:
        self.running("a", "ta")
        self.running("b", "tb").lost = True
        self.pending("t1")
        self.pending("t2")  # job j failed under t1, was leased again and reported under t2
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["a/ta", "j/t2"])

        # Leased a third time and running: its lease is the one named.
        self.running("j", "t3")
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["a/ta", "j/t3"])
        del self.worker.running["j"]

        # Settled, a report's lease is named no more.
        self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t2", result=pb.ACK_RESULT_ACCEPTED))  # type: ignore[arg-type]
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["a/ta", "j/t1"])
        self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_LEASE_LOST))  # type: ignore[arg-type]
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["a/ta"])

    def test_a_heartbeat_ack_extends_the_lease_a_report_may_be_resent_under(self) -> None:
        r = self.pending("t1")
        # 0.1 s left: too little for the first resend (after 0.2 s), unless a heartbeat
        # extends the lease meanwhile.
        r.lease_end = time.monotonic() + 0.1
        r.lease_len = 60
        before = time.monotonic()
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        # The server's clock runs an hour behind this worker's: the extended lease ends, by its
        # clock, at a time this worker's clock passed long ago. Only the lease's length from the
        # heartbeat's send counts here.
        extended = Timestamp(seconds=int(time.time()) + 60 - 3600)
        self.handle(pb.WorkResponse(heartbeat_ack=pb.ServerHeartbeatAck(
            leases=[pb.ExtendedLease(job_id="j", lease_token="t1", lease_expires_at=extended)])))
        self.assertGreaterEqual(r.lease_end, before + 60)
        self.assertLessEqual(r.lease_end, time.monotonic() + 60)
        self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_RETRY_LATER))  # type: ignore[arg-type]
        self.assertIsNotNone(r.resend_at)
        self.assertEqual(self.worker.pending["j"], [r])

    def test_heartbeats_never_answered_do_not_make_later_acks_stale(self) -> None:
        r = self.pending("t1")
        r.lease_len = 60
        # Two beats the server could not write (its database away), never answered, 40 s ago.
        self.s.beats_sent_at.extend([time.monotonic() - 40, time.monotonic() - 35])
        before = time.monotonic()
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.handle(pb.WorkResponse(heartbeat_ack=pb.ServerHeartbeatAck(
            leases=[pb.ExtendedLease(job_id="j", lease_token="t1", lease_expires_at=Timestamp(seconds=int(time.time())))])))
        # Paired with the beat just sent, not with one of those: the lease runs a minute from now.
        self.assertGreaterEqual(r.lease_end, before + 60)
        self.assertEqual(len(self.s.beats_sent_at), 0)

    def test_a_server_whose_clock_differs_changes_not_how_long_a_report_may_be_resent(self) -> None:
        for skew in (-3600, 3600):
            with self.subTest(skew=skew):
                self.worker.pending.clear()
                started = int(time.time()) + skew  # the server's clock, an hour behind or ahead of ours
                self.handle(pb.WorkResponse(job=pb.LeasedJob(
                    job=job_pb2.Job(id="j", type="other", started_at=Timestamp(seconds=started)), lease_token="t1",
                    lease_expires_at=Timestamp(seconds=started + 30))))
                _, _, done = self.worker.events.get(timeout=10)
                self.worker.finish(self.s, done)  # type: ignore[arg-type]  # the handler's fail report, sent once
                r = self.worker.pending["j"][0]
                self.assertGreaterEqual(r.lease_end, time.monotonic() + 29)
                self.assertLessEqual(r.lease_end, time.monotonic() + 30)
                # RETRY_LATER: 30 s of lease left, so the report is sent again after a delay
                # (with the server's lease end taken as ours, an hour behind gave up at once).
                self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_RETRY_LATER))  # type: ignore[arg-type]
                self.assertIsNotNone(r.resend_at)
                self.assertEqual(self.worker.pending["j"], [r])

    def test_heartbeats_name_a_reports_lease_while_it_waits_through_an_outage(self) -> None:
        r = self.pending("t1")
        r.lease_end = time.monotonic() - 1  # the lease end last heard has passed
        self.worker.on_ack(self.s, pb.ServerAck(job_id="j", lease_token="t1", result=pb.ACK_RESULT_RETRY_LATER,  # type: ignore[arg-type]
                                                database_unavailable=True))
        assert r.resend_at is not None, "RETRY_LATER with database_unavailable did not schedule a resend"
        # While the report waits for its resend, its lease is heartbeated.
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["j/t1"])
        # Its time comes: the same report goes out again, and its lease is still named.
        self.worker.resend_due(self.s, r.resend_at)  # type: ignore[arg-type]
        self.assertIs(self.s.sent[-1], r.req)
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]
        self.assertEqual(self.s.heartbeat_leases(), ["j/t1"])

    def test_a_new_lease_of_a_running_job_ends_the_run_of_its_older_lease(self) -> None:
        old = self.running("j", "t1")
        # Not a resize job: its handler ends at once with a permanent error.
        self.handle(pb.WorkResponse(job=pb.LeasedJob(job=job_pb2.Job(id="j", type="other"), lease_token="t2")))
        self.assertIs(old.stopped_by, Stop.LEASE_LOST)
        self.assertTrue(old.lost)
        self.assertEqual(self.worker.running["j"].token, "t2")
        # The old run ends: nothing is reported for it, and the new run is still held.
        self.worker.finish(self.s, (old, None, RuntimeError("lease lost")))  # type: ignore[arg-type]
        self.assertEqual(self.worker.pending, {})
        self.assertIn("j", self.worker.running)
        _, _, done = self.worker.events.get(timeout=10)
        self.worker.finish(self.s, done)  # type: ignore[arg-type]
        self.assertEqual([token_of(r.req) for r in self.worker.pending["j"]], ["t2"])

    def test_a_job_with_a_shorter_lease_than_the_welcome_said_speeds_up_the_heartbeats(self) -> None:
        self.s.beat_every = 10.0  # the welcome's: a third of a 30 s lease at hello

        def push(job_id: str, lease: float) -> None:
            started = Timestamp(seconds=1_000_000)  # the server's clock: only the difference counts
            end = Timestamp(seconds=1_000_000 + int(lease))
            self.handle(pb.WorkResponse(job=pb.LeasedJob(
                job=job_pb2.Job(id=job_id, type="other", started_at=started), lease_token="t-" + job_id, lease_expires_at=end)))
            _, _, done = self.worker.events.get(timeout=10)
            self.worker.finish(self.s, done)  # type: ignore[arg-type]

        # The queue's lease was lowered to 3 s after the hello: beat every second from now on.
        push("a", 3)
        self.assertEqual((self.s.beat_every, self.s.beat_changed), (1.0, True))
        # A job with a longer lease does not slow the heartbeats down again.
        self.s.beat_changed = False
        push("b", 30)
        self.assertEqual((self.s.beat_every, self.s.beat_changed), (1.0, False))

    def test_the_fence_waits_for_the_fencing_heartbeats_ack_not_an_earlier_ones(self) -> None:
        self.worker.heartbeat(self.s)  # type: ignore[arg-type]  # the periodic one, its ack on its way
        self.worker.begin_stop(self.s)  # type: ignore[arg-type]  # drain + the fencing heartbeat
        ack = pb.WorkResponse(heartbeat_ack=pb.ServerHeartbeatAck())
        self.handle(ack)  # answers the periodic heartbeat: a job pushed before the drain may still come
        self.assertFalse(self.s.fenced)
        self.handle(ack)  # answers the fencing heartbeat
        self.assertTrue(self.s.fenced)


class CodeNameTest(unittest.TestCase):
    def test_names_known_codes_and_numbers_unknown_ones(self) -> None:
        self.assertEqual(code_name(pb.LeaseLostReason, pb.LEASE_LOST_REASON_EXPIRED), "LEASE_LOST_REASON_EXPIRED")
        self.assertEqual(code_name(pb.DrainReason, 99), "99")



class ReconnectWaitTest(unittest.TestCase):
    def test_never_passes_two_seconds(self) -> None:
        b = FIRST_RECONNECT_WAIT
        for _ in range(20):
            b = next_reconnect_backoff(b)
            self.assertTrue(0.05 <= reconnect_wait(b) <= 2.05, (b, reconnect_wait(b)))
        self.assertEqual(b, 2.0)


class SizeLimitTest(unittest.TestCase):
    def test_a_report_over_the_message_limit_is_refused_and_errors_are_cut(self) -> None:
        big = Struct()
        big.update({"s": "x" * 100_000})
        req = pb.WorkRequest(complete=pb.WorkerComplete(job_id="j", lease_token="t", result=big))
        self.assertIsNone(report_too_large(req, DEFAULT_MAX_MESSAGE_BYTES))
        reason = report_too_large(req, 65536)
        assert reason is not None
        self.assertRegex(reason, r"^complete refused: the report is \d+ bytes; the server takes messages of at most 65536$")
        self.assertEqual(cut_error("é" * 20_000), "é" * MAX_ERROR_CHARS)
        self.assertEqual(cut_error("short"), "short")


if __name__ == "__main__":
    unittest.main()
