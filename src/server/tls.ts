import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../logger.js';

/**
 * TLS for the gRPC and HTTP ports (docs/tls.md): the server's certificate and
 * key, and optionally a CA whose signature client certificates must carry (mTLS). The files
 * are read again every `reloadIntervalMs`; a changed set that is valid replaces the old one
 * for new connections (grpc-js calls `setSecureContext` on its HTTP/2 server), without a
 * restart. A changed set that is not valid (a half-written file, a key that does not match)
 * is logged once and the old certificate stays in use.
 */

/** The files that make up the server's TLS setup. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** When set, clients must present a certificate signed by this CA (mTLS). */
  clientCaFile: string | null;
}

/** One read of the files: the secure-context options and a digest to tell changes by. */
interface TlsLoad {
  options: SecureContextOptions;
  digest: string;
}

/** Reads and checks the files; throws one readable line naming the file that is wrong. */
function tlsLoad(files: TlsFiles): TlsLoad {
  const read = (what: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`TLS: cannot read the ${what} ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
    }
  };
  const cert = read('certificate', files.certFile);
  const key = read('key', files.keyFile);
  const ca = files.clientCaFile ? read('client CA', files.clientCaFile) : undefined;
  const parse = (what: string, path: string, pem: Buffer) => {
    try {
      return new X509Certificate(pem);
    } catch (err) {
      throw new Error(`TLS: the ${what} ${path} is not a PEM certificate`, { cause: err });
    }
  };
  parse('certificate', files.certFile, cert);
  if (ca && files.clientCaFile) parse('client CA', files.clientCaFile, ca);
  const options: SecureContextOptions = { cert, key, ...(ca ? { ca } : {}) };
  try {
    // What setSecureContext will do: fails on a bad key, or a key that is not the certificate's.
    createSecureContext(options);
  } catch (err) {
    const reason = (err as Error).message.replace(/\s*\n[\s\S]*$/, '');
    throw new Error(`TLS: the key ${files.keyFile} does not fit the certificate ${files.certFile} (${reason})`, { cause: err });
  }
  const digest = createHash('sha256').update(cert).update('\0').update(key).update('\0').update(ca ?? '').digest('hex');
  return { options, digest };
}

/**
 * Server credentials whose certificate follows the files. Construct it before binding: a
 * missing, unreadable or invalid file throws there (startup fails with that one line).
 * `stop()` ends the polling (the server's shutdown calls it).
 */
export class ReloadingServerCredentials extends grpc.ServerCredentials {
  private current: TlsLoad;
  private lastRejection: string | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly reloadListeners = new Set<(options: SecureContextOptions) => void>();

  constructor(
    private readonly files: TlsFiles,
    private readonly logger: Logger,
    reloadIntervalMs: number,
  ) {
    const first = tlsLoad(files);
    // requestCert + rejectUnauthorized: the TLS handshake itself refuses a client without a
    // certificate signed by the client CA, before any gRPC call.
    super({ requestCert: files.clientCaFile !== null, rejectUnauthorized: files.clientCaFile !== null }, first.options);
    this.current = first;
    this.timer = setInterval(() => this.reload(), reloadIntervalMs);
    this.timer.unref();
  }

  /** Reads the files again; a valid change goes to new connections, an invalid one is logged. */
  reload(): void {
    let next: TlsLoad;
    try {
      next = tlsLoad(this.files);
    } catch (err) {
      // Only once per bad state; the old certificate stays in use.
      const message = (err as Error).message;
      if (this.lastRejection !== message) this.logger.warn({ err }, `${message}; keeping the certificate in use`);
      this.lastRejection = message;
      return;
    }
    this.lastRejection = null;
    if (next.digest === this.current.digest) return;
    this.current = next;
    this.updateSecureContextOptions(next.options);
    for (const listener of this.reloadListeners) listener(next.options);
    this.logger.info({ cert: this.files.certFile }, 'TLS certificate reloaded');
  }

  /**
   * The files' current secure-context options and whether client certificates are
   * required: what the HTTP port (src/http) serves with, so both ports present the same
   * certificate and accept the same clients.
   */
  httpsOptions(): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
    const mtls = this.files.clientCaFile !== null;
    return { ...this.current.options, requestCert: mtls, rejectUnauthorized: mtls };
  }

  /** Tells `listener` each valid change of the files (the HTTP port's setSecureContext); returns the unsubscribe. */
  onReload(listener: (options: SecureContextOptions) => void): () => void {
    this.reloadListeners.add(listener);
    return () => this.reloadListeners.delete(listener);
  }

  /** Stops watching the files. */
  stop(): void {
    clearInterval(this.timer);
  }

  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}
