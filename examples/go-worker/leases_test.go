package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

// sentStream is a Work stream that keeps what the worker sends (nothing else of it is used).
type sentStream struct {
	evorav1.WorkerService_WorkClient
	sent []*evorav1.WorkRequest
}

func (f *sentStream) Send(r *evorav1.WorkRequest) error {
	f.sent = append(f.sent, r)
	return nil
}

// leaseTestWorker is a worker with a session whose stream keeps what is sent.
func leaseTestWorker() (*worker, *session, *sentStream) {
	w := newWorker(config{slots: 2}, nil, slog.New(slog.DiscardHandler))
	st := &sentStream{}
	return w, &session{stream: st}, st
}

// runningTask puts a running job under a lease into the worker; its context says whether
// it was stopped, and why.
func runningTask(w *worker, id, token string) (*task, context.Context) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &task{id: id, token: token, cancel: cancel, leaseEnd: time.Now().Add(time.Minute)}
	w.running[id] = t
	return t, ctx
}

// pendingReport puts a report of job "j" under a lease, sent once, into the worker.
func pendingReport(w *worker, token string) *report {
	r := completeReport(token)
	r.tries = 1
	r.leaseEnd = time.Now().Add(time.Minute)
	w.pending["j"] = append(w.pending["j"], r)
	return r
}

func leaseLost(id, token string) *evorav1.WorkResponse {
	return &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_LeaseLost{LeaseLost: &evorav1.ServerLeaseLost{
		JobId: id, LeaseToken: token, Code: evorav1.LeaseLostReason_LEASE_LOST_REASON_EXPIRED,
	}}}
}

// heartbeatLeases are the "job/token" pairs of the last heartbeat sent, sorted.
func heartbeatLeases(t *testing.T, st *sentStream) []string {
	t.Helper()
	if len(st.sent) == 0 || st.sent[len(st.sent)-1].GetHeartbeat() == nil {
		t.Fatalf("the last message sent is not a heartbeat: %v", st.sent)
	}
	var out []string
	for _, l := range st.sent[len(st.sent)-1].GetHeartbeat().GetLeases() {
		out = append(out, l.GetJobId()+"/"+l.GetLeaseToken())
	}
	slices.Sort(out)
	return out
}

func TestLeaseLostStopsOnlyTheLeaseItNames(t *testing.T) {
	w, s, _ := leaseTestWorker()
	job, ctx := runningTask(w, "j", "t2")

	// An older lease of the job (it was leased again): the running one goes on.
	w.handle(s, leaseLost("j", "t1"))
	if job.lost || ctx.Err() != nil {
		t.Fatalf("lease_lost for t1 stopped the job running under t2")
	}
	w.handle(s, leaseLost("j", "t2"))
	if !job.lost || !errors.Is(context.Cause(ctx), errLeaseLost) {
		t.Fatalf("lease_lost for t2: lost=%v cause=%v, want the job stopped as lost", job.lost, context.Cause(ctx))
	}
}

func TestLeaseLostWithoutATokenStopsTheRunningJobAsBefore(t *testing.T) {
	w, s, _ := leaseTestWorker()
	job, ctx := runningTask(w, "j", "t2")
	r := pendingReport(w, "t1")
	w.handle(s, leaseLost("j", "")) // a server that predates ServerLeaseLost.lease_token
	if !job.lost || ctx.Err() == nil {
		t.Fatalf("lease_lost without a token did not stop the running job")
	}
	if rs := w.pending["j"]; len(rs) != 1 || rs[0] != r {
		t.Fatalf("lease_lost without a token dropped a report: pending = %v", rs)
	}
}

