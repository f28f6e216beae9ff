// Command go-worker is an Evora worker written against the generated gRPC stubs only.
//
// It opens a WorkerService.Work stream, says hello (worker id, queue, slots), runs the
// jobs the server pushes (type "resize", see resize.go) up to -slots at a time, sends a
// heartbeat for the leases it holds every heartbeat_interval_ms the server gave in its
// welcome, or faster for a job pushed with a shorter lease (a job's until its report is
// settled), reports each job with complete or fail,
// and waits for the server's ack.
// It acts on the protocol's codes, never on their text: the ack's result (reports.go),
// and the lease_lost, cancel and drain messages (handle, below).
// When the stream breaks it reconnects with backoff and finishes the jobs it holds with
// their lease tokens; a stream refused UNAUTHENTICATED or PERMISSION_DENIED (a missing,
// bad or revoked -token) exits with code 3 instead. SIGTERM or SIGINT drains: no new jobs, finish the running ones,
// then exit 0 (a second signal exits at once).
//
// The files: main.go the session and its event loop, connect.go opening a session and the
// waits between sessions, jobs.go running jobs and turning
// their outcomes into reports, reports.go the acks, leases.go the leases held (heartbeats,
// lease_lost), config.go the flags, resize.go the job.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	evorav1 "github.com/evora/evora/examples/go-worker/gen/evora/v1"
)

func main() {
	cfg := parseFlags()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("worker_id", cfg.workerID)
	creds, err := cfg.transportCredentials()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-worker: %v\n", err)
		os.Exit(2)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Pings find a server that went silent without resetting the connection (its host
		// gone, a network cut, a frozen process): without them the stream waits for good,
		// holding the jobs and their unanswered reports. An unanswered ping ends the stream,
		// and the worker reconnects. The server permits pings, also without calls.
		// The channel's own reconnect backoff, short (as the TypeScript SDK's: 0.2 s doubling
		// to 2 s). grpc-go's default grows to 2 minutes, and while it waits every call fails at
		// once: a server back after an outage of a minute would go unseen for tens of seconds,
		// whatever the worker's own backoff, and the leases it held could expire meanwhile.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 20 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}),
		// Any size of pushed job: a payload that passed the server's limit as JSON text takes
		// up to several times that as a Struct (docs/api.md, "Size limits on the Work
		// stream"), past grpc-go's default of 4 MiB, which would end the stream on every push.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	}
	if cfg.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(cfg.token)))
	}
	conn, err := grpc.NewClient(cfg.address, opts...)
	if err != nil {
		log.Error("cannot create client", "err", err)
		os.Exit(1)
	}
	defer conn.Close()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	w := newWorker(cfg, evorav1.NewWorkerServiceClient(conn), log)
	os.Exit(w.run(sigs))
}

// The keepalive pings: one after keepaliveTime without data from the server, which must be
// answered within keepaliveTimeout (as the TypeScript SDK's).
const (
	keepaliveTime    = 15 * time.Second
	keepaliveTimeout = 10 * time.Second
)

// report is a complete or fail message waiting for its ack.
type report struct {
	req   *evorav1.WorkRequest
	tries int // times sent
	// leaseEnd and leaseLen: as the task's (it is heartbeated until the report is settled):
	// by this worker's clock, a time before which the lease surely still lasts.
	leaseEnd time.Time
	leaseLen time.Duration
	resendAt time.Time // set after ACK_RESULT_RETRY_LATER: when to send it again
	// Resends after RETRY_LATER with database_unavailable: they pace the backoff and are
	// not counted toward maxSends.
	outageResends int
	// The fail sent in place of a report the server refused as invalid (failInstead): a
	// second refusal gives the job up.
	insteadOfRefused bool
}

// session is one Work stream.
type session struct {
	stream   evorav1.WorkerService_WorkClient
	cancel   context.CancelFunc
	msgs     chan *evorav1.WorkResponse // closed when the stream ends
	err      error                      // why it ended (read after msgs is closed)
	fenced   bool                       // the fencing heartbeat was answered: no more jobs will come
	fenceSet bool                       // we sent drain + a fencing heartbeat on this stream
	drain    *evorav1.ServerDrain       // the server's drain, once it asked for one
	// Heartbeats sent and heartbeat acks received on this stream, and the count of
	// heartbeats sent up to the fencing one: acks carry no id, so the fence holds once
	// that many have been answered (an earlier heartbeat's ack may come after the drain,
	// and jobs after it).
	beatsSent, beatsAcked, fenceBeats int
	// When each heartbeat not yet answered was sent, oldest first (the server answers them in
	// order): a lease its ack extends surely lasts from then for the lease's length.
	beatsSentAt []time.Time
	// The largest message the server receives (ServerWelcome.max_message_bytes, or gRPC's
	// default from a server that does not say): no report may be larger (reportTooLarge).
	maxMessage int
	// How often to heartbeat: the welcome's interval, or a third of the shortest lease pushed
	// on this stream if that is shorter (beatFor); beatChanged: serve must reset its ticker.
	beatEvery   time.Duration
	beatChanged bool
}

