import { randomUUID } from 'node:crypto';
import { tokenSecretGenerate, tokenSecretHash, type ApiToken } from '../domain/auth.js';
import type { AuditActor } from '../domain/audit.js';
import { checkTokenCreate, tokenCreatedBy, tokenExpiresAt, type TokenCreateRequestInput } from '../domain/validate-admin.js';
import type { Store } from '../store/store.js';

/**
 * Makes an API token: checks the settings, makes the secret, and stores only its hash with
 * the audit event (one statement, Store.tokenCreate). Returns the token and its secret,
 * which exists nowhere else afterwards. The one way tokens are made, whether through
 * TokenService.CreateToken or `evora token create` with direct database access.
 */
export async function tokenIssue(
  store: Pick<Store, 'tokenCreate'>,
  input: TokenCreateRequestInput,
  actor: AuditActor,
): Promise<{ token: ApiToken; secret: string }> {
  const id = randomUUID();
  const checked = checkTokenCreate(id, input);
  const secret = tokenSecretGenerate();
  // One clock for created_at and expires_at, so a token lives exactly its expires_in.
  const now = new Date();
  const token = await store.tokenCreate({
    id,
    name: checked.name,
    role: checked.role,
    queues: checked.queues,
    expiresAt: tokenExpiresAt(now, checked.expiresInSeconds),
    secretHash: tokenSecretHash(secret),
    createdBy: tokenCreatedBy(actor),
    actor,
    now,
  });
  return { token, secret };
}