func TestLeaseLostDropsTheReportMadeUnderThatLeaseWithoutResendingIt(t *testing.T) {
	w, s, st := leaseTestWorker()
	awaitingResend := pendingReport(w, "t1")
	w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER})
	if awaitingResend.resendAt.IsZero() {
		t.Fatal("RETRY_LATER did not schedule a resend")
	}
	w.handle(s, leaseLost("j", "t1"))
	if _, ok := w.pending["j"]; ok || w.acked != 1 {
		t.Fatalf("pending = %v, acked = %d; want the report dropped and counted as settled", w.pending, w.acked)
	}
	// Its resend time comes, and nothing goes out.
	awaitingResend.resendAt = time.Now().Add(-time.Second)
	w.resendDue(s)
	if len(st.sent) != 0 {
		t.Fatalf("sent %v after the report's lease was lost", st.sent)
	}

	// A report still awaiting its first ack is dropped the same way; a lease it was not
	// made under leaves it be.
	first := pendingReport(w, "t3")
	w.handle(s, leaseLost("j", "t4"))
	if rs := w.pending["j"]; len(rs) != 1 || rs[0] != first {
		t.Fatalf("lease_lost for t4 dropped the t3 report: pending = %v", rs)
	}
	w.handle(s, leaseLost("j", "t3"))
	if _, ok := w.pending["j"]; ok {
		t.Fatalf("lease_lost for t3 left its report pending: %v", w.pending)
	}
}

func TestHeartbeatNamesEachJobsNewestLeaseUntilItsReportIsSettled(t *testing.T) {
	w, s, st := leaseTestWorker()
	runningTask(w, "a", "ta")
	lost, _ := runningTask(w, "b", "tb")
	lost.lost = true
	pendingReport(w, "t1")
	pendingReport(w, "t2") // job j failed under t1, was leased again and reported under t2

	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"a/ta", "j/t2"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}

	// Leased a third time and running: its lease is the one named.
	runningTask(w, "j", "t3")
	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"a/ta", "j/t3"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
	delete(w.running, "j")

	// Settled, a report's lease is named no more.
	w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t2", Result: evorav1.AckResult_ACK_RESULT_ACCEPTED})
	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"a/ta", "j/t1"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
	w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_LEASE_LOST})
	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"a/ta"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
}

func TestHeartbeatAckExtendsTheLeaseAReportMayBeResentUnder(t *testing.T) {
	w, s, _ := leaseTestWorker()
	r := pendingReport(w, "t1")
	// 100 ms left: too little for the first resend (after 200 ms), unless a heartbeat
	// extends the lease meanwhile.
	r.leaseEnd = time.Now().Add(100 * time.Millisecond)
	r.leaseLen = time.Minute
	before := time.Now()
	w.heartbeat(s)
	// The server's clock runs an hour behind this worker's: the extended lease ends, by
	// its clock, at a time this worker's clock passed long ago. Only the lease's length
	// from the heartbeat's send counts here.
	extended := time.Now().Add(time.Minute - time.Hour)
	w.handle(s, &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_HeartbeatAck{HeartbeatAck: &evorav1.ServerHeartbeatAck{
		Leases: []*evorav1.ExtendedLease{{JobId: "j", LeaseToken: "t1", LeaseExpiresAt: timestamppb.New(extended)}},
	}}})
	if r.leaseEnd.Before(before.Add(time.Minute)) || r.leaseEnd.After(time.Now().Add(time.Minute)) {
		t.Fatalf("report lease end %v, want the heartbeat's send time (%v) plus a minute", r.leaseEnd, before)
	}
	w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER})
	if r.resendAt.IsZero() || len(w.pending["j"]) != 1 {
		t.Fatalf("RETRY_LATER under the extended lease: resendAt = %v, pending = %v; want a resend scheduled", r.resendAt, w.pending)
	}
}

