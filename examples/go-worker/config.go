package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// config is the worker's command line (each flag may also come from an EVORA_* variable).
type config struct {
	address      string
	queue        string
	workerID     string
	slots        int
	maxJobs      int
	idleExit     time.Duration
	drainTimeout time.Duration
	tlsCA        string // PEM file of the CA that signed the server's certificate; "" = plaintext
	tlsCert      string // PEM file of this worker's certificate, for a server that requires one (mTLS)
	tlsKey       string // PEM file of tlsCert's private key
	token        string // API token, sent as `authorization: Bearer <token>`; "" = none
	tokenFile    string // file whose first line is the token (-token-file, EVORA_TOKEN_FILE)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func parseFlags() config {
	host, _ := os.Hostname()
	var c config
	flag.StringVar(&c.address, "address", env("EVORA_ADDRESS", "127.0.0.1:50051"), "Evora server host:port (env EVORA_ADDRESS)")
	flag.StringVar(&c.queue, "queue", env("EVORA_QUEUE", "images"), "queue to take jobs from (env EVORA_QUEUE)")
	flag.StringVar(&c.workerID, "worker-id", env("EVORA_WORKER_ID", fmt.Sprintf("go-%s-%d", host, os.Getpid())), "worker id recorded on jobs (env EVORA_WORKER_ID)")
	flag.IntVar(&c.slots, "slots", envInt("EVORA_SLOTS", 4), "jobs run at once (env EVORA_SLOTS)")
	flag.IntVar(&c.maxJobs, "max-jobs", 0, "drain and exit after this many reports (complete or fail) were acknowledged; 0 = never")
	flag.DurationVar(&c.idleExit, "idle-exit", 0, "drain and exit after this long with no job; 0 = never")
	flag.DurationVar(&c.drainTimeout, "drain-timeout", 30*time.Second, "on drain, how long to wait for running jobs before exiting anyway")
	flag.StringVar(&c.tlsCA, "tls-ca", env("EVORA_TLS_CA", ""), "TLS: PEM file of the CA that signed the server's certificate; unset = plaintext (env EVORA_TLS_CA)")
	flag.StringVar(&c.tlsCert, "tls-cert", env("EVORA_TLS_CLIENT_CERT", ""), "mTLS: PEM file of this worker's certificate; needs -tls-key (env EVORA_TLS_CLIENT_CERT)")
	flag.StringVar(&c.tlsKey, "tls-key", env("EVORA_TLS_CLIENT_KEY", ""), "mTLS: PEM file of the certificate's private key (env EVORA_TLS_CLIENT_KEY)")
	flag.StringVar(&c.token, "token", "", "API token (role worker), sent as authorization: Bearer <token>; prefer -token-file or EVORA_TOKEN, which stay out of the process list; the first given wins: -token, -token-file, EVORA_TOKEN_FILE, EVORA_TOKEN")
	flag.StringVar(&c.tokenFile, "token-file", env("EVORA_TOKEN_FILE", ""), "API token from the first line of this file, e.g. a mounted secret (env EVORA_TOKEN_FILE)")
	flag.Parse()
	tokenGiven := false
	flag.Visit(func(f *flag.Flag) { tokenGiven = tokenGiven || f.Name == "token" })
	token, err := resolveToken(c.token, tokenGiven, c.tokenFile, os.Getenv("EVORA_TOKEN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-worker:", err)
		os.Exit(2)
	}
	c.token = token
	if (c.tlsCert == "") != (c.tlsKey == "") {
		fmt.Fprintln(os.Stderr, "go-worker: -tls-cert and -tls-key must be given together")
		os.Exit(2)
	}
	if c.slots < 1 {
		fmt.Fprintln(os.Stderr, "go-worker: -slots must be at least 1")
		os.Exit(2)
	}
	return c
}

// tokenText is what a token is made of, and all a header value can carry: printable ASCII
// without spaces.
var tokenText = regexp.MustCompile(`^[\x21-\x7e]+$`)

// resolveToken is the token to send, from the first given of: -token (flagToken, when
// flagGiven; "" sends none), the first line of tokenFile (-token-file or EVORA_TOKEN_FILE),
// envToken (EVORA_TOKEN); "" = none. The order and the file's reading (its first line,
// trimmed) are the CLI's and the TypeScript SDK's, so that one environment configures them
// all. An unreadable file, an empty first line, or a token that cannot be a header value is
// an error of one line naming where it came from, never the token.
func resolveToken(flagToken string, flagGiven bool, tokenFile, envToken string) (string, error) {
	source, token := "-token", flagToken
	switch {
	case flagGiven:
	case tokenFile != "":
		source = "-token-file " + tokenFile
		text, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("-token-file (env EVORA_TOKEN_FILE): cannot read %s: %w", tokenFile, errors.Unwrap(err))
		}
		token, _, _ = strings.Cut(string(text), "\n")
		if token = strings.TrimSpace(token); token == "" {
			return "", fmt.Errorf("-token-file (env EVORA_TOKEN_FILE): the first line of %s is empty: it must hold the token", tokenFile)
		}
	default:
		source, token = "EVORA_TOKEN", strings.TrimSpace(envToken)
	}
	if token != "" && !tokenText.MatchString(token) {
		return "", fmt.Errorf("the token from %s must be printable ASCII without spaces", source)
	}
	return token, nil
}

// transportCredentials is plaintext unless a CA or a client certificate is given; then TLS
// trusting that CA (or the system's roots), presenting the client certificate if given.
func (c config) transportCredentials() (credentials.TransportCredentials, error) {
	if c.tlsCA == "" && c.tlsCert == "" {
		return insecure.NewCredentials(), nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no PEM certificate in %s", c.tlsCA)
		}
		tc.RootCAs = pool
	}
	if c.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(tc), nil
}

// bearerToken sends the API token on every call (each unary call and the Work stream) as
// `authorization: Bearer <token>`. It allows plaintext (RequireTransportSecurity false) so
// that a worker on the server's own host can run without TLS; anywhere else give -tls-ca,
// or the token crosses the network in the clear.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }
