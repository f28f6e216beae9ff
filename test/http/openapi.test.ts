import { compileErrors, validate } from '@readme/openapi-parser';
import { beforeAll, describe, expect, it } from 'vitest';
import { HTTP_ROUTES } from '../../src/http/routes.js';
import { httpSetup } from './http-setup.js';

/**
 * /openapi.json is a valid OpenAPI 3.1 document (@readme/openapi-parser), generated from
 * the route table: every route is in it with its method.
 */

let api: Awaited<ReturnType<typeof httpSetup>>['api'];
beforeAll(async () => {
  ({ api } = await httpSetup());
});

describe('/openapi.json', () => {
  it('validates and lists every route of the table', async () => {
    const res = await api('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body as { openapi: string; paths: Record<string, Record<string, { operationId: string }>> };
    expect(doc.openapi).toBe('3.1.0');
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);

    for (const route of HTTP_ROUTES) expect(doc.paths[route.path]?.[route.method.toLowerCase()], `${route.method} ${route.path}`).toBeDefined();
    // Schemas come from the descriptors: the job's int64 fields are strings, its states named.
    const job = (doc as unknown as { components: { schemas: Record<string, { properties: Record<string, Record<string, unknown>> }> } }).components.schemas['evora.v1.Job'];
    expect(job?.properties.state).toMatchObject({ type: 'string' });
    expect((job?.properties.state?.enum as string[])).toContain('JOB_STATE_DLQ');
  });
});
