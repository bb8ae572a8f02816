// dev/api-routes.mjs: the stubs' router answers from the API description (404 for a path it does
// not have, 405 with Allow for a method it does not list) and refuses handlers it does not list.
import { describe, expect, it } from 'vitest';
import { createRouter } from '../dev/api-routes.mjs';

const op = (method: string, path: string) => ({ method, path, pathParams: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]), queryParams: [] });
const operations = {
  GetThings: op('GET', '/api/v1/things'),
  CreateThing: op('POST', '/api/v1/things'),
  GetThing: op('GET', '/api/v1/things/{id}'),
  DeleteThing: op('DELETE', '/api/v1/things/{id}'),
  PauseThings: op('POST', '/api/v1/things/pause'),
  SetMember: op('PUT', '/api/v1/spaces/{space}/members/{user}'),
};

describe('api-routes', () => {
  const getThing = () => 'thing';
  const router = createRouter(operations, { 'GET /api/v1/things/{id}': getThing });

  it('answers 404 for a path the description does not have', () => {
    expect(router.match('GET', '/api/v1/nothing')).toEqual({ status: 404 });
    expect(router.match('GET', '/api/v1/things/1/extra')).toEqual({ status: 404 });
    expect(router.match('GET', '/api/v1/things/')).toEqual({ status: 404 }); // an empty {id}
  });

  it('answers 405 with the allowed methods, in the master order, for a method it does not list', () => {
    expect(router.match('PUT', '/api/v1/things')).toEqual({ status: 405, allow: 'GET, POST' });
    expect(router.match('POST', '/api/v1/things/7')).toEqual({ status: 405, allow: 'GET, DELETE' });
    // /things/pause is also /things/{id}: POST from the literal route, GET and DELETE from the other
    expect(router.match('PUT', '/api/v1/things/pause')).toEqual({ status: 405, allow: 'GET, POST, DELETE' });
  });

  it('matches a described route, with its path parameters decoded and its handler, if any', () => {
    expect(router.match('GET', '/api/v1/things/7')).toEqual({ status: 200, operationId: 'GetThing', params: { id: '7' }, handler: getThing });
    expect(router.match('PUT', '/api/v1/spaces/nlp/members/a%20b')).toEqual({ status: 200, operationId: 'SetMember', params: { space: 'nlp', user: 'a b' }, handler: undefined });
    expect(router.match('POST', '/api/v1/things/pause')).toMatchObject({ status: 200, operationId: 'PauseThings', params: {} });
  });

  it('refuses at creation a handler for a route the description does not list', () => {
    expect(() => createRouter(operations, { 'GET /api/v1/things/{thingId}': getThing, 'POST /api/v1/other': getThing }, 'the test stub')).toThrow(
      /the test stub serves route\(s\) the API description does not list: GET \/api\/v1\/things\/\{thingId\}, POST \/api\/v1\/other/,
    );
  });
});
