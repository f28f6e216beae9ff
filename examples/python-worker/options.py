"""The worker's command line."""

from __future__ import annotations

import argparse
import os
import re
import socket


def duration(text: str) -> float:
    """Seconds from "5", "2.5s", "500ms" or "1m"."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m.group(2)]


def parse_args(description: str) -> argparse.Namespace:
    """The command line (each option may also come from an EVORA_* variable)."""
    env = os.environ.get
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--address", default=env("EVORA_ADDRESS", "127.0.0.1:50051"), help="server host:port (env EVORA_ADDRESS)")
    ap.add_argument("--queue", default=env("EVORA_QUEUE", "images"), help="queue to take jobs from (env EVORA_QUEUE)")
    ap.add_argument("--worker-id", default=env("EVORA_WORKER_ID", f"py-{socket.gethostname()}-{os.getpid()}"),
                    help="worker id recorded on jobs (env EVORA_WORKER_ID)")
    ap.add_argument("--slots", type=int, default=int(env("EVORA_SLOTS", "4")), help="jobs run at once (env EVORA_SLOTS)")
    ap.add_argument("--max-jobs", type=int, default=0,
                    help="drain and exit after this many reports (complete or fail) were acknowledged; 0 = never")
    ap.add_argument("--idle-exit", type=duration, default=0.0, help="drain and exit after this long with no job (e.g. 5s); 0 = never")
    ap.add_argument("--drain-timeout", type=duration, default=30.0, help="on drain, how long to wait for running jobs")
    ap.add_argument("--tls-ca", default=env("EVORA_TLS_CA", ""),
                    help="TLS: PEM file of the CA that signed the server's certificate; unset = plaintext (env EVORA_TLS_CA)")
    ap.add_argument("--tls-cert", default=env("EVORA_TLS_CLIENT_CERT", ""),
                    help="mTLS: PEM file of this worker's certificate; needs --tls-key (env EVORA_TLS_CLIENT_CERT)")
    ap.add_argument("--tls-key", default=env("EVORA_TLS_CLIENT_KEY", ""),
                    help="mTLS: PEM file of the certificate's private key (env EVORA_TLS_CLIENT_KEY)")
    ap.add_argument("--token", default=env("EVORA_TOKEN", ""),
                    help="API token (role worker), sent as authorization: Bearer <token>; prefer the env var, "
                         "which stays out of the process list (env EVORA_TOKEN)")
    args = ap.parse_args()
    if args.slots < 1:
        ap.error("--slots must be at least 1")
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key must be given together")
    for flag, path in (("--tls-ca", args.tls_ca), ("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path and not os.access(path, os.R_OK):
            ap.error(f"{flag}: cannot read {path}")
    return args