func TestHeartbeatsNeverAnsweredDoNotMakeLaterAcksStale(t *testing.T) {
	w, s, _ := leaseTestWorker()
	r := pendingReport(w, "t1")
	r.leaseLen = time.Minute
	// Two beats the server could not write (its database away), never answered, 40 s ago.
	s.beatsSentAt = []time.Time{time.Now().Add(-40 * time.Second), time.Now().Add(-35 * time.Second)}
	before := time.Now()
	w.heartbeat(s)
	w.handle(s, &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_HeartbeatAck{HeartbeatAck: &evorav1.ServerHeartbeatAck{
		Leases: []*evorav1.ExtendedLease{{JobId: "j", LeaseToken: "t1", LeaseExpiresAt: timestamppb.Now()}},
	}}})
	// Paired with the beat just sent, not with one of those: the lease runs a minute from now.
	if r.leaseEnd.Before(before.Add(time.Minute)) {
		t.Fatalf("report lease end %v, want at least %v (the answered beat's send time plus a minute)", r.leaseEnd, before.Add(time.Minute))
	}
	if len(s.beatsSentAt) != 0 {
		t.Fatalf("%d send times kept, want none", len(s.beatsSentAt))
	}
}

func TestAServerWhoseClockDiffersChangesNotHowLongAReportMayBeResent(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		w, s, _ := leaseTestWorker()
		started := time.Now().Add(skew) // the server's clock, an hour behind or ahead of ours
		w.handle(s, &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_Job{Job: &evorav1.LeasedJob{
			Job:        &evorav1.Job{Id: "j", Type: "other", StartedAt: timestamppb.New(started)},
			LeaseToken: "t1", LeaseExpiresAt: timestamppb.New(started.Add(30 * time.Second)),
		}}})
		w.finish(s, <-w.done) // the handler's fail report, sent once
		r := w.pending["j"][0]
		if r.leaseEnd.Before(time.Now().Add(29*time.Second)) || r.leaseEnd.After(time.Now().Add(30*time.Second)) {
			t.Fatalf("skew %v: the report's lease end is %v, want 30 s from its push by this worker's clock", skew, r.leaseEnd)
		}
		// RETRY_LATER: 30 s of lease left, so the report is sent again after a delay
		// (with the server's lease end taken as ours, an hour behind gave up at once).
		w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER})
		if r.resendAt.IsZero() || len(w.pending["j"]) != 1 {
			t.Fatalf("skew %v: RETRY_LATER with 30 s of lease left: resendAt = %v, pending = %v; want a resend scheduled", skew, r.resendAt, w.pending)
		}
	}
}

func TestALeaseOfARunningJobEndsTheRunOfItsOlderLease(t *testing.T) {
	w, s, _ := leaseTestWorker()
	old, ctx := runningTask(w, "j", "t1")
	// Not a resize job: its handler ends at once with a permanent error.
	w.handle(s, &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_Job{Job: &evorav1.LeasedJob{
		Job: &evorav1.Job{Id: "j", Type: "other"}, LeaseToken: "t2", LeaseExpiresAt: timestamppb.New(time.Now().Add(time.Minute)),
	}}})
	if !old.lost || !errors.Is(context.Cause(ctx), errLeaseLost) {
		t.Fatalf("the run under t1 goes on after the job was leased again: lost=%v cause=%v", old.lost, context.Cause(ctx))
	}
	if w.running["j"].token != "t2" {
		t.Fatalf("running under %q, want t2", w.running["j"].token)
	}
	// The old run ends: nothing is reported for it, and the new run is still held.
	w.finish(s, outcome{t: old, err: errLeaseLost})
	if len(w.pending) != 0 || w.running["j"] == nil {
		t.Fatalf("after the old run ended: pending = %v, running = %v", w.pending, w.running)
	}
	w.finish(s, <-w.done)
}

func TestHeartbeatsNameAReportsLeaseWhileItWaitsThroughAnOutage(t *testing.T) {
	w, s, st := leaseTestWorker()
	r := pendingReport(w, "t1")
	r.leaseEnd = time.Now().Add(-time.Second) // the lease end last heard has passed
	w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER, DatabaseUnavailable: true})
	if r.resendAt.IsZero() {
		t.Fatal("RETRY_LATER with database_unavailable did not schedule a resend")
	}
	// While the report waits for its resend, its lease is heartbeated.
	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"j/t1"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
	// Its time comes: the same report goes out again, and its lease is still named.
	r.resendAt = time.Now().Add(-time.Millisecond)
	w.resendDue(s)
	if last := st.sent[len(st.sent)-1]; last != r.req {
		t.Fatalf("sent %v, want the report again", last)
	}
	w.heartbeat(s)
	if got, want := heartbeatLeases(t, st), []string{"j/t1"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
}

