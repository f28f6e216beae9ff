import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The PEM files of one CA and the certificates it signed, in a temp folder. */
export interface TlsCerts {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** The file's contents (for the SDK's tlsCa/tlsCert/tlsKey). */
  read(file: string): Buffer;
  /** Removes the folder. */
  remove(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * Generates with the `openssl` CLI a CA, a server certificate for 127.0.0.1 and localhost
 * (subjectAltName, which TLS clients check), and a client certificate, all signed by that CA.
 * `name` tells CAs apart (a second CA for the reload test).
 */
export function tlsCertsGenerate(name = 'evora-test'): TlsCerts {
  const dir = mkdtempSync(join(tmpdir(), `evora-tls-${name}-`));
  const key = (file: string) => openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], dir);
  key('ca.key');
  openssl(['req', '-x509', '-new', '-key', 'ca.key', '-subj', `/CN=${name} CA`, '-days', '2', '-out', 'ca.pem'], dir);
  const signed = (base: string, cn: string, ext: string) => {
    key(`${base}.key`);
    openssl(['req', '-new', '-key', `${base}.key`, '-subj', `/CN=${cn}`, '-out', `${base}.csr`], dir);
    writeFileSync(join(dir, `${base}.ext`), ext);
    openssl(['x509', '-req', '-in', `${base}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${base}.ext`, '-out', `${base}.pem`], dir);
  };
  signed('server', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  signed('client', `${name} client`, 'extendedKeyUsage=clientAuth\n');
  const at = (f: string) => join(dir, f);
  return {
    dir,
    caCert: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
    read: (file) => readFileSync(file),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