var (
	// errCancelled is permanent: a cancelled job is failed as non-retryable (it becomes
	// CANCELLED whatever the report says, and non_retryable keeps it so).
	errCancelled = permanent("cancelled by an operator")
	errLeaseLost = errors.New("lease lost")
	errShutdown  = errors.New("worker shutting down")
)

type worker struct {
	cfg     config
	client  evorav1.WorkerServiceClient
	log     *slog.Logger
	running map[string]*task // by job id
	// Reports sent (or to send) and not yet acknowledged, by job id, oldest first: a job
	// leased again (after a fail) may have the report of its earlier lease still
	// unacknowledged. An ack names the job and the report's lease token (ackedReport); one
	// without a token, from an older server, answers the oldest.
	pending map[string][]*report
	done    chan outcome
	acked   int // reports acknowledged
	stop    bool
	stopAt  time.Time
	idle    time.Time // since when nothing was running or waiting
}

func newWorker(cfg config, client evorav1.WorkerServiceClient, log *slog.Logger) *worker {
	return &worker{
		cfg: cfg, client: client, log: log,
		running: map[string]*task{}, pending: map[string][]*report{},
		done: make(chan outcome, cfg.slots), idle: time.Now(),
	}
}

// run is the worker's single event loop: it owns all state, and it alone sends on the
// stream. It returns the exit code.
func (w *worker) run(sigs <-chan os.Signal) int {
	backoff := firstReconnectWait
	for {
		s, hbEvery, err, code, exit := w.connectWatching(sigs)
		if exit {
			return code
		}
		if err != nil {
			if refused(err) {
				w.log.Error("the server refused the worker; check -token (EVORA_TOKEN)", "code", status.Code(err).String(), "err", status.Convert(err).Message())
				return 3
			}
			if w.stop && time.Now().After(w.stopAt.Add(w.cfg.drainTimeout)) {
				w.log.Error("giving up: cannot reach the server while draining", "err", err, "held", len(w.running)+len(w.pending))
				return 1
			}
			// Full jitter, capped at 10 s.
			wait := reconnectWait(backoff)
			w.log.Warn("cannot open a Work session; retrying", "err", err, "in", wait.Round(time.Millisecond))
			if code, exit := w.sleep(wait, sigs); exit {
				return code
			}
			backoff = nextReconnectBackoff(backoff)
			continue
		}
		opened := time.Now()
		code, exit = w.serve(s, hbEvery, sigs)
		s.cancel()
		if exit {
			return code
		}
		// Wait before opening the next session too: a server that ends every session at once
		// (one that cannot read a report resent on each session, a proxy cutting streams)
		// would otherwise be reconnected to in a tight loop. The backoff starts again only
		// after a session that lasted.
		if time.Since(opened) >= stableSession {
			backoff = firstReconnectWait
		}
		wait := reconnectWait(backoff)
		w.log.Info("reconnecting", "in", wait.Round(time.Millisecond))
		if code, exit := w.sleep(wait, sigs); exit {
			return code
		}
		backoff = nextReconnectBackoff(backoff)
	}
}

