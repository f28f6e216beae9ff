package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

func TestAckResultReadsTheCodeAndFallsBackToAcceptedForOldServers(t *testing.T) {
	cases := []struct {
		ack  *evorav1.ServerAck
		want evorav1.AckResult
	}{
		{&evorav1.ServerAck{Accepted: true, Result: evorav1.AckResult_ACK_RESULT_ACCEPTED}, evorav1.AckResult_ACK_RESULT_ACCEPTED},
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_LEASE_LOST, Reason: "anything"}, evorav1.AckResult_ACK_RESULT_LEASE_LOST},
		// The text says nothing: a reason that reads like a retry does not make one.
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_INVALID, Reason: "internal error; retry the write"}, evorav1.AckResult_ACK_RESULT_INVALID},
		{&evorav1.ServerAck{Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER}, evorav1.AckResult_ACK_RESULT_RETRY_LATER},
		// A server that predates result codes: accepted decides.
		{&evorav1.ServerAck{Accepted: true}, evorav1.AckResult_ACK_RESULT_ACCEPTED},
		{&evorav1.ServerAck{Reason: "internal error; retry the write"}, evorav1.AckResult_ACK_RESULT_LEASE_LOST},
	}
	for _, c := range cases {
		if got := ackResult(c.ack); got != c.want {
			t.Errorf("ackResult(%v) = %v, want %v", c.ack, got, c.want)
		}
	}
}

func TestResendDelayDoublesStopsAfterMaxSendsAndNeverOutlivesTheLease(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	farLease := now.Add(time.Hour)
	var delays []time.Duration
	for sends := 1; ; sends++ {
		d, ok := resendDelay(sends, now, farLease)
		if !ok {
			if sends != maxSends {
				t.Fatalf("gave up after %d sends, want %d", sends, maxSends)
			}
			break
		}
		delays = append(delays, d)
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}
	if len(delays) != len(want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	if _, ok := resendDelay(1, now, now.Add(200*time.Millisecond)); ok {
		t.Error("resends although the lease ends when the resend would go out")
	}
	if _, ok := resendDelay(1, now, now.Add(-time.Second)); ok {
		t.Error("resends although the lease has ended")
	}
}

func TestOutageResendDelayDoublesUpToTheCapAndNeverGivesUp(t *testing.T) {
	var delays []time.Duration
	for n := range 7 {
		delays = append(delays, outageResendDelay(n))
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		2 * time.Second, 2 * time.Second, 2 * time.Second}
	if !slices.Equal(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	if d := outageResendDelay(1 << 20); d != maxOutageResend {
		t.Fatalf("after 2^20 resends the delay is %v, want %v", d, maxOutageResend)
	}
}

// levels is a slog.Handler that keeps the level of each record logged.
type levels []slog.Level

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	*l = append(*l, r.Level)
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

func TestOnAckResendsThroughAnOutagePastTheLeaseAndTheSendBound(t *testing.T) {
	var logged levels
	w := newWorker(config{slots: 1}, nil, slog.New(&logged))
	st := &sentStream{}
	s := &session{stream: st}
	r := completeReport("t1")
	r.tries = 1
	r.leaseEnd = time.Now().Add(-time.Minute) // as last heard: the heartbeats failed to extend it meanwhile
	w.pending["j"] = []*report{r}
	ack := func(outage bool) {
		w.onAck(s, &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_RETRY_LATER, DatabaseUnavailable: outage})
	}

	// Answered RETRY_LATER + database_unavailable twice maxSends times: every answer
	// schedules a resend, after the capped backoff, and the resend goes out.
	for n := range 2 * maxSends {
		before := time.Now()
		ack(true)
		if r.resendAt.IsZero() || len(w.pending["j"]) != 1 {
			t.Fatalf("outage answer %d: resendAt = %v, pending = %v; want a resend scheduled", n+1, r.resendAt, w.pending)
		}
		if d := r.resendAt.Sub(before); d < outageResendDelay(n) || d > outageResendDelay(n)+time.Second {
			t.Fatalf("outage answer %d: resend in %v, want %v", n+1, d, outageResendDelay(n))
		}
		r.resendAt = time.Now().Add(-time.Millisecond)
		w.resendDue(s)
	}
	if len(st.sent) != 2*maxSends || r.tries != 2*maxSends+1 || w.acked != 0 {
		t.Fatalf("sent %d, tries %d, acked %d; want %d resends of the report, unsettled", len(st.sent), r.tries, w.acked, 2*maxSends)
	}
	// One warning for the report, the rest at debug.
	want := slices.Repeat([]slog.Level{slog.LevelDebug}, 2*maxSends)
	want[0] = slog.LevelWarn
	if !slices.Equal(logged, want) {
		t.Fatalf("logged levels %v, want %v", logged, want)
	}

	// The database is back but the server answers a plain RETRY_LATER: the old rule again,
	// not counting the sends made through the outage.
	r.leaseEnd = time.Now().Add(time.Hour)
	before := time.Now()
	ack(false)
	if d := r.resendAt.Sub(before); r.resendAt.IsZero() || d < firstResend || d > firstResend+time.Second {
		t.Fatalf("plain RETRY_LATER after the outage: resend in %v, want %v", d, firstResend)
	}
	// ...and never past the lease.
	r.leaseEnd = time.Now()
	ack(false)
	if _, ok := w.pending["j"]; ok || w.acked != 1 {
		t.Fatalf("plain RETRY_LATER past the lease: pending = %v, acked = %d; want the report given up", w.pending, w.acked)
	}
}

// completeReport and failReport are reports of job "j" under a lease token.
func completeReport(token string) *report {
	return &report{req: &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Complete{Complete: &evorav1.WorkerComplete{JobId: "j", LeaseToken: token}}}}
}

