import { hostIsLoopback, tokenSecretHash } from '../domain/auth.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/store.js';
import type { ServerConfig } from './config.js';

/**
 * The server's start-up side of auth (docs/security.md "When auth applies"): the bootstrap
 * admin token of EVORA_BOOTSTRAP_ADMIN_TOKEN, and the rule that a server without tokens
 * runs open only on loopback, or on another address with --insecure-no-auth.
 */

/**
 * Creates or keeps the bootstrap admin token. A revoked one stays revoked (a warning says
 * so); the secret is never logged.
 */
export async function bootstrapTokenEnsure(store: Pick<Store, 'tokenBootstrapEnsure'>, secret: string, logger: Logger): Promise<void> {
  const { token, created } = await store.tokenBootstrapEnsure({ secretHash: tokenSecretHash(secret) });
  if (token.revokedAt) {
    logger.warn({ token_id: token.id, token_name: token.name }, `the bootstrap admin token "${token.name}" is revoked: EVORA_BOOTSTRAP_ADMIN_TOKEN does not work (unset it, or set a new secret)`);
  } else {
    logger.info({ token_id: token.id, token_name: token.name }, created ? `bootstrap admin token "${token.name}" created` : `bootstrap admin token "${token.name}" kept`);
  }
}

/**
 * When auth applies: with no token (and no bootstrap secret) the server runs open, which
 * it says; on an address other than loopback only with --insecure-no-auth, else the start
 * is refused with one line.
 */
export function authStartCheck(authOn: boolean, config: ServerConfig, logger: Logger): void {
  if (authOn) {
    logger.info('auth on: every call needs an API token');
    return;
  }
  if (hostIsLoopback(config.host)) {
    logger.info({ host: config.host }, `auth off: no API token exists and the server listens on ${config.host} (loopback) only; creating a token (evora token create) turns auth on`);
  } else if (config.insecureNoAuth) {
    logger.warn({ host: config.host }, `auth off: the server listens on ${config.host} with no API tokens (--insecure-no-auth): anyone who can reach the port can do anything`);
  } else {
    throw new Error(
      `the server listens on ${config.host} with no API tokens: create one (evora token create, or EVORA_BOOTSTRAP_ADMIN_TOKEN) or pass --insecure-no-auth (EVORA_INSECURE_NO_AUTH=1)`,
    );
  }
}

