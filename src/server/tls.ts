import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../logger.js';

/**
 * TLS for the gRPC and HTTP ports (docs/tls.md): the server's certificate and
 * key, and optionally a CA whose signature client certificates must carry (mTLS). The files
 * are read again every `reloadIntervalMs`; a changed set that is valid replaces the old one
 * for new connections (grpc-js calls `setSecureContext` on its HTTP/2 server), without a
 * restart. A changed set that is not valid (a half-written file, a key that does not match,
 * a certificate expired or not yet valid) is logged once and the old certificate stays in
 * use; at startup such a set fails the start with the same line.
 */

/** The files that make up the server's TLS setup. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** When set, clients must present a certificate signed by this CA (mTLS). */
  clientCaFile: string | null;
}

/** One read of the files: the secure-context options and a digest to tell changes by. */
export interface TlsLoad {
  options: SecureContextOptions;
  digest: string;
  /** When the server's certificate expires. */
  validTo: Date;
}

/** How close to its expiry a certificate makes the server warn (at start and at each reload). */
export const TLS_EXPIRY_WARN_MS = 7 * 24 * 3600 * 1000;

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * The certificates of a PEM file, the first being the one that matters (the server's, or
 * the CA's); throws one line when the file holds none, or a block that is cut short (a
 * file still being written) or does not parse.
 */
function pemCertificates(what: string, path: string, pem: Buffer): X509Certificate[] {
  const text = pem.toString('utf8');
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  const begun = text.split('-----BEGIN CERTIFICATE-----').length - 1;
  if (begun === 0) throw new Error(`TLS: the ${what} ${path} is not a PEM certificate`);
  if (begun !== blocks.length) throw new Error(`TLS: the ${what} ${path} is not a complete PEM certificate${blocks.length > 0 ? ' chain' : ''}`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new Error(`TLS: the ${what} ${path} is not a PEM certificate${i > 0 ? ` (its certificate ${i + 1} does not parse)` : ''}`, { cause: err });
    }
  });
}

/**
 * Reads and checks the files as of `now`; throws one readable line naming the file that is
 * wrong: unreadable, not a whole PEM certificate (chain) or key, a key of another
 * certificate, or a certificate outside its validity (every client would refuse it).
 */
export function tlsLoad(files: TlsFiles, now: Date = new Date()): TlsLoad {
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
  const leaf = pemCertificates('certificate', files.certFile, cert)[0]!;
  if (ca && files.clientCaFile) pemCertificates('client CA', files.clientCaFile, ca);
  const [validFrom, validTo] = [new Date(leaf.validFrom), new Date(leaf.validTo)];
  if (now.getTime() > validTo.getTime()) throw new Error(`TLS: the certificate ${files.certFile} expired at ${validTo.toISOString()}`);
  if (now.getTime() < validFrom.getTime()) throw new Error(`TLS: the certificate ${files.certFile} is not valid before ${validFrom.toISOString()}`);
  try {
    createPrivateKey(key);
  } catch (err) {
    throw new Error(`TLS: the key ${files.keyFile} is not a PEM private key`, { cause: err });
  }
  const options: SecureContextOptions = { cert, key, ...(ca ? { ca } : {}) };
  try {
    // What setSecureContext will do: fails on a key that is not the certificate's.
    createSecureContext(options);
  } catch (err) {
    const reason = (err as Error).message.replace(/\s*\n[\s\S]*$/, '');
    throw new Error(`TLS: the key ${files.keyFile} does not fit the certificate ${files.certFile} (${reason})`, { cause: err });
  }
  const digest = createHash('sha256').update(cert).update('\0').update(key).update('\0').update(ca ?? '').digest('hex');
  return { options, digest, validTo };
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
    this.expiryWarn(first);
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
    this.expiryWarn(next);
  }

  /** Warns when the certificate just loaded expires within TLS_EXPIRY_WARN_MS. */
  private expiryWarn(load: TlsLoad): void {
    if (load.validTo.getTime() - Date.now() < TLS_EXPIRY_WARN_MS) {
      this.logger.warn({ cert: this.files.certFile, valid_to: load.validTo.toISOString() }, `TLS: the certificate ${this.files.certFile} expires at ${load.validTo.toISOString()}; replace it`);
    }
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
