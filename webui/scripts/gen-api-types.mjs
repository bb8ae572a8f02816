#!/usr/bin/env node
// Generates src/api/generated/wire.ts from the OpenAPI document that the build writes from the
// proto (build/openapi.json, CMake target openapi_json; the master serves the same document at
// GET /api/v1/openapi.json). The output is the WIRE JSON, exactly as the document describes it:
// one interface per component schema (64-bit integers as strings, enums as string-literal unions,
// every property optional unless the schema lists it as required, because proto3's JSON mapping
// leaves default values out), plus `operations` (operationId → method, path, path and query
// parameters) and `OperationTypes` (operationId → query, request and response types).
// Normalising the wire JSON into the dashboard's own types is client.ts's job, not this file's.
//
//   node scripts/gen-api-types.mjs [openapi.json] [--out FILE]   write wire.ts (npm run gen:api)
//   node scripts/gen-api-types.mjs [openapi.json] --check         fail if wire.ts is stale (npm run check:api)
//
// The document defaults to $SF_OPENAPI_JSON, else ../build/openapi.json (relative to webui/).
// Output is deterministic: schemas, properties and operations sorted by name; enum values and
// parameters in the document's order. A construct the generator does not know is an error naming
// where it is, never a silent `unknown`.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const webuiDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_DOC = resolve(webuiDir, '..', 'build', 'openapi.json');
export const DEFAULT_OUT = resolve(webuiDir, 'src', 'api', 'generated', 'wire.ts');
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const REF_PREFIX = '#/components/schemas/';
// Names the generated file defines itself; a schema with one of these names would clash.
const RESERVED = new Set(['operations', 'OperationId', 'OperationTypes']);
const OPS_START = 'export const operations = ';
const OPS_END = '} as const;';

const isIdent = (s) => /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(s);
const propKey = (s) => (isIdent(s) ? s : JSON.stringify(s));
const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/** The TypeScript name of a component schema; refuses names that are not identifiers. */
function typeName(name, where) {
  if (!isIdent(name)) throw new Error(`${where}: schema name ${JSON.stringify(name)} is not a TypeScript identifier`);
  if (RESERVED.has(name)) throw new Error(`${where}: schema name ${name} clashes with a name wire.ts defines itself`);
  return name;
}

function refName(ref, where) {
  if (typeof ref !== 'string' || !ref.startsWith(REF_PREFIX)) throw new Error(`${where}: unsupported $ref ${JSON.stringify(ref)} (only ${REF_PREFIX}…)`);
  return typeName(ref.slice(REF_PREFIX.length), where);
}

function comment(text, indent) {
  const lines = String(text).replace(/\*\//g, '*\\/').split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join('\n')}\n${indent} */\n`;
}

/** True when `t` has a `|` or `&` outside braces, brackets, parentheses and string literals, so
 *  that `t[]` or `t | null` would bind wrongly without parentheses. */
function needsParens(t) {
  let depth = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t[i];
    if (c === '"') {
      for (i++; i < t.length && t[i] !== '"'; i++) if (t[i] === '\\') i++;
    } else if (c === '{' || c === '(' || c === '[') depth++;
    else if (c === '}' || c === ')' || c === ']') depth--;
    else if ((c === '|' || c === '&') && depth === 0) return true;
  }
  return false;
}

// Keys that only annotate a schema; a schema with nothing else stands for any JSON value.
const ANNOTATIONS = new Set(['description', 'title', 'example', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'default', 'nullable']);

/** The TypeScript type of one schema (inline), `indent` being the indentation of its line. */
export function tsType(s, where, indent = '') {
  if (s === true) return 'unknown';
  if (!s || typeof s !== 'object' || Array.isArray(s)) throw new Error(`${where}: a schema must be an object, got ${JSON.stringify(s)}`);
  let t;
  if (Object.keys(s).every((k) => ANNOTATIONS.has(k))) t = 'unknown'; // any JSON value (google.protobuf.Value)
  else if (s.$ref !== undefined) t = refName(s.$ref, where);
  else if (s.enum !== undefined) {
    if (!Array.isArray(s.enum) || s.enum.length === 0) throw new Error(`${where}: enum must be a non-empty array`);
    t = s.enum.map((v) => JSON.stringify(v)).join(' | ');
  } else if (s.oneOf || s.anyOf) t = (s.oneOf ?? s.anyOf).map((x, i) => tsType(x, `${where}.${s.oneOf ? 'oneOf' : 'anyOf'}[${i}]`, indent)).map((x) => (needsParens(x) ? `(${x})` : x)).join(' | ');
  else if (s.allOf) t = s.allOf.map((x, i) => tsType(x, `${where}.allOf[${i}]`, indent)).map((x) => (needsParens(x) ? `(${x})` : x)).join(' & ');
  else {
    switch (s.type) {
      case 'string': // int64/uint64 (protobuf writes them as strings), date-time, byte (base64), …
        t = 'string';
        break;
      case 'integer':
      case 'number':
        t = 'number';
        break;
      case 'boolean':
        t = 'boolean';
        break;
      case 'array': {
        if (s.items === undefined) throw new Error(`${where}: array without items`);
        const item = tsType(s.items, `${where}[]`, indent);
        t = needsParens(item) ? `(${item})[]` : `${item}[]`;
        break;
      }
      case 'object':
      case undefined:
        if (s.type === undefined && s.properties === undefined && s.additionalProperties === undefined) {
          throw new Error(`${where}: schema without type, $ref, enum or properties: ${JSON.stringify(s)}`);
        }
        t = objectBody(s, where, indent);
        break;
      default:
        throw new Error(`${where}: unsupported type ${JSON.stringify(s.type)}`);
    }
  }
  return s.nullable === true ? `${needsParens(t) ? `(${t})` : t} | null` : t;
}

/** `{ … }` for an object schema: its properties (optional unless required) and, for a map
 *  (additionalProperties) or a free-form object (google.protobuf.Struct: no properties at all),
 *  an index signature. */
function objectBody(s, where, indent) {
  const props = s.properties ?? {};
  const required = new Set(Array.isArray(s.required) ? s.required : []);
  for (const r of required) if (!(r in props)) throw new Error(`${where}: required property ${r} is not among the properties`);
  const inner = `${indent}  `;
  let out = '';
  for (const name of Object.keys(props).sort(byName)) {
    const p = props[name];
    const w = `${where}.${name}`;
    if (p && typeof p === 'object' && typeof p.description === 'string' && p.description) out += comment(p.description, inner);
    // a string's format says what the string holds (int64, date-time, byte); keep it in sight
    const fmt = p?.type === 'string' && typeof p.format === 'string' ? ` // ${p.format}` : p?.type === 'array' && p.items?.type === 'string' && typeof p.items.format === 'string' ? ` // ${p.items.format}` : '';
    out += `${inner}${propKey(name)}${required.has(name) ? '' : '?'}: ${tsType(p, w, inner)};${fmt}\n`;
  }
  const ap = s.additionalProperties;
  let index;
  if (ap === true || (ap && typeof ap === 'object')) index = ap === true ? 'unknown' : tsType(ap, `${where}{}`, inner);
  else if (ap === undefined && s.properties === undefined) index = 'unknown'; // free-form object
  else if (ap !== undefined && ap !== false) throw new Error(`${where}: additionalProperties must be a boolean or a schema`);
  if (index !== undefined) {
    // an index signature must admit every property's type: with both, the map's values stay unknown
    out += `${inner}[key: string]: ${Object.keys(props).length ? 'unknown' : index};\n`;
  }
  return out ? `{\n${out}${indent}}` : '{}';
}

function resolveParam(doc, p, where) {
  if (p && p.$ref !== undefined) {
    const m = /^#\/components\/parameters\/(.+)$/.exec(p.$ref);
    const target = m && doc.components?.parameters?.[m[1]];
    if (!target) throw new Error(`${where}: unresolved parameter $ref ${JSON.stringify(p.$ref)}`);
    return target;
  }
  return p;
}

/** The first JSON schema among a response's or request body's content types, or undefined. */
const jsonSchema = (content) => content?.['application/json']?.schema;

/** Every operation of the document: [{id, method, path, pathParams, queryParams, query, request,
 *  requestRequired, response}], sorted by operationId. Throws on a missing or duplicate
 *  operationId, or a path parameter that the path template does not have. */
export function collectOperations(doc) {
  const ops = new Map();
  for (const path of Object.keys(doc.paths ?? {}).sort(byName)) {
    const item = doc.paths[path];
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const id = op.operationId;
      if (typeof id !== 'string' || !isIdent(id)) throw new Error(`${where}: operationId ${JSON.stringify(id)} is missing or not an identifier`);
      if (ops.has(id)) throw new Error(`${where}: operationId ${id} is also ${ops.get(id).method} ${ops.get(id).path}`);
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p, i) => resolveParam(doc, p, `${where} parameter ${i}`));
      // operation-level parameters override path-level ones of the same name and place
      const seen = new Map();
      for (const p of params) seen.set(`${p.in} ${p.name}`, p);
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const pathParams = [...seen.values()].filter((p) => p.in === 'path').map((p) => p.name);
      for (const n of pathParams) if (!templated.includes(n)) throw new Error(`${where}: path parameter ${n} is not in the path template`);
      for (const n of templated) if (!pathParams.includes(n)) throw new Error(`${where}: path template segment {${n}} has no path parameter`);
      const queryParams = [...seen.values()].filter((p) => p.in === 'query');
      const ok = Object.keys(op.responses ?? {}).filter((c) => /^2\d\d$/.test(c)).sort(byName);
      const first = ok.length ? op.responses[ok[0]] : undefined;
      const resSchema = jsonSchema(first?.content);
      const reqSchema = jsonSchema(op.requestBody?.content);
      ops.set(id, {
        id,
        method: method.toUpperCase(),
        path,
        pathParams: templated,
        queryParams: queryParams.map((p) => p.name),
        query: queryParams.map((p) => ({ name: p.name, required: p.required === true, schema: p.schema ?? {}, description: p.description })),
        request: reqSchema,
        requestRequired: op.requestBody?.required === true,
        hasRequestBody: op.requestBody !== undefined,
        response: resSchema,
        noContent: first !== undefined && first.content === undefined,
      });
    }
  }
  return [...ops.values()].sort((a, b) => byName(a.id, b.id));
}

/** operationId → {method, path, pathParams, queryParams}, as wire.ts's `operations` holds it. */
export function operationsFromDoc(doc) {
  return Object.fromEntries(collectOperations(doc).map((o) => [o.id, { method: o.method, path: o.path, pathParams: o.pathParams, queryParams: o.queryParams }]));
}

/** The text of wire.ts for an OpenAPI 3 document (parsed JSON). */
export function generateWireTs(doc) {
  if (!doc || typeof doc !== 'object' || typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.')) {
    throw new Error('not an OpenAPI 3 document (no "openapi": "3.x")');
  }
  const schemas = doc.components?.schemas ?? {};
  const title = [doc.info?.title, doc.info?.version].filter(Boolean).join(' ');
  let out = `// GENERATED from the OpenAPI document${title ? ` (${title})` : ''} by webui/scripts/gen-api-types.mjs.
// Do not edit: change the proto (or the document's source), build the CMake target openapi_json,
// then run \`npm run gen:api\` in webui/. CI runs \`npm run check:api\`, which fails while this
// file differs from what the document generates.
//
// The wire JSON (protobuf's JSON mapping): 64-bit integers are decimal strings, enums their value
// names, Timestamps RFC 3339 strings; a property is optional unless the document requires it,
// since proto3 leaves default values out. client.ts turns these into the types of types.ts.
`;
  for (const name of Object.keys(schemas).sort(byName)) {
    const s = schemas[name];
    const where = `components.schemas.${name}`;
    const tn = typeName(name, where);
    out += '\n';
    if (s && typeof s === 'object' && typeof s.description === 'string' && s.description) out += comment(s.description, '');
    const isObject = s && typeof s === 'object' && s.$ref === undefined && s.enum === undefined && !s.oneOf && !s.anyOf && !s.allOf && !s.nullable && (s.type === 'object' || (s.type === undefined && (s.properties !== undefined || s.additionalProperties !== undefined)));
    if (isObject) out += `export interface ${tn} ${objectBody(s, where, '')}\n`;
    else out += `export type ${tn} = ${tsType(s, where, '')};\n`;
  }

  const ops = collectOperations(doc);
  // One JSON line per operation: dev/stub-master.mjs reads this literal back as JSON
  // (readGeneratedOperations), so it must stay JSON apart from `as const`.
  out += `
/** Every operation of the document by operationId: its HTTP method, path template (with
 *  {parameters}), and the names of its path and query parameters as the document spells them. */
${OPS_START}{
${ops.map((o) => `  ${JSON.stringify(o.id)}: ${JSON.stringify({ method: o.method, path: o.path, pathParams: o.pathParams, queryParams: o.queryParams })}`).join(',\n')}
${OPS_END}

export type OperationId = keyof typeof operations;

/** Per operation: its query parameters (named as the document names them), its JSON request
 *  body (undefined: none) and its JSON answer (the first 2xx; undefined: no body). */
export interface OperationTypes {
`;
  for (const o of ops) {
    const w = `${o.method} ${o.path}`;
    let q = '';
    for (const p of o.query) {
      if (p.description) q += comment(p.description, '      ');
      q += `      ${propKey(p.name)}${p.required ? '' : '?'}: ${tsType(p.schema, `${w} query ${p.name}`, '      ')};\n`;
    }
    const req = !o.hasRequestBody ? 'undefined' : o.request === undefined ? 'unknown' : tsType(o.request, `${w} requestBody`, '    ') + (o.requestRequired ? '' : ' | undefined');
    const res = o.response !== undefined ? tsType(o.response, `${w} response`, '    ') : o.noContent ? 'undefined' : 'unknown';
    out += `  ${o.id}: {\n    query: ${q ? `{\n${q}    }` : '{}'};\n    request: ${req};\n    response: ${res};\n  };\n`;
  }
  out += '}\n';
  return out;
}

