import { ScalarType, type DescField, type DescMessage, type DescMethod } from '@bufbuild/protobuf';
import type { HttpRoute } from './routes.js';

/**
 * The OpenAPI 3.1 document of the HTTP API (/openapi.json), generated from the route table
 * (src/http/routes.ts) and the message descriptors of the .proto (src/gen/evora.binpb):
 * nothing here is written by hand per route or per message, so the document says what the
 * server does. Schemas follow the proto3 JSON mapping (lowerCamelCase names; int64 as
 * strings; enums by name; Timestamp as date-time; Duration as "30s"; Struct as an object).
 * test/http/openapi.test.ts validates it and checks every route is in it.
 */

type Schema = Record<string, unknown>;

/** A route served, with its method's descriptor. */
export interface OpenApiRoute {
  route: HttpRoute;
  method: DescMethod;
}

const ERROR_SCHEMA: Schema = {
  type: 'object',
  description: 'An error: the gRPC status code\'s name and one readable line.',
  properties: { code: { type: 'string', examples: ['NOT_FOUND'] }, message: { type: 'string' } },
  required: ['code', 'message'],
};

const WELL_KNOWN: Record<string, Schema> = {
  'google.protobuf.Timestamp': { type: 'string', format: 'date-time' },
  'google.protobuf.Duration': { type: 'string', pattern: '^-?[0-9]+(\\.[0-9]+)?s$', examples: ['30s'] },
  'google.protobuf.Struct': { type: 'object', additionalProperties: true },
  'google.protobuf.Value': {},
  'google.protobuf.ListValue': { type: 'array', items: {} },
  'google.protobuf.Empty': { type: 'object' },
  'google.protobuf.StringValue': { type: 'string' },
  'google.protobuf.BoolValue': { type: 'boolean' },
  'google.protobuf.Int32Value': { type: 'integer', format: 'int32' },
  'google.protobuf.Int64Value': { type: 'string', format: 'int64' },
  'google.protobuf.DoubleValue': { type: 'number' },
};

/** The JSON schema of a scalar in the proto3 JSON mapping. */
function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: 'string' };
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.BYTES:
      return { type: 'string', contentEncoding: 'base64' };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: 'number' };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return { type: 'string', format: 'int64' };
    default:
      return { type: 'integer', format: 'int32' };
  }
}

/** Builds the document for the routes served. */
export function openApiDocument(routes: readonly OpenApiRoute[], info: { version: string }): Record<string, unknown> {
  const schemas: Record<string, Schema> = { Error: ERROR_SCHEMA };
  const ref = (m: DescMessage): Schema => {
    const wkt = WELL_KNOWN[m.typeName];
    if (wkt) return wkt;
    if (!schemas[m.typeName]) {
      schemas[m.typeName] = {}; // placeholder first: messages may refer to themselves
      const properties: Record<string, Schema> = {};
      for (const f of m.fields) properties[f.jsonName] = fieldSchema(f);
      schemas[m.typeName] = { type: 'object', properties, additionalProperties: false };
    }
    return { $ref: `#/components/schemas/${m.typeName}` };
  };
  const valueSchema = (f: DescField): Schema => {
    if (f.enum) return { type: 'string', enum: f.enum.values.map((v) => v.name) };
    if (f.message) return ref(f.message);
    return scalarSchema(f.scalar ?? ScalarType.STRING);
  };
  const fieldSchema = (f: DescField): Schema => {
    if (f.fieldKind === 'list') return { type: 'array', items: valueSchema(f) };
    if (f.fieldKind === 'map') {
      const value = f.mapKind === 'enum' ? { type: 'string', enum: f.enum.values.map((v) => v.name) } : f.mapKind === 'message' ? ref(f.message) : scalarSchema(f.scalar);
      return { type: 'object', additionalProperties: value };
    }
    return valueSchema(f);
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const { route, method } of routes) {
    const pathParamFields = new Set(Object.values(route.pathParams ?? {}));
    const parameters: Schema[] = Object.keys(route.pathParams ?? {}).map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    for (const [header, field] of Object.entries(route.headers ?? {})) {
      parameters.push({ name: header.replace(/(^|-)(\w)/g, (_m, dash: string, c: string) => dash + c.toUpperCase()), in: 'header', required: false, schema: { type: 'string' }, description: `Sets ${field}` });
    }
    if (route.body === 'none') {
      for (const f of method.input.fields) {
        if (pathParamFields.has(f.name)) continue;
        if (f.message && !WELL_KNOWN[f.message.typeName]) continue;
        parameters.push({ name: f.name, in: 'query', required: false, schema: fieldSchema(f), ...(f.fieldKind === 'list' ? { style: 'form', explode: true } : {}) });
      }
    }
    let requestBody: Schema | undefined;
    if (route.body === 'whole') requestBody = { required: false, content: { 'application/json': { schema: ref(method.input) } } };
    else if (route.body !== 'none') {
      const field = method.input.fields.find((f) => f.name === (route.body as { field: string }).field);
      if (field?.message) requestBody = { required: true, content: { 'application/json': { schema: ref(field.message) } } };
    }
    const ok = { description: 'OK', content: { 'application/json': { schema: ref(method.output) } } };
    const responses: Record<string, unknown> =
      route.created === 'always' ? { '201': { ...ok, description: 'Created' } } : route.created === 'field' ? { '200': ok, '201': { ...ok, description: 'Created' } } : { '200': ok };
    responses.default = { description: 'An error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    const operationId = method.name.charAt(0).toLowerCase() + method.name.slice(1);
    (paths[route.path] ??= {})[route.method.toLowerCase()] = {
      operationId,
      summary: route.summary,
      description: `The RPC ${route.rpc.slice(1).replace('/', '.')}; request ${method.input.typeName}, response ${method.output.typeName}.`,
      tags: [method.parent.name],
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(requestBody ? { requestBody } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Evora HTTP API',
      version: info.version,
      description: 'The JSON twin of the gRPC API (proto/evora/v1): the same handlers, the proto3 JSON mapping of the same messages (fields are listed by their lowerCamelCase JSON names; requests may also use the proto snake_case names, as the mapping allows). Authorization: Bearer <token> when auth is on.',
    },
    components: {
      schemas,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }, {}],
    paths,
  };
}
