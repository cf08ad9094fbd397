// The client's own HTTP/1.1 path for JSON requests (issue 48), against stand-in servers on
// node:net that answer as a server or a proxy may: chunked, closing, closing a kept-alive
// connection under a request, not answering, answering an error. The real server's answers are
// the other test files' business.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';

import { Larder, LarderError } from 'larder-sqlite';

const servers = [];

after(() => {
  for (const server of servers) server.close();
});

/**
 * A stand-in server: `answer(request, n, socket)` is called for each request head (n: its number
 * on its connection, from 1) and writes what it likes to the socket. Answers {url, connections}.
 */
async function standIn(answer) {
  const state = { connections: 0, requests: [] };
  const server = createServer((socket) => {
    state.connections += 1;
    let buffer = '';
    let n = 0;
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.slice(0, end + 2); // with the last line's CRLF
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const body = buffer.slice(end + 4, end + 4 + length);
        buffer = buffer.slice(end + 4 + length);
        n += 1;
        const request = { line: head.split('\r\n')[0], head, body, n };
        state.requests.push(request);
        answer(request, n, socket);
      }
    });
  });
  servers.push(server);
  await new Promise((resolvePromise) => server.listen(0, '127.0.0.1', resolvePromise));
  state.url = `http://127.0.0.1:${server.address().port}`;
  return state;
}

const json = (status, value, extra = '') => {
  const body = JSON.stringify(value);
  return `HTTP/1.1 ${status} X\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
};

describe('the lean HTTP path', () => {
  test('kept-alive connections: many requests, one connection; the head it sends', async () => {
    const server = await standIn((req, n, socket) => socket.write(json(200, { status: 'ok', n })));
    const larder = new Larder({ url: server.url, token: 's3cret' });
    for (let i = 1; i <= 5; i += 1) assert.deepEqual(await larder.health(), { status: 'ok', n: i });
    assert.equal(server.connections, 1);
    const [first] = server.requests;
    assert.equal(first.line, 'GET /health HTTP/1.1');
    assert.match(first.head, /\r\nHost: 127\.0\.0\.1:\d+\r\n/);
    assert.match(first.head, /\r\nAuthorization: Bearer s3cret\r\n/);
    assert.match(first.head, /\r\nAccept: application\/json\r\n/);
  });

  test('a JSON body, a query, a URL with a path: what is sent', async () => {
    const server = await standIn((req, n, socket) => socket.write(json(201, { id: 'st_1', path: '/x' })));
    const larder = new Larder({ url: `${server.url}/larder/` });
    await larder.createStore({ template: 'gallery', label: 'été' });
    await larder.listStores({ label: 'a b', limit: 2 });
    const [create, list] = server.requests;
    assert.equal(create.line, 'POST /larder/stores HTTP/1.1');
    assert.match(create.head, /\r\nContent-Type: application\/json\r\n/);
    assert.equal(Buffer.from(create.body, 'latin1').toString('utf8'), JSON.stringify({ template: 'gallery', label: 'été' }));
    assert.match(create.head, new RegExp(`\\r\\nContent-Length: ${Buffer.byteLength(JSON.stringify({ template: 'gallery', label: 'été' }))}\\r\\n`));
    assert.equal(list.line, 'GET /larder/stores?label=a+b&limit=2 HTTP/1.1');
  });

  test('a chunked answer, a 204 and an answer that ends with its connection', async () => {
    const server = await standIn((req, n, socket) => {
      if (req.line.startsWith('GET /health')) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
        socket.write('7\r\n{"statu\r\n');
        socket.write('b\r\ns": "chunk"\r\n1\r\n}\r\n0\r\n\r\n');
      } else if (req.line.startsWith('DELETE')) {
        socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      } else {
        socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"templates": []}');
      }
    });
    const larder = new Larder({ url: server.url });
    assert.deepEqual(await larder.health(), { status: 'chunk' });
    assert.equal(await larder.request('DELETE', '/stores/st_1'), null);
    assert.deepEqual(await larder.templates(), []);
    assert.deepEqual(await larder.health(), { status: 'chunk' }, 'a new connection after the closed one');
    assert.equal(server.connections, 2);
  });

  test('an answer that comes in pieces: the head split, a long body in many writes', async () => {
    const stores = Array.from({ length: 2000 }, (_, i) => ({ id: `st_${i}`, label: `é ${i}`, path: `/x/${i}` }));
    const body = Buffer.from(JSON.stringify({ stores }));
    const server = await standIn(async (req, n, socket) => {
      const head = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      const all = Buffer.concat([head, body]);
      // 20 bytes (part of the head), then pieces of 1000, each its own write after the last has gone.
      for (let at = 0, size = 20; at < all.length; at += size, size = 1000) {
        await new Promise((resolvePromise) => socket.write(all.subarray(at, at + size), resolvePromise));
      }
    });
    const larder = new Larder({ url: server.url });
    assert.deepEqual(await larder.listStores({ limit: 2000 }), stores);
    assert.deepEqual(await larder.listStores({ limit: 2000 }), stores, 'and again on the same connection');
    assert.equal(server.connections, 1);
  });

  test('a kept-alive connection the server closed under a request: asked again on a new one', async () => {
    // The second request on each connection finds it closed, as an idle one a server dropped.
    const server = await standIn((req, n, socket) => (n === 1 ? socket.write(json(200, { status: 'ok' })) : socket.destroy()));
    const larder = new Larder({ url: server.url });
    assert.deepEqual(await larder.health(), { status: 'ok' });
    assert.deepEqual(await larder.health(), { status: 'ok' });
    assert.equal(server.connections, 2);
  });

  test('errors: the server\'s error with its request id and Retry-After, no answer in time, nobody listening', async () => {
    const server = await standIn((req, n, socket) => {
      if (req.line.startsWith('PATCH')) {
        socket.write(json(409, { error: { code: 'conflict', message: 'busy', details: { a: 1 } } }, 'X-Request-Id: r-1\r\nRetry-After: 2\r\n'));
      }
      // Anything else: no answer.
    });
    const larder = new Larder({ url: server.url, timeoutMs: 300 });
    await assert.rejects(larder.request('PATCH', '/stores/st_1', { body: { keep: true } }), (err) => {
      assert.ok(err instanceof LarderError);
      assert.deepEqual([err.status, err.code, err.message, err.details, err.requestId, err.retryAfter], [409, 'conflict', 'busy', { a: 1 }, 'r-1', 2]);
      return true;
    });
    await assert.rejects(larder.health(), { name: 'LarderError', status: 0, code: 'client_timeout', message: `GET ${server.url}/health: no answer within 300 ms` });

    const closed = await standIn(() => {});
    await new Promise((resolvePromise) => servers.pop().close(resolvePromise));
    await assert.rejects(new Larder({ url: closed.url }).health(), (err) => {
      assert.equal(err.code, 'connection_failed');
      assert.match(err.message, /cannot reach the Larder server \(connect ECONNREFUSED/);
      return true;
    });
  });
});
