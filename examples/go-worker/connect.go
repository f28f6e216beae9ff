package main

// Opening a session: the hello with the leases held, the welcome, the reports resent, and the
// waits between sessions (main.go's run loop calls these).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

// The wait before each new Work call: full jitter (random up to the backoff, plus 50 ms), the
// backoff doubling from firstReconnectWait up to maxReconnectWait. The cap stays short (the
// TypeScript SDK's): after a database outage the leader's sweeper waits one lease length
// before it requeues expired leases, and a worker that comes back within it keeps its jobs;
// a 10 s cap lost them on queues with short leases, and those jobs ran a second time.
const (
	firstReconnectWait = 250 * time.Millisecond
	maxReconnectWait   = 2 * time.Second
)

// reconnectWait is how long to wait before the next Work call, given the current backoff.
func reconnectWait(backoff time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(backoff))) + 50*time.Millisecond
}

// nextReconnectBackoff doubles the backoff up to maxReconnectWait.
func nextReconnectBackoff(backoff time.Duration) time.Duration {
	return min(backoff*2, maxReconnectWait)
}

// stableSession is how long a session must last for the reconnect backoff to start again
// from its shortest wait; a session that ends sooner counts as a failed attempt.
const stableSession = 10 * time.Second

// refused says whether err is the server refusing this worker's token (UNAUTHENTICATED:
// none, or not a valid one; PERMISSION_DENIED: not a worker token, or not for this queue).
// Retrying cannot help: the worker exits (code 3) instead.
func refused(err error) bool {
	c := status.Code(err)
	return c == codes.Unauthenticated || c == codes.PermissionDenied
}

// connectWatching runs connect while it watches for signals: a hello left unanswered (a
// frozen server keeps the connection open and says nothing) must not hold up a SIGTERM. A
// signal with nothing held exits at once (code 0); with jobs held it starts the drain, as
// sleep does (the session opened next is fenced); a second one exits 1. exit says whether
// the worker is done.
func (w *worker) connectWatching(sigs <-chan os.Signal) (s *session, hbEvery time.Duration, err error, code int, exit bool) {
	ctx, cancel := context.WithCancel(context.Background())
	type opened struct {
		s       *session
		hbEvery time.Duration
		err     error
	}
	ch := make(chan opened, 1)
	go func() {
		s, hbEvery, err := w.connect(ctx)
		ch <- opened{s, hbEvery, err}
	}()
	for {
		select {
		case o := <-ch:
			if o.err != nil {
				cancel()
				return nil, 0, o.err, 0, false
			}
			end := o.s.cancel
			o.s.cancel = func() { end(); cancel() }
			return o.s, o.hbEvery, nil, 0, false
		case sig := <-sigs:
			if w.finished() {
				w.log.Info("exiting", "signal", sig)
				cancel()
				return nil, 0, nil, 0, true
			}
			if w.stop {
				w.log.Warn("second signal: exiting now", "signal", sig, "abandoned", len(w.running)+len(w.pending))
				cancel()
				return nil, 0, nil, 1, true
			}
			w.log.Info("draining", "signal", sig, "running", len(w.running))
			w.stop = true
			w.stopAt = time.Now()
		}
	}
}

// connect opens a Work stream, says hello with the leases still held from an earlier
// stream, waits for the welcome, and resends the unacknowledged reports. It runs beside the
// event loop (connectWatching), which meanwhile only reads the worker's state; cancelling
// parent abandons it.
func (w *worker) connect(parent context.Context) (*session, time.Duration, error) {
	ctx, cancel := context.WithCancel(parent)
	stream, err := w.client.Work(ctx)
	if err != nil {
		cancel()
		return nil, 0, err
	}
	hello := &evorav1.WorkerHello{WorkerId: w.cfg.workerID, Queues: []string{w.cfg.queue}, Slots: int32(w.cfg.slots)}
	hello.Held = w.heldLeases()
	// Job-type routing: the server sends only jobs of the types this worker runs.
	hello.JobTypes = []string{JobType}
	// Batches: the server may push the jobs of one claim as one `jobs` message and answer
	// reports committed together with one `acks` message (handle takes both), instead of a
	// message per job: fewer messages to encode and decode on both sides.
	hello.AcceptsBatches = proto.Bool(true)
	if err := stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		return nil, 0, err
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, 0, err
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		cancel()
		return nil, 0, fmt.Errorf("expected welcome, got %T", first.GetMsg())
	}
	hbEvery := time.Duration(welcome.GetHeartbeatIntervalMs()) * time.Millisecond
	if hbEvery <= 0 { // a server that predates heartbeat_interval_ms
		hbEvery = time.Duration(max(1, welcome.GetHeartbeatIntervalSeconds())) * time.Second
	}
	w.log.Info("session opened", "session_id", welcome.GetSessionId(), "queue", w.cfg.queue, "slots", w.cfg.slots,
		"lease_seconds", welcome.GetLeaseSeconds(), "heartbeat_every", hbEvery, "held", len(hello.Held))

	s := &session{stream: stream, cancel: cancel, msgs: make(chan *evorav1.WorkResponse, 16), maxMessage: defaultMaxMessageBytes}
	if m := welcome.GetMaxMessageBytes(); m > 0 {
		s.maxMessage = int(m)
	}
	go func() {
		defer close(s.msgs)
		for {
			m, err := stream.Recv()
			if err != nil {
				s.err = err
				return
			}
			select {
			case s.msgs <- m:
			case <-ctx.Done():
				s.err = ctx.Err()
				return
			}
		}
	}()
	w.onNewSession(s)
	return s, hbEvery, nil
}

// onNewSession heartbeats the leases carried over from the old stream at once, then sends
// again the reports left without an answer. hello.held keeps those leases but does not renew
// them: each still ends a lease length after its last renewal on the old stream, which may
// come before the first tick of the heartbeat ticker; and the heartbeat's answer tells of a
// cancel made while the worker was away, which nothing else repeats.
func (w *worker) onNewSession(s *session) {
	w.heartbeat(s)
	w.resendOnNewSession(s)
}

// sleep waits between reconnects; a signal while nothing is held exits at once.
func (w *worker) sleep(d time.Duration, sigs <-chan os.Signal) (int, bool) {
	select {
	case <-time.After(d):
		return 0, false
	case sig := <-sigs:
		if w.finished() {
			w.log.Info("exiting", "signal", sig)
			return 0, true
		}
		if w.stop {
			return 1, true
		}
		w.stop = true
		w.stopAt = time.Now()
		return 0, false
	}
}
