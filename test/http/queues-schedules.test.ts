import { beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';
import { httpSetup } from './http-setup.js';

/**
 * Queues (upsert 201 then 200, get, list, pause, resume, stats of one and of all, delete) and
 * schedules (upsert with the name from the path, get, list, pause, resume, trigger,
 * delete) over HTTP.
 */

let api: Awaited<ReturnType<typeof httpSetup>>['api'];
beforeAll(async () => {
  ({ api } = await httpSetup());
});

describe('queues', () => {
  it('upsert, get, list, pause, resume, stats', async () => {
    const name = queueName('hq');
    const created = await api('PUT', `/v1/queues/${name}`, { body: { maxAttempts: 7, backoff: { kind: 'BACKOFF_KIND_FIXED', base: '2s' }, leaseSeconds: 45 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ created: true, queue: { name, maxAttempts: 7, leaseSeconds: 45 } });
    const changed = await api('PUT', `/v1/queues/${name}`, { body: { maxAttempts: 8 } });
    expect(changed.status).toBe(200);
    expect(changed.body.queue.maxAttempts).toBe(8);
    const differs = await api('PUT', `/v1/queues/${name}`, { body: { name: 'other' } });
    expect(differs.status).toBe(400);

    expect((await api('GET', `/v1/queues/${name}`)).body.queue.name).toBe(name);
    const list = await api('GET', '/v1/queues');
    expect(list.body.queues.map((q: { name: string }) => q.name)).toContain(name);
    expect((await api('POST', `/v1/queues/${name}/pause`)).body.queue.paused).toBe(true);
    expect((await api('POST', `/v1/queues/${name}/resume`)).body.queue.paused).toBeUndefined();

    await api('POST', '/v1/jobs', { body: { queue: name, type: 't' } });
    const stats = await waitFor(async () => {
      const res = await api('GET', `/v1/queues/${name}/stats`);
      expect(res.status).toBe(200);
      return res.body.stats.pending === '1' ? res.body.stats : null;
    }, { what: 'the stats to count the job' });
    expect(stats.queue).toBe(name);
    const all = await api('GET', '/v1/queue-stats');
    expect(all.body.stats.map((s: { queue: string }) => s.queue)).toContain(name);
  });

  it('DELETE: 409 while the queue has jobs (the message says what), 200 once empty, then gone from the lists; 404 for an unknown one', async () => {
    const name = queueName('hd');
    const submitted = await api('POST', '/v1/jobs', { body: { queue: name, type: 't' } });
    const refused = await api('DELETE', `/v1/queues/${name}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('FAILED_PRECONDITION');
    expect(refused.body.message).toContain(`queue "${name}" is not empty: it has 1 job (1 PENDING)`);
    expect((await api('POST', `/v1/jobs/${submitted.body.job.id}/cancel`)).status).toBe(200);
    // A purge leaves a job whose events the projector has not yet read: wait for the delete to go through.
    await waitFor(async () => {
      await api('POST', '/v1/jobs/purge', { body: { filter: { queue: name } } });
      return (await api('DELETE', `/v1/queues/${name}`)).status === 200;
    }, { what: 'the queue deleted once its job is purged' });
    expect((await api('GET', `/v1/queues/${name}`)).status).toBe(404);
    expect((await api('GET', '/v1/queues')).body.queues?.map((q: { name: string }) => q.name) ?? []).not.toContain(name);
    expect((await api('GET', '/v1/queue-stats')).body.stats?.map((s: { queue: string }) => s.queue) ?? []).not.toContain(name);
    const again = await api('DELETE', `/v1/queues/${name}`);
    expect([again.status, again.body.code]).toEqual([404, 'NOT_FOUND']);
  });
});

describe('schedules', () => {
  it('upsert (name from the path), get, list, pause, resume, trigger, delete', async () => {
    const queue = queueName('hs');
    const name = `nightly-${queue}`;
    const schedule = { cron: '0 3 * * *', queue, type: 'report', payload: { full: true } };
    const created = await api('PUT', `/v1/schedules/${name}`, { body: schedule });
    expect(created.status).toBe(201);
    expect(created.body.schedule).toMatchObject({ name, cron: '0 3 * * *', queue });
    expect((await api('PUT', `/v1/schedules/${name}`, { body: schedule })).status).toBe(200);
    expect((await api('PUT', `/v1/schedules/${name}`, { body: { ...schedule, name: 'else' } })).status).toBe(400);

    expect((await api('GET', `/v1/schedules/${name}`)).body.schedule.name).toBe(name);
    expect((await api('GET', '/v1/schedules')).body.schedules.map((s: { name: string }) => s.name)).toContain(name);
    expect((await api('POST', `/v1/schedules/${name}/pause`)).body.schedule.paused).toBe(true);
    expect((await api('POST', `/v1/schedules/${name}/resume`)).body.schedule.paused).toBeUndefined();
    const triggered = await api('POST', `/v1/schedules/${name}/trigger`, { body: { triggerId: 'manual-1' } });
    expect(triggered.status).toBe(200);
    const job = await api('GET', `/v1/jobs/${triggered.body.jobId}`);
    expect(job.body.job).toMatchObject({ queue, type: 'report' });

    expect((await api('DELETE', `/v1/schedules/${name}`)).status).toBe(200);
    expect((await api('GET', `/v1/schedules/${name}`)).status).toBe(404);
  });
});
