// Types of api-routes.mjs's exports, for the Vitest tests (test/apiRoutes.test.ts).
import type { GeneratedOperation } from '../scripts/gen-api-types.mjs';

/** (req, res, url, params, …): node:http's request and response (no Node types in this project). */
export type Handler = (req: any, res: any, url: URL, params: Record<string, string>, ...rest: any[]) => unknown;
export type RouteMatch =
  | { status: 404 }
  | { status: 405; allow: string }
  | { status: 200; operationId: string; params: Record<string, string>; handler: Handler | undefined };

export const WIRE_TS: string;
export function loadOperations(env?: Record<string, string | undefined>): Record<string, GeneratedOperation>;
export function assertDescribed(operations: Record<string, GeneratedOperation>, routes: string[], who?: string): void;
export function createRouter(operations: Record<string, GeneratedOperation>, handlers?: Record<string, Handler>, who?: string): { match(method: string, pathname: string): RouteMatch };
