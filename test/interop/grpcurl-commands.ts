import { pathToFileURL } from 'node:url';

/**
 * The grpcurl walk-through shown in docs/grpcurl.md, in one place: the doc is generated from
 * these steps (`npx tsx test/interop/grpcurl-commands.ts > docs/grpcurl.md`), and
 * test/interop/grpcurl.test.ts runs exactly these command lines with bash against a live
 * server (with ADDR, JOB_ID and LEASE_TOKEN set as the doc tells the reader to set them),
 * and checks that docs/grpcurl.md is up to date.
 */

/** Where the doc's server listens (`npm start`); the test sets ADDR to its own server. */
export const DOC_ADDRESS = 'localhost:50051';

export interface GrpcurlStep {
  /** Key the test uses to find a step. */
  id: string;
  /** Heading in the doc. */
  title: string;
  /** Prose before the command. */
  intro: string;
  /** The command line(s), run by bash as they are. */
  command: string;
  /** Prose after the command: what to look for in the output. */
  after?: string;
}

export const grpcurlSteps: GrpcurlStep[] = [
  {
    id: 'list',
    title: 'List the services',
    intro: 'The server has reflection on, so grpcurl needs no .proto files.',
    command: 'grpcurl -plaintext $ADDR list',
    after:
      'Prints `evora.v1.AuditService`, `evora.v1.JobService`, `evora.v1.QueueService`, `evora.v1.ScheduleService`, `evora.v1.TokenService`, ' +
      '`evora.v1.WorkerService` and `grpc.health.v1.Health`.',
  },
  {
    id: 'describe',
    title: 'Describe a service or a message',
    intro: 'Shows the methods with their comments from the .proto files.',
    command: 'grpcurl -plaintext $ADDR describe evora.v1.JobService\ngrpcurl -plaintext $ADDR describe evora.v1.SubmitJobRequest',
  },
  {
    id: 'health',
    title: 'Check health',
    intro: 'The standard gRPC health service.',
    command: 'grpcurl -plaintext $ADDR grpc.health.v1.Health/Check',
    after: 'Prints `"status": "SERVING"`.',
  },
  {
    id: 'queue',
    title: 'Create a queue',
    intro:
      'Optional: queues are created on first use with a 30 s lease. A longer one leaves time to type the ' +
      'claim and complete commands below by hand.',
    command: `grpcurl -plaintext -d '{"name": "images", "lease_seconds": 300}' $ADDR evora.v1.QueueService/UpsertQueue`,
  },
  {
    id: 'submit',
    title: 'Submit a job with a JSON payload',
    intro: 'Request fields use the .proto names (snake_case); the payload is any JSON object.',
    command:
      `grpcurl -plaintext -d '{"queue": "images", "type": "resize", "payload": {"image": "cat.png", "width": 4000, "height": 3000}}' ` +
      '$ADDR evora.v1.JobService/SubmitJob',
    after: 'The job comes back `JOB_STATE_PENDING`. Keep its id: `JOB_ID=<job.id from the output>`.',
  },
  {
    id: 'claim',
    title: 'Claim it, as a worker would',
    intro:
      'ClaimJobs leases up to `max` jobs without a stream (workers normally use the `Work` stream; ' +
      'see examples/go-worker and examples/python-worker).',
    command: `grpcurl -plaintext -d '{"worker_id": "grpcurl", "queues": ["images"], "max": 1}' $ADDR evora.v1.WorkerService/ClaimJobs`,
    after:
      'The job is now `JOB_STATE_RUNNING` with `attempt` 1. Keep the lease: `LEASE_TOKEN=<jobs[0].leaseToken from the output>`. ' +
      'Complete the job before `leaseExpiresAt`: after that the lease is lost and the job goes back to the queue.',
  },
  {
    id: 'complete',
    title: 'Complete it with a result',
    intro: 'The result is any JSON object; `-d @` reads the request from standard input, so the shell fills in the variables.',
    command:
      'grpcurl -plaintext -d @ $ADDR evora.v1.WorkerService/CompleteJob <<EOF\n' +
      '{"job_id": "$JOB_ID", "lease_token": "$LEASE_TOKEN", "result": {"thumbnail": "cat_256x192.png", "width": 256, "height": 192}}\n' +
      'EOF',
  },
  {
    id: 'get',
    title: 'Read it back',
    intro: '',
    command: 'grpcurl -plaintext -d @ $ADDR evora.v1.JobService/GetJob <<EOF\n{"id": "$JOB_ID"}\nEOF',
    after: 'The job is `JOB_STATE_COMPLETED`, with the result and `finishedAt`.',
  },
];

/**
 * The same over TLS (docs/tls.md), run in a folder holding ca.pem, client.pem and
 * client.key, against a server with EVORA_TLS_CERT/KEY (and, for mtls, EVORA_TLS_CLIENT_CA).
 */
