import * as grpc from '@grpc/grpc-js';
import { expect } from 'vitest';
import { EvoraApiError } from '../../src/sdk/index.js';

/**
 * Expects the call `p` to fail with status `code` and a readable one-line message: equal to
 * `message` when it is a string, matching it when a RegExp, any line when absent.
 */
export async function expectStatus(p: Promise<unknown>, code: grpc.status, message?: RegExp | string): Promise<void> {
  const err = (await p.then(
    () => {
      throw new Error(`expected status ${grpc.status[code]}, got success`);
    },
    (e: unknown) => e,
  )) as grpc.ServiceError;
  expect(grpc.status[err.code]).toBe(grpc.status[code]);
  expect(err.details).not.toMatch(/\n/);
  if (typeof message === 'string') expect(err.details).toBe(message);
  else if (message) expect(err.details).toMatch(message);
}

/** The EvoraApiError an SDK call `p` rejects with (the test fails if it succeeds or rejects otherwise). */
export async function apiError(p: Promise<unknown>): Promise<EvoraApiError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EvoraApiError);
  return err as EvoraApiError;
}
