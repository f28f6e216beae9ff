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


# What a token is made of, and all a header value can carry: printable ASCII without spaces.
TOKEN_TEXT = re.compile(r"[\x21-\x7e]+")


def resolve_token(flag_token: str | None, token_file: str, env_token: str) -> str:
    """The token to send, from the first given of: --token (flag_token, None when not given;
    "" sends none), the first line of token_file (--token-file or EVORA_TOKEN_FILE), env_token
    (EVORA_TOKEN); "" = none. The order and the file's reading (its first line, trimmed) are
    the CLI's and the TypeScript SDK's, so that one environment configures them all. An
    unreadable file, an empty first line, or a token that cannot be a header value is a
    ValueError of one line naming where it came from, never the token."""
    if flag_token is not None:
        source, token = "--token", flag_token
    elif token_file:
        source = f"--token-file {token_file}"
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--token-file (env EVORA_TOKEN_FILE): cannot read {token_file}: "
                             f"{e.strerror if isinstance(e, OSError) and e.strerror else e}") from e
        if not token:
            raise ValueError(f"--token-file (env EVORA_TOKEN_FILE): the first line of {token_file} is empty: "
                             "it must hold the token")
    else:
        source, token = "EVORA_TOKEN", env_token.strip()
    if token and not TOKEN_TEXT.fullmatch(token):
        raise ValueError(f"the token from {source} must be printable ASCII without spaces")
    return token


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
    ap.add_argument("--token", default=None,
                    help="API token (role worker), sent as authorization: Bearer <token>; prefer --token-file or "
                         "EVORA_TOKEN, which stay out of the process list; the first given wins: --token, --token-file, "
                         "EVORA_TOKEN_FILE, EVORA_TOKEN")
    ap.add_argument("--token-file", default=env("EVORA_TOKEN_FILE", ""),
                    help="API token from the first line of this file, e.g. a mounted secret (env EVORA_TOKEN_FILE)")
    args = ap.parse_args()
    try:
        args.token = resolve_token(args.token, args.token_file, env("EVORA_TOKEN", ""))
    except ValueError as e:
        ap.error(str(e))
    if args.slots < 1:
        ap.error("--slots must be at least 1")
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key must be given together")
    for flag, path in (("--tls-ca", args.tls_ca), ("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path and not os.access(path, os.R_OK):
            ap.error(f"{flag}: cannot read {path}")
    return args