func failReport(token string) *report {
	return &report{req: &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Fail{Fail: &evorav1.WorkerFail{JobId: "j", LeaseToken: token}}}}
}

func TestAckedReportMatchesTheLeaseTokenAndFallsBackToTheOldestForOldServers(t *testing.T) {
	rs := []*report{failReport("t1"), completeReport("t2")}
	cases := []struct {
		rs    []*report
		token string
		want  int
	}{
		{rs, "t2", 1},
		{rs, "t1", 0},
		// A token none of the reports carried answers none of them.
		{rs, "t3", -1},
		// A server that predates ServerAck.lease_token: the oldest report.
		{rs, "", 0},
		{nil, "", -1},
		{nil, "t1", -1},
	}
	for _, c := range cases {
		if got := ackedReport(c.rs, c.token); got != c.want {
			t.Errorf("ackedReport(%d reports, %q) = %d, want %d", len(c.rs), c.token, got, c.want)
		}
	}
}

func TestOnAckSettlesTheReportOfTheAcksLeaseInAnyOrder(t *testing.T) {
	w := newWorker(config{slots: 2}, nil, slog.New(slog.DiscardHandler))
	first, second := failReport("t1"), completeReport("t2")
	first.tries, second.tries = 1, 1
	second.leaseEnd = time.Now().Add(time.Hour)
	w.pending["j"] = []*report{first, second}
	ack := func(token string, res evorav1.AckResult) {
		w.onAck(nil, &evorav1.ServerAck{JobId: "j", LeaseToken: token, Result: res, Accepted: res == evorav1.AckResult_ACK_RESULT_ACCEPTED})
	}

	// The later report is answered first: RETRY_LATER schedules its resend, not the older one's.
	ack("t2", evorav1.AckResult_ACK_RESULT_RETRY_LATER)
	if second.resendAt.IsZero() || !first.resendAt.IsZero() {
		t.Fatalf("RETRY_LATER for t2: resendAt first=%v second=%v, want only the second set", first.resendAt, second.resendAt)
	}
	ack("t2", evorav1.AckResult_ACK_RESULT_ACCEPTED)
	if rs := w.pending["j"]; len(rs) != 1 || rs[0] != first {
		t.Fatalf("after t2 was accepted, pending = %v, want only the t1 report", rs)
	}
	// An ack naming a lease no report carried settles nothing.
	ack("t3", evorav1.AckResult_ACK_RESULT_ACCEPTED)
	if rs := w.pending["j"]; len(rs) != 1 || rs[0] != first {
		t.Fatalf("after an ack for t3, pending = %v, want only the t1 report", rs)
	}
	ack("t1", evorav1.AckResult_ACK_RESULT_LEASE_LOST)
	if _, ok := w.pending["j"]; ok || w.acked != 2 {
		t.Fatalf("pending = %v, acked = %d; want nothing pending and 2 acked", w.pending, w.acked)
	}
}