export const grpcurlTlsSteps: GrpcurlStep[] = [
  {
    id: 'tls',
    title: 'Over TLS',
    intro:
      'When the server has a certificate (`EVORA_TLS_CERT`, `EVORA_TLS_KEY`), drop `-plaintext` and give grpcurl the CA ' +
      "that signed it. `$ADDR` must be a name or address the server's certificate lists.",
    command: 'grpcurl -cacert ca.pem $ADDR grpc.health.v1.Health/Check',
    after: 'Prints `"status": "SERVING"`.',
  },
  {
    id: 'mtls',
    title: 'With a client certificate (mTLS)',
    intro:
      'When the server also has `EVORA_TLS_CLIENT_CA`, it refuses connections without a client certificate signed by that CA; ' +
      'every command above works with these three flags in place of `-plaintext`.',
    command: `grpcurl -cacert ca.pem -cert client.pem -key client.key -d '{"queue": "images", "type": "resize", "payload": {"image": "tls.png", "width": 10, "height": 10}}' $ADDR evora.v1.JobService/SubmitJob`,
    after: 'Without `-cert` and `-key` the same command fails: the TLS handshake is refused before any call.',
  },
  {
    id: 'token',
    title: 'TLS with a token',
    intro:
      'Once the server has any API token (`evora token create`, or `EVORA_BOOTSTRAP_ADMIN_TOKEN`), every call but health and ' +
      'reflection needs one, sent as the `authorization` header (docs/api.md, "Authentication"). Put the token in a variable ' +
      '(`EVORA_TOKEN=<the secret evora token create printed>`; a producer token may submit and list, see the roles table) and ' +
      'add `-H` to the commands above. Send tokens over TLS only: over `-plaintext` anyone on the way can read them.',
    command:
      `grpcurl -cacert ca.pem -H "authorization: Bearer $EVORA_TOKEN" -d '{"queue": "images", "type": "resize", "payload": {"image": "token.png", "width": 10, "height": 10}}' $ADDR evora.v1.JobService/SubmitJob\n` +
      `grpcurl -cacert ca.pem -H "authorization: Bearer $EVORA_TOKEN" -d '{"queue": "images"}' $ADDR evora.v1.JobService/ListJobs`,
    after: 'The job comes back `JOB_STATE_PENDING`, and ListJobs lists it.',
  },
  {
    id: 'no-token',
    title: 'Without a token',
    intro: 'The same call without `-H` (or with a wrong, expired or revoked token) is refused, and nothing is changed:',
    command: `grpcurl -cacert ca.pem -d '{"queue": "images"}' $ADDR evora.v1.JobService/ListJobs`,
    after:
      'grpcurl exits non-zero and prints\n\n```\nERROR:\n  Code: Unauthenticated\n  Message: <one line saying why>\n```\n\n' +
      'A valid token whose role may not call the method, or whose queues do not include the queue named, answers ' +
      '`Code: PermissionDenied` instead. The message never contains the token.',
  },
];

/** docs/grpcurl.md. */
export function grpcurlMarkdown(): string {
  const parts = [
    '# Evora with grpcurl',
    '',
    '<!-- Generated from test/interop/grpcurl-commands.ts (npx tsx test/interop/grpcurl-commands.ts > docs/grpcurl.md);',
    '     test/interop/grpcurl.test.ts runs these exact commands against a live server. Edit the .ts file, not this one. -->',
    '',
    '[grpcurl](https://github.com/fullstorydev/grpcurl) talks to a running Evora server (`npm start`) through server',
    'reflection. Install it with Go:',
    '',
    '```sh',
    'go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4   # into $(go env GOPATH)/bin',
    '```',
    '',
    'Every command below uses the server address from `ADDR`:',
    '',
    '```sh',
    `ADDR=${DOC_ADDRESS}`,
    '```',
  ];
  grpcurlSteps.forEach((s, i) => {
    parts.push('', `## ${i + 1}. ${s.title}`, '');
    if (s.intro) parts.push(s.intro, '');
    parts.push('```sh', s.command, '```');
    if (s.after) parts.push('', s.after);
  });
  grpcurlTlsSteps.forEach((s, i) => {
    parts.push('', `## ${grpcurlSteps.length + i + 1}. ${s.title}`, '');
    if (s.intro) parts.push(s.intro, '');
    parts.push('```sh', s.command, '```');
    if (s.after) parts.push('', s.after);
  });
  parts.push(
    '',
    'grpcurl prints responses as protobuf JSON: field names in lowerCamelCase (`leaseToken`), enums by name,',
    'timestamps in RFC 3339, and fields with default values left out. It accepts either spelling of',
    'field names in requests.',
    '',
  );
  return parts.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(grpcurlMarkdown());
}
