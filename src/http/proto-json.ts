import { readFileSync } from 'node:fs';
import {
  createFileRegistry,
  fromBinary,
  fromJson,
  ScalarType,
  toBinary,
  toJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescMethod,
  type FileRegistry,
  type JsonObject,
  type JsonValue,
} from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { invalidArgument } from '../domain/errors.js';
import { lineShown, quotedShort } from '../domain/validate.js';

/**
 * The proto3 JSON mapping of Evora's messages, exactly as grpcurl prints and reads it
 * (lowerCamelCase names, enums by name, int64 as strings, Timestamps in RFC 3339), done by
 * @bufbuild/protobuf from the descriptor set buf compiled (src/gen/evora.binpb), the same
 * file reflection serves. The gRPC handlers speak ts-proto objects; the bridge between the
 * two is the wire format: JSON -> message -> bytes -> the method's own requestDeserialize,
 * and responseSerialize -> bytes -> message -> JSON. So the HTTP API cannot drift from
 * the .proto: a field added there is in both at the next `npm run proto:gen`.
 */

let registryCache: FileRegistry | null = null;

/** The registry of every message, enum and service in src/gen/evora.binpb (read once). */
export function protoRegistry(): FileRegistry {
  registryCache ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(new URL('../gen/evora.binpb', import.meta.url))));
  return registryCache;
}

/** The method's descriptor, by its full path ("/evora.v1.JobService/GetJob"); undefined when it is not in the set. */
export function methodDescriptor(path: string): DescMethod | undefined {
  const [, service, method] = path.split('/');
  const desc = protoRegistry().getService(service ?? '');
  return desc?.methods.find((m) => m.name === method);
}

/** Parses request JSON (already merged with path and query values) into the wire bytes of `desc`; 400 on anything malformed or unknown. */
export function jsonToBytes(desc: DescMessage, json: JsonValue): Uint8Array {
  try {
    return toBinary(desc, fromJson(desc, json, { ignoreUnknownFields: false, registry: protoRegistry() }));
  } catch (err) {
    throw invalidArgument(`the request (its body, path and query) is not a valid ${desc.name}: ${oneLine(err)}`, { cause: err });
  }
}

/** The response's wire bytes as proto3 JSON. */
export function bytesToJson(desc: DescMessage, bytes: Uint8Array): JsonValue {
  return toJson(desc, fromBinary(desc, bytes), { registry: protoRegistry() });
}

/** The field of `desc` named `key` in either form (proto name or lowerCamelCase JSON name). */
export function fieldByName(desc: DescMessage, key: string): DescField | undefined {
  return desc.fields.find((f) => f.name === key || f.jsonName === key);
}

/**
 * Sets `dotted` (proto field names: "schedule.name") in a request's JSON, accepting either
 * name form where the JSON already has a value. A value there that differs from `value`
 * is refused (400): a path parameter or header and the body must not disagree.
 */
export function jsonFieldSet(desc: DescMessage, json: JsonObject, dotted: string, value: JsonValue, source: string): void {
  const parts = dotted.split('.');
  let message = desc;
  let target = json;
  for (const [i, part] of parts.entries()) {
    const field = fieldByName(message, part);
    if (!field) throw new Error(`${message.typeName} has no field ${part} (src/http/routes.ts)`);
    const existingKey = [field.jsonName, field.name].find((k) => target[k] !== undefined && target[k] !== null);
    if (i === parts.length - 1) {
      if (existingKey !== undefined && JSON.stringify(target[existingKey]) !== JSON.stringify(value)) {
        // The value already there came from the body, the query or a header (set in that order).
        throw invalidArgument(`${field.name} elsewhere in the request (${jsonShown(target[existingKey]!)}) differs from the ${source} (${jsonShown(value)})`);
      }
      if (existingKey !== undefined) delete target[existingKey];
      target[field.jsonName] = value;
      return;
    }
    if (field.fieldKind !== 'message') throw new Error(`${message.typeName}.${part} is not a message (src/http/routes.ts)`);
    let next = existingKey !== undefined ? target[existingKey] : undefined;
    if (next === undefined || next === null) {
      next = {};
      target[field.jsonName] = next;
    }
    if (typeof next !== 'object' || Array.isArray(next)) throw invalidArgument(`${field.name} must be an object`);
    target = next;
    message = field.message;
  }
}

