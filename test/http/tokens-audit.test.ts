import { beforeAll, describe, expect, it } from 'vitest';
import { tokenSecretGenerate } from '../../src/domain/auth.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { httpCall, httpSetup } from './http-setup.js';

/**
 * Tokens and the audit log over HTTP with auth on (a bootstrap admin token): create (201,
 * the secret once), list, revoke by name; the created token works on HTTP at once and
 * stops working when revoked; the admin actions are in the audit log, newest first.
 */

const ADMIN = tokenSecretGenerate();
let api: Awaited<ReturnType<typeof httpSetup>>['api'];
let base: string;
beforeAll(async () => {
  ({ api, base } = await httpSetup({ bootstrapAdminToken: ADMIN }, ADMIN));
});

describe('tokens and audit', () => {
  it('create, use, list, revoke; the audit log shows the changes', async () => {
    const name = `viewer-${queueName('t')}`;
    const created = await api('POST', '/v1/tokens', { body: { name, role: 'TOKEN_ROLE_VIEWER' } });
    expect(created.status).toBe(201);
    expect(created.body.token).toMatchObject({ name, role: 'TOKEN_ROLE_VIEWER' });
    const secret: string = created.body.secret;
    expect(secret).toBeTruthy();

    await waitFor(async () => (await httpCall(base, 'GET', '/v1/queues', { token: secret })).status === 200, { what: 'the new token to work' });
    const list = await api('GET', '/v1/tokens', { query: { include_revoked: 'true' } });
    expect(list.status).toBe(200);
    expect(list.body.tokens.map((t: { name: string }) => t.name)).toContain(name);

    const revoked = await api('POST', `/v1/tokens/${name}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.token.revokedAt).toBeTruthy();
    await waitFor(async () => (await httpCall(base, 'GET', '/v1/queues', { token: secret })).status === 401, { what: 'the revoked token to be refused' });

    const audit = await api('GET', '/v1/audit', { query: { page_size: '10' } });
    expect(audit.status).toBe(200);
    const events: { action: string; target: string; tokenName?: string }[] = audit.body.events;
    const mine = (e: { target: string }) => e.target === name || e.target === created.body.token.id;
    expect(events[0]).toMatchObject({ action: 'AUDIT_ACTION_TOKEN_REVOKE' });
    expect(mine(events[0]!)).toBe(true);
    expect(events.some((e) => e.action === 'AUDIT_ACTION_TOKEN_CREATE' && mine(e))).toBe(true);
  });
});
