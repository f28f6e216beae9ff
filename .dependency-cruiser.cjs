/**
 * The layering rules CI checks (`npm run deps:check`): no import cycles anywhere in src/,
 * and each layer imports only the layers below it. The layers, bottom up:
 *   domain          types, errors, codes, validation: imports no other layer
 *   store           the only code that speaks SQL
 *   auth            the API token cache and authentication (imports domain and store only)
 *   dispatcher      claimed jobs to free slots
 *   telemetry       the projection and its sinks, Prometheus metrics (which read the dispatcher's gauges)
 *   maintenance     leader-only background services and the maintainer
 *   grpc            proto <-> domain, errors <-> statuses
 *   http            the HTTP port: JSON routes that call the gRPC handlers in process, the dashboard
 *   server          the composition root (and config, embedded PostgreSQL)
 *   cli             the `evora` command
 * The SDK (src/sdk) is a client: it imports only itself, the generated code and src/wire.
 * src/wire (protobuf decoding helpers the SDK and the gRPC layer share) imports nothing of src/.
 * @type {import('dependency-cruiser').IConfiguration}
 */
const layer = (name, mayNotImport) => ({
  name: `${name}-layering`,
  comment: `src/${name} must not import ${mayNotImport.join(', ')}`,
  severity: 'error',
  from: { path: `^src/${name}/` },
  to: { path: `^src/(${mayNotImport.join('|')})/` },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle: the layers must form a tree.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'sdk-is-a-client',
      comment: 'The SDK never imports server code: only itself, the generated API and src/wire.',
      severity: 'error',
      from: { path: '^src/sdk/' },
      to: { path: '^src/', pathNot: '^src/(sdk|gen|wire)/' },
    },
    {
      name: 'wire-imports-nothing',
      comment: 'src/wire is shared by the SDK and the server: it imports nothing of src/.',
      severity: 'error',
      from: { path: '^src/wire/' },
      to: { path: '^src/', pathNot: '^src/wire/' },
    },
    {
      name: 'domain-imports-nothing',
      comment: 'Domain types are the bottom layer.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { path: '^src/', pathNot: '^src/domain/' },
    },
    layer('store', ['auth', 'telemetry', 'dispatcher', 'maintenance', 'grpc', 'server', 'cli', 'sdk', 'gen', 'http']),
    layer('auth', ['dispatcher', 'telemetry', 'maintenance', 'grpc', 'server', 'cli', 'sdk', 'gen', 'http']),
    layer('telemetry', ['maintenance', 'grpc', 'server', 'cli', 'sdk', 'gen', 'http']),
    layer('dispatcher', ['telemetry', 'maintenance', 'grpc', 'server', 'cli', 'sdk', 'gen', 'http']),
    layer('maintenance', ['dispatcher', 'grpc', 'server', 'cli', 'sdk', 'gen', 'http']),
    layer('grpc', ['maintenance', 'http', 'server', 'cli', 'sdk']),
    layer('http', ['maintenance', 'server', 'cli', 'sdk']),
    layer('server', ['cli', 'sdk']),
    layer('cli', ['http']),
    {
      name: 'no-test-code-in-src',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },
};