/**
 * An enum value's name from a short form: "DLQ" -> "JOB_STATE_DLQ" (by the values' shared
 * prefix); digits are the value's number, as the proto3 JSON mapping allows ("4" -> 4: the
 * JSON number, since the mapping refuses a number written as a string).
 */
export function enumValueName(e: DescEnum, raw: string): string | number {
  if (e.values.some((v) => v.name === raw)) return raw;
  const upper = raw.toUpperCase();
  const prefix = enumPrefix(e);
  const full = `${prefix}${upper}`;
  if (e.values.some((v) => v.name === full || v.name === upper)) return e.values.some((v) => v.name === full) ? full : upper;
  if (/^\d{1,9}$/.test(raw)) return Number(raw);
  throw invalidArgument(`${quotedShort(raw)} is not a ${e.name} (one of ${e.values.map((v) => v.name.slice(prefix.length)).join(', ')})`);
}

/** The common "JOB_STATE_" of an enum's value names. */
function enumPrefix(e: DescEnum): string {
  const names = e.values.map((v) => v.name);
  let prefix = names[0] ?? '';
  for (const n of names) while (!n.startsWith(prefix)) prefix = prefix.slice(0, -1);
  return prefix.slice(0, prefix.lastIndexOf('_') + 1);
}

/**
 * Query parameters as request JSON: each name is a field of the request (proto or JSON
 * name), a repeated field may repeat, enums take their short form, bools take
 * true/false/1/0. Message-typed fields take their JSON string form (a Timestamp, a
 * Duration); other nested messages cannot be set from a query (400).
 */
export function queryToJson(desc: DescMessage, query: Record<string, string | string[] | undefined>): JsonObject {
  const out: JsonObject = {};
  for (const [key, raw] of Object.entries(query)) {
    if (raw === undefined) continue;
    const values = Array.isArray(raw) ? raw : [raw];
    const field = fieldByName(desc, key);
    if (!field) throw invalidArgument(`unknown query parameter ${quotedShort(key)} (the fields of ${desc.name}: ${desc.fields.map((f) => f.name).join(', ') || 'none'})`);
    const one = (v: string): JsonValue => {
      if (field.enum) return enumValueName(field.enum, v);
      if (field.message) {
        const wkt = field.message.typeName;
        if (wkt === 'google.protobuf.Timestamp' || wkt === 'google.protobuf.Duration') return v;
        throw invalidArgument(`${field.name} cannot be set in the query: send it in a JSON body`);
      }
      if (field.scalar === ScalarType.BOOL) {
        if (v === 'true' || v === '1') return true;
        if (v === 'false' || v === '0') return false;
        throw invalidArgument(`${field.name} must be true or false, got ${quotedShort(v)}`);
      }
      return v;
    };
    if (field.fieldKind === 'list') out[field.jsonName] = values.map(one);
    else if (field.fieldKind === 'map') throw invalidArgument(`${field.name} cannot be set in the query`);
    else {
      if (values.length > 1) throw invalidArgument(`${field.name} is given ${values.length} times; it takes one value`);
      out[field.jsonName] = one(values[0] ?? '');
    }
  }
  return out;
}

/**
 * An error's message as one short line: its first line, cut to 200 characters, with what is
 * not visible text escaped (the decoder's lines quote a key as sent: 1 MB, U+202E).
 */
function oneLine(err: unknown): string {
  const line = (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
  return lineShown(line);
}

/** A request value as a refusal shows it: a string quoted and cut (quotedShort), anything else its JSON cut to 64 characters. */
function jsonShown(value: JsonValue): string {
  if (typeof value === 'string') return quotedShort(value);
  const text = JSON.stringify(value);
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}
