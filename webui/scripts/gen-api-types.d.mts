// Types of gen-api-types.mjs's exports, for the Vitest tests (test/genApiTypes.test.ts).
export interface GeneratedOperation {
  method: string;
  path: string;
  pathParams: string[];
  queryParams: string[];
}
export const DEFAULT_DOC: string;
export const DEFAULT_OUT: string;
/** The text of wire.ts for a parsed OpenAPI 3 document; throws, naming the place, on what it cannot type. */
export function generateWireTs(doc: unknown): string;
/** operationId → {method, path, pathParams, queryParams}, as wire.ts's `operations` holds it. */
export function operationsFromDoc(doc: unknown): Record<string, GeneratedOperation>;
/** The same, read back from the text of a generated wire.ts. */
export function readGeneratedOperations(text: string): Record<string, GeneratedOperation>;
/** The TypeScript type of one schema, inline. */
export function tsType(schema: unknown, where: string, indent?: string): string;
/** The document to read: the argument, else $SF_OPENAPI_JSON, else build/openapi.json. */
export function documentPath(arg?: string): string;
