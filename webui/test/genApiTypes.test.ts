// gen-api-types.mjs: a small OpenAPI document in, the expected wire.ts out (int64, enums, arrays,
// $ref, date-time, maps, free-form objects, required and optional fields, operations).
import { describe, expect, it } from 'vitest';
import { generateWireTs, operationsFromDoc, readGeneratedOperations } from '../scripts/gen-api-types.mjs';
import wireTs from '../src/api/generated/wire.ts?raw';

const doc = {
  openapi: '3.0.3',
  info: { title: 'Tiny API', version: 'v1' },
  paths: {
    '/api/v1/things/{id}': {
      get: {
        operationId: 'GetThing',
        parameters: [
          { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'int64' } },
          { name: 'page_size', in: 'query', schema: { type: 'integer', format: 'int32' } },
          { name: 'states', in: 'query', description: 'repeat the key', schema: { type: 'array', items: { type: 'string', enum: ['STATE_A', 'STATE_B'] } } },
        ],
        responses: { 200: { description: 'OK', content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } }, 404: { description: 'no' } },
      },
      delete: { operationId: 'DeleteThing', parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }], responses: { 204: { description: 'gone' } } },
    },
    '/api/v1/things': {
      post: {
        operationId: 'CreateThing',
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } },
        responses: { 200: { description: 'OK', content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } } },
      },
    },
  },
  components: {
    schemas: {
      Thing: {
        type: 'object',
        description: 'A thing.',
        required: ['id'],
        properties: {
          id: { type: 'string', format: 'int64' },
          state: { type: 'string', enum: ['STATE_A', 'STATE_B'] },
          tags: { type: 'array', items: { type: 'string' } },
          sizes: { type: 'array', items: { type: 'string', format: 'uint64' } },
          parts: { type: 'array', items: { $ref: '#/components/schemas/Part' } },
          owner: { $ref: '#/components/schemas/Part' },
          createdAt: { type: 'string', format: 'date-time' },
          labels: { type: 'object', additionalProperties: { type: 'string' } },
          counts: { type: 'object', additionalProperties: { type: 'integer', format: 'int32' } },
          extra: { type: 'object' },
          score: { type: 'number', description: 'higher is better' },
          ok: { type: 'boolean' },
          blob: { type: 'string', format: 'byte' },
          value: {},
          'x-odd': { type: 'string', nullable: true },
        },
      },
      Part: { type: 'object', properties: { name: { type: 'string' }, ratio: { type: 'number', format: 'double' } } },
      Empty: { type: 'object', properties: {} },
      Color: { type: 'string', enum: ['RED', 'GREEN'] },
    },
  },
};

const expected = `export type Color = "RED" | "GREEN";

export interface Empty {}

export interface Part {
  name?: string;
  ratio?: number;
}

/** A thing. */
export interface Thing {
  blob?: string; // byte
  counts?: {
    [key: string]: number;
  };
  createdAt?: string; // date-time
  extra?: {
    [key: string]: unknown;
  };
  id: string; // int64
  labels?: {
    [key: string]: string;
  };
  ok?: boolean;
  owner?: Part;
  parts?: Part[];
  /** higher is better */
  score?: number;
  sizes?: string[]; // uint64
  state?: "STATE_A" | "STATE_B";
  tags?: string[];
  value?: unknown;
  "x-odd"?: string | null;
}

/** Every operation of the document by operationId: its HTTP method, path template (with
 *  {parameters}), and the names of its path and query parameters as the document spells them. */
export const operations = {
  "CreateThing": {"method":"POST","path":"/api/v1/things","pathParams":[],"queryParams":[]},
  "DeleteThing": {"method":"DELETE","path":"/api/v1/things/{id}","pathParams":["id"],"queryParams":[]},
  "GetThing": {"method":"GET","path":"/api/v1/things/{id}","pathParams":["id"],"queryParams":["page_size","states"]}
} as const;

export type OperationId = keyof typeof operations;

/** Per operation: its query parameters (named as the document names them), its JSON request
 *  body (undefined: none) and its JSON answer (the first 2xx; undefined: no body). */
export interface OperationTypes {
  CreateThing: {
    query: {};
    request: Thing;
    response: Thing;
  };
  DeleteThing: {
    query: {};
    request: undefined;
    response: undefined;
  };
  GetThing: {
    query: {
      page_size?: number;
      /** repeat the key */
      states?: ("STATE_A" | "STATE_B")[];
    };
    request: undefined;
    response: Thing;
  };
}
`;

const clone = <T,>(v: T): T => JSON.parse(JSON.stringify(v));

describe('gen-api-types', () => {
  it('writes one interface per schema and the operations, as the wire JSON', () => {
    const out = generateWireTs(doc);
    expect(out.startsWith('// GENERATED from the OpenAPI document (Tiny API v1) by webui/scripts/gen-api-types.mjs.\n')).toBe(true);
    expect(out).toContain('run `npm run gen:api` in webui/');
    expect(out.slice(out.indexOf('export type Color'))).toBe(expected);
  });

  it('is deterministic: the order of schemas, properties and paths in the document does not matter', () => {
    const shuffled = clone(doc) as any;
    const reverse = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).reverse());
    shuffled.components.schemas = reverse(shuffled.components.schemas);
    shuffled.components.schemas.Thing.properties = reverse(shuffled.components.schemas.Thing.properties);
    shuffled.paths = reverse(shuffled.paths);
    expect(generateWireTs(shuffled)).toBe(generateWireTs(doc));
  });

  it('writes `operations` as JSON that plain Node reads back (dev/stub-master.mjs)', () => {
    const ops = readGeneratedOperations(generateWireTs(doc));
    expect(ops).toEqual(operationsFromDoc(doc));
    expect(ops.GetThing).toEqual({ method: 'GET', path: '/api/v1/things/{id}', pathParams: ['id'], queryParams: ['page_size', 'states'] });
  });

  it('fails, naming the place, on what it cannot type', () => {
    const bad = (mutate: (d: any) => void) => {
      const d = clone(doc) as any;
      mutate(d);
      return () => generateWireTs(d);
    };
    expect(bad((d) => (d.components.schemas.Part.properties.name = { type: 'file' }))).toThrow(/components\.schemas\.Part\.name: unsupported type "file"/);
    expect(bad((d) => (d.components.schemas.Part.properties.name = { $ref: '#/definitions/Name' }))).toThrow(/Part\.name: unsupported \$ref/);
    expect(bad((d) => delete d.paths['/api/v1/things'].post.operationId)).toThrow(/POST \/api\/v1\/things: operationId/);
    expect(bad((d) => (d.paths['/api/v1/things'].post.operationId = 'GetThing'))).toThrow(/operationId GetThing is also POST \/api\/v1\/things/);
    expect(bad((d) => (d.paths['/api/v1/things/{id}'].delete.parameters[0].name = 'uuid'))).toThrow(/path parameter uuid is not in the path template/);
    expect(bad((d) => (d.components.schemas.Thing.required = ['nope']))).toThrow(/required property nope/);
    expect(bad((d) => (d.openapi = '2.0'))).toThrow(/not an OpenAPI 3 document/);
  });

  it('the checked-in wire.ts has the operations the dashboard calls', () => {
    const ops = readGeneratedOperations(wireTs);
    expect(ops.GetExperiments).toMatchObject({ method: 'GET', path: '/api/v1/experiments' });
    expect(ops.GetTrialLogs.queryParams).toContain('follow');
  });
});