func TestOnAckWithoutATokenSettlesTheOldestReport(t *testing.T) {
	w := newWorker(config{slots: 2}, nil, slog.New(slog.DiscardHandler))
	first, second := failReport("t1"), completeReport("t2")
	w.pending["j"] = []*report{first, second}
	w.onAck(nil, &evorav1.ServerAck{JobId: "j", Accepted: true, Result: evorav1.AckResult_ACK_RESULT_ACCEPTED})
	if rs := w.pending["j"]; len(rs) != 1 || rs[0] != second {
		t.Fatalf("after an ack without a token, pending = %v, want only the t2 report", rs)
	}
	w.onAck(nil, &evorav1.ServerAck{JobId: "j", Accepted: true, Result: evorav1.AckResult_ACK_RESULT_ACCEPTED})
	if _, ok := w.pending["j"]; ok {
		t.Fatalf("after a second ack without a token, pending = %v, want none", w.pending)
	}
}

func TestTheReconnectWaitNeverPassesTwoSeconds(t *testing.T) {
	b := firstReconnectWait
	for range 20 {
		b = nextReconnectBackoff(b)
		if w := reconnectWait(b); w > 2*time.Second+50*time.Millisecond || w < 50*time.Millisecond {
			t.Fatalf("wait %v with backoff %v: want 50 ms to 2.05 s", w, b)
		}
	}
	if b != 2*time.Second {
		t.Fatalf("backoff %v after 20 doublings, want the 2 s cap", b)
	}
}

func TestAReportOverTheServersMessageLimitIsFailedInsteadAndErrorsAreCut(t *testing.T) {
	big, err := structpb.NewStruct(map[string]any{"s": strings.Repeat("x", 100_000)})
	if err != nil {
		t.Fatal(err)
	}
	req := &evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Complete{Complete: &evorav1.WorkerComplete{JobId: "j", LeaseToken: "t", Result: big}}}
	if err := reportTooLarge(req, defaultMaxMessageBytes); err != nil {
		t.Errorf("a 100 kB result under the 4 MiB default: %v", err)
	}
	err = reportTooLarge(req, 65536)
	var je *jobError
	if !errors.As(err, &je) || je.retryable || !strings.HasPrefix(err.Error(), "complete refused: the report is ") || !strings.HasSuffix(err.Error(), " bytes; the server takes messages of at most 65536") {
		t.Errorf("a 100 kB result over a 64 KiB limit: got %v, want a permanent 'complete refused' error", err)
	}
	if got := cutError(strings.Repeat("é", 20_000)); got != strings.Repeat("é", maxErrorChars) {
		t.Errorf("cutError kept %d characters, want %d", len([]rune(got)), maxErrorChars)
	}
	if got := cutError("short"); got != "short" {
		t.Errorf("cutError(short) = %q", got)
	}
}

func TestAnInvalidReportIsReplacedOnceByANonRetryableFail(t *testing.T) {
	w, s, st := leaseTestWorker()
	r := completeReport("t1")
	r.tries = 1
	r.leaseEnd = time.Now().Add(time.Hour)
	w.pending["j"] = []*report{r}
	invalid := &evorav1.ServerAck{JobId: "j", LeaseToken: "t1", Result: evorav1.AckResult_ACK_RESULT_INVALID, Reason: "result contains a NUL"}

	// The server changed nothing and the lease runs on: a fail goes instead, under the same
	// lease, naming what was refused and why, so the job ends now rather than after its lease.
	w.onAck(s, invalid)
	if len(st.sent) != 1 || w.acked != 0 || len(w.pending["j"]) != 1 {
		t.Fatalf("after INVALID: sent %d, acked %d, pending %v; want one fail sent, the report unsettled", len(st.sent), w.acked, w.pending)
	}
	f := st.sent[0].GetFail()
	if f.GetJobId() != "j" || f.GetLeaseToken() != "t1" || !f.GetNonRetryable() || f.GetError() != "complete refused: result contains a NUL" {
		t.Fatalf("sent %v; want a non-retryable fail of j under t1 naming the refused complete", st.sent[0])
	}
	if r.tries != 1 {
		t.Fatalf("the fail's tries = %d, want 1 (counted afresh)", r.tries)
	}

	// The fail refused too: given up, not sent again.
	w.onAck(s, invalid)
	if len(st.sent) != 1 || w.acked != 1 || len(w.pending) != 0 {
		t.Fatalf("after a second INVALID: sent %d, acked %d, pending %v; want the report given up", len(st.sent), w.acked, w.pending)
	}
}