// serve handles one session until it ends. exit says whether the worker is done.
func (w *worker) serve(s *session, hbEvery time.Duration, sigs <-chan os.Signal) (code int, exit bool) {
	s.beatEvery = hbEvery
	hb := time.NewTicker(hbEvery)
	defer hb.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	if w.stop {
		w.fence(s)
	}
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				if w.stop && w.finished() {
					return 0, true
				}
				if s.drain != nil {
					w.log.Info("server drained the stream; reconnecting", "code", s.drain.GetCode(), "held", len(w.running)+len(w.pending))
				} else if errors.Is(s.err, io.EOF) {
					w.log.Warn("server closed the stream; reconnecting", "held", len(w.running)+len(w.pending))
				} else if refused(s.err) {
					// A revoked or expired token: reconnecting would only be refused again.
					w.log.Error("the server refused the worker; exiting", "code", status.Code(s.err).String(), "err", status.Convert(s.err).Message(),
						"abandoned", len(w.running)+len(w.pending))
					return 3, true
				} else {
					w.log.Warn("stream broke; reconnecting", "err", s.err, "held", len(w.running)+len(w.pending))
				}
				return 0, false
			}
			w.handle(s, m)
			if s.beatChanged { // a job came with a shorter lease than the schedule assumed
				s.beatChanged = false
				hb.Reset(s.beatEvery)
			}
		case o := <-w.done:
			w.finish(s, o)
		case <-hb.C:
			w.heartbeat(s)
		case sig := <-sigs:
			if w.stop {
				w.log.Warn("second signal: exiting now", "signal", sig, "abandoned", len(w.running)+len(w.pending))
				return 1, true
			}
			w.log.Info("draining", "signal", sig, "running", len(w.running))
			w.beginStop(s)
		case <-tick.C:
		}
		w.resendDue(s)

		if !w.stop && w.cfg.idleExit > 0 && len(w.running) == 0 && len(w.pending) == 0 && time.Since(w.idle) >= w.cfg.idleExit {
			w.log.Info("idle; draining", "idle_for", w.cfg.idleExit)
			w.beginStop(s)
		}
		if w.stop {
			if s.fenced && w.finished() {
				// Nothing held and nothing more will be pushed: close our side and let the
				// server end the stream.
				_ = s.stream.CloseSend()
				w.waitEnd(s)
				w.log.Info("drained; exiting", "reports_acked", w.acked)
				return 0, true
			}
			if time.Now().After(w.stopAt.Add(w.cfg.drainTimeout)) {
				for _, t := range w.running {
					t.cancel(errShutdown)
				}
				w.log.Error("drain timed out; exiting with jobs held (their leases will expire and they will be retried)",
					"running", len(w.running), "unacked", len(w.pending))
				return 1, true
			}
		}
	}
}

func (w *worker) finished() bool { return len(w.running) == 0 && len(w.pending) == 0 }

// beginStop asks the server for no new jobs; the worker exits once it holds nothing.
func (w *worker) beginStop(s *session) {
	w.stop = true
	w.stopAt = time.Now()
	w.fence(s)
}

// fence sends drain, then a heartbeat: the server handles a stream's messages in order, so
// once the heartbeat is acknowledged every job pushed before the drain has arrived.
func (w *worker) fence(s *session) {
	if s.fenceSet {
		return
	}
	s.fenceSet = true
	_ = s.stream.Send(&evorav1.WorkRequest{Msg: &evorav1.WorkRequest_Drain{Drain: &evorav1.WorkerDrain{}}})
	w.heartbeat(s)
	s.fenceBeats = s.beatsSent
}

func (w *worker) waitEnd(s *session) {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-s.msgs:
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

func (w *worker) handle(s *session, m *evorav1.WorkResponse) {
	switch msg := m.GetMsg().(type) {
	case *evorav1.WorkResponse_Job:
		w.start(s, msg.Job)
	case *evorav1.WorkResponse_Jobs:
		for _, lj := range msg.Jobs.GetJobs() {
			w.start(s, lj)
		}
	case *evorav1.WorkResponse_Ack:
		w.onAck(s, msg.Ack)
	case *evorav1.WorkResponse_Acks:
		for _, a := range msg.Acks.GetAcks() {
			w.onAck(s, a)
		}
	case *evorav1.WorkResponse_Cancel:
		// Every code (CANCEL_REASON_OPERATOR, CANCEL_REASON_TIMEOUT, or none from an old
		// server) means the same: stop the job and report it; it fails as non-retryable and
		// becomes CANCELLED (after TIMEOUT the server already failed it: the report is
		// answered LEASE_LOST).
		if t, ok := w.running[msg.Cancel.GetJobId()]; ok {
			w.log.Info("job cancelled; stopping it", "job_id", t.id, "code", msg.Cancel.GetCode())
			t.cancel(errCancelled)
		}
	case *evorav1.WorkResponse_LeaseLost:
		w.onLeaseLost(s, msg.LeaseLost)
	case *evorav1.WorkResponse_HeartbeatAck:
		w.onHeartbeatAck(s, msg.HeartbeatAck)
	case *evorav1.WorkResponse_Drain:
		// Every code (DRAIN_REASON_SERVER_SHUTDOWN, or none from an old server) means: no new
		// jobs on this stream; finish and report the jobs held, and reconnect (to this server
		// once it is back, or another one) when the server ends the stream.
		s.drain = msg.Drain
		w.log.Info("server asked to drain; finishing the jobs held", "code", msg.Drain.GetCode(), "running", len(w.running))
	}
}

func (w *worker) markIdle() {
	if w.finished() {
		w.idle = time.Now()
	}
}