/** operationId → {method, path, pathParams, queryParams}, read back from a generated wire.ts
 *  (its `operations` literal is JSON), for plain-Node tools such as dev/stub-master.mjs. */
export function readGeneratedOperations(text) {
  const start = text.indexOf(OPS_START);
  const end = start < 0 ? -1 : text.indexOf(`\n${OPS_END}`, start);
  if (start < 0 || end < 0) throw new Error('no `export const operations = {…} as const;` in the generated file');
  return JSON.parse(text.slice(start + OPS_START.length, end + 2));
}

/** The OpenAPI document to read: the argument, else $SF_OPENAPI_JSON, else build/openapi.json. */
export function documentPath(arg) {
  return resolve(arg ?? process.env.SF_OPENAPI_JSON ?? DEFAULT_DOC);
}

function loadDocument(file) {
  if (!existsSync(file)) {
    throw new UsageError(
      `no OpenAPI document at ${file}.\n` +
        'Build it from the proto first: `cmake --build build --target openapi_json` (at the repository root),\n' +
        'or point SF_OPENAPI_JSON (or the first argument) at one, e.g. a copy of GET /api/v1/openapi.json.',
    );
  }
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`${file} is not JSON: ${e.message}`);
  }
}

class UsageError extends Error {}

function main(argv) {
  let docArg;
  let out = DEFAULT_OUT;
  let check = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--check') check = true;
    else if (argv[i] === '--out') out = resolve(argv[++i] ?? '');
    else if (argv[i].startsWith('-')) throw new UsageError(`unknown option ${argv[i]} (usage: gen-api-types.mjs [openapi.json] [--out FILE] [--check])`);
    else docArg = argv[i];
  }
  const docFile = documentPath(docArg);
  const text = generateWireTs(loadDocument(docFile));
  const shown = relative(process.cwd(), out) || out;
  if (!check) {
    writeFileSync(out, text);
    console.log(`wrote ${shown} from ${docFile}`);
    return 0;
  }
  const current = existsSync(out) ? readFileSync(out, 'utf8') : '';
  if (current === text) {
    console.log(`${shown} is current with ${docFile}`);
    return 0;
  }
  const fresh = join(mkdtempSync(join(tmpdir(), 'sf-wire-')), 'wire.ts');
  writeFileSync(fresh, text);
  const a = current.split('\n');
  const b = text.split('\n');
  let line = 0;
  while (line < a.length && line < b.length && a[line] === b[line]) line++;
  console.error(
    `${shown} is stale: it differs from what ${docFile} generates (first difference at line ${line + 1}).\n` +
      `  see the difference:  diff -u ${out} ${fresh}\n` +
      '  fix it:              cd webui && npm run gen:api   (then fix what `npm run build` reports, and commit wire.ts)',
  );
  return 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    console.error(`gen-api-types: ${e.message}`);
    process.exitCode = e instanceof UsageError ? 2 : 1;
  }
}