func TestANewSessionResendsTheUnansweredReportsButKeepsTheDelayOfARetryLater(t *testing.T) {
	w, s, st := leaseTestWorker()
	unanswered := pendingReport(w, "t1")
	waiting := completeReport("t2")
	waiting.tries = 1
	waiting.resendAt = time.Now().Add(time.Second) // answered ACK_RESULT_RETRY_LATER
	w.pending["k"] = []*report{waiting}
	w.resendOnNewSession(s)
	if len(st.sent) != 1 || leaseToken(st.sent[0]) != "t1" {
		t.Fatalf("sent %v, want only the unanswered report (t1)", st.sent)
	}
	if unanswered.tries != 2 || waiting.tries != 1 || waiting.resendAt.IsZero() {
		t.Fatalf("tries %d and %d, resendAt %v: the waiting report must keep its delay", unanswered.tries, waiting.tries, waiting.resendAt)
	}
}

func TestAJobWithAShorterLeaseThanTheWelcomeSaidSpeedsUpTheHeartbeats(t *testing.T) {
	w, s, _ := leaseTestWorker()
	s.beatEvery = 10 * time.Second // the welcome's: a third of a 30 s lease at hello
	push := func(id string, lease time.Duration) {
		started := time.Now().Add(-time.Hour) // the server's clock: only the difference counts
		w.handle(s, &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_Job{Job: &evorav1.LeasedJob{
			Job:        &evorav1.Job{Id: id, Type: "other", StartedAt: timestamppb.New(started)},
			LeaseToken: "t-" + id, LeaseExpiresAt: timestamppb.New(started.Add(lease)),
		}}})
		w.finish(s, <-w.done)
	}
	// The queue's lease was lowered to 3 s after the hello: beat every second from now on.
	push("a", 3*time.Second)
	if s.beatEvery != time.Second || !s.beatChanged {
		t.Fatalf("after a 3 s lease: beat every %v (changed %v), want 1s", s.beatEvery, s.beatChanged)
	}
	// A job with a longer lease does not slow the heartbeats down again.
	s.beatChanged = false
	push("b", 30*time.Second)
	if s.beatEvery != time.Second || s.beatChanged {
		t.Fatalf("after a 30 s lease: beat every %v (changed %v), want 1s unchanged", s.beatEvery, s.beatChanged)
	}
}

func TestTheFenceWaitsForTheFencingHeartbeatsAckNotAnEarlierOnes(t *testing.T) {
	w, s, _ := leaseTestWorker()
	w.heartbeat(s) // the periodic heartbeat, its ack still on its way
	w.beginStop(s) // drain + the fencing heartbeat
	ack := &evorav1.WorkResponse{Msg: &evorav1.WorkResponse_HeartbeatAck{HeartbeatAck: &evorav1.ServerHeartbeatAck{}}}
	w.handle(s, ack) // answers the periodic heartbeat: a job pushed before the drain may still come
	if s.fenced {
		t.Fatal("fenced by the ack of a heartbeat sent before the drain")
	}
	w.handle(s, ack) // answers the fencing heartbeat
	if !s.fenced {
		t.Fatal("not fenced once the fencing heartbeat was answered")
	}
}

func TestANewSessionHeartbeatsTheLeasesCarriedOverAtOnce(t *testing.T) {
	w, s, st := leaseTestWorker()
	runningTask(w, "a", "ta")
	pendingReport(w, "t1")
	w.onNewSession(s)
	// hello.held does not renew them: the first message after the welcome renews them all,
	// before the unanswered report goes out again.
	if len(st.sent) != 2 || st.sent[0].GetHeartbeat() == nil {
		t.Fatalf("sent %v, want a heartbeat, then the report", st.sent)
	}
	st.sent = st.sent[:1]
	if got, want := heartbeatLeases(t, st), []string{"a/ta", "j/t1"}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat leases %v, want %v", got, want)
	}
}
