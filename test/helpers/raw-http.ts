/**
 * HTTP at the level of the socket, for what fetch will not send (a Host of our choosing, a
 * malformed Content-Length, headers that trickle in) and for seeing exactly what comes back.
 */
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Whether the server closed the connection after the answer. */
  closed: boolean;
}

export function parseAnswer(text: string, closed: boolean): RawAnswer {
  const split = text.indexOf('\r\n\r\n');
  const head = split >= 0 ? text.slice(0, split) : text;
  const [statusLine, ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = split >= 0 ? text.slice(split + 4) : '';
  if (headers['transfer-encoding'] === 'chunked') {
    let decoded = '';
    for (let rest = body; rest.length > 0;) {
      const end = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, end), 16);
      if (!size) break;
      decoded += rest.slice(end + 2, end + 2 + size);
      rest = rest.slice(end + 2 + size + 2);
    }
    body = decoded;
  }
  return { status: Number(/^HTTP\/1\.\d (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0), headers, body, closed };
}

export function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `request` (bytes as given) and reads until one whole answer has arrived or the server closes. */
export function exchange(socket: Socket, request: string | Buffer, timeoutMs = 15_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let text = '';
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.off('error', onError);
      resolve(parseAnswer(text, closed));
    };
    const complete = () => {
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return false;
      const answer = parseAnswer(text, false);
      const length = Number(answer.headers['content-length']);
      if (Number.isFinite(length)) return Buffer.byteLength(text.slice(split + 4)) >= length;
      return answer.headers['transfer-encoding'] === 'chunked' && text.endsWith('0\r\n\r\n');
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (complete()) done(false);
    };
    const onClose = () => done(true);
    const onError = (error: Error) => {
      clearTimeout(timer);
      reject(error);
    };
    const timer = setTimeout(() => reject(new Error(`no whole answer within ${timeoutMs} ms; got: ${text.slice(0, 200)}`)), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('error', onError);
    if (request.length > 0) socket.write(request);
  });
}

/** One request on a fresh connection. */
export async function rawRequest(url: string, request: string | Buffer, timeoutMs?: number): Promise<RawAnswer> {
  const socket = await openSocket(url);
  try {
    return await exchange(socket, request, timeoutMs);
  } finally {
    socket.destroy();
  }
}

/** A GET with the headers given, Host included. */
export function rawGet(url: string, path: string, headers: Record<string, string>): Promise<RawAnswer> {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return rawRequest(url, `GET ${path} HTTP/1.1\r\n${lines}Connection: close\r\n\r\n`);
}
