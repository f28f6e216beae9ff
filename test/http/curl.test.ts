import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { serverSetup } from '../helpers/server-setup.js';
import { CURL_BEGIN, CURL_END, curlMarkdown, curlSteps } from './curl-commands.js';

/**
 * The README's curl walk-through: the section is generated from test/http/curl-commands.ts,
 * and its command lines run with bash against a live server, as a reader would run them
 * (BASE set, then JOB_ID and LEASE_TOKEN copied from the outputs).
 */

const ROOT = join(import.meta.dirname, '../..');
const hasCurl = (() => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

it('README.md holds the walk-through generated from test/http/curl-commands.ts', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(CURL_BEGIN);
  const end = readme.indexOf(CURL_END);
  expect(start, 'README.md lacks the curl-walkthrough markers').toBeGreaterThan(-1);
  expect(readme.slice(start + CURL_BEGIN.length, end).trim(), 'the README section is stale: npx tsx test/http/curl-commands.ts').toBe(curlMarkdown());
});

describe.skipIf(!hasCurl)('the curl commands of the README (needs curl)', () => {
  const vars: Record<string, string> = {};
  beforeAll(async () => {
    const { httpUrl } = await serverSetup({ http: true });
    vars.BASE = httpUrl;
  });

  function run(id: string): Promise<string> {
    const step = curlSteps.find((s) => s.id === id);
    if (!step) throw new Error(`no curl step ${id}`);
    return new Promise((resolve, reject) => {
      execFile('bash', ['-euo', 'pipefail', '-c', step.command], { env: { ...process.env, ...vars }, timeout: 30_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`\`${step.command}\` failed: ${err.message}\n${stderr}`)) : resolve(stdout),
      );
    });
  }
  /** The JSON body of `curl -i` output. */
  const bodyOf = (out: string) => JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4)) as { job: { id: string; state: string } };

  it('every step runs and prints what the comments say', async () => {
    expect(curlSteps.map((s) => s.id)).toEqual(['health', 'queue', 'submit', 'replay', 'get', 'claim', 'complete', 'dlq', 'stats']);
    expect(await run('health')).toBe('ready\n');
    expect(JSON.parse(await run('queue')).queue).toMatchObject({ name: 'images', leaseSeconds: 300 });

    const submitted = await run('submit');
    expect(submitted).toMatch(/^HTTP\/1\.1 201 Created/);
    vars.JOB_ID = bodyOf(submitted).job.id;
    const replay = await run('replay');
    expect(replay).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(bodyOf(replay).job.id).toBe(vars.JOB_ID);

    expect(JSON.parse(await run('get')).job).toMatchObject({ id: vars.JOB_ID, state: 'JOB_STATE_PENDING' });
    const claimed = JSON.parse(await run('claim')) as { jobs: { job: { id: string }; leaseToken: string }[] };
    expect(claimed.jobs[0]?.job.id).toBe(vars.JOB_ID);
    vars.LEASE_TOKEN = claimed.jobs[0]!.leaseToken;
    expect(JSON.parse(await run('complete')).job).toMatchObject({ id: vars.JOB_ID, state: 'JOB_STATE_COMPLETED', result: { thumbnail: 'cat_256.png' } });
    expect(JSON.parse(await run('dlq'))).toEqual({});
    expect(JSON.parse(await run('stats')).stats).toMatchObject({ queue: 'images' });
  });
});
