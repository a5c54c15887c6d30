/**
 * Where a pulled model comes from (LMSP 5.1): `hf:OWNER/REPO/FILE.gguf[@REVISION]` or an
 * `https://` URL of a GGUF file. Parsing is pure: it turns the text a client sent into the URL to
 * fetch, or a `ServiceError('invalid_request', ..., { param: 'source' })` saying what is wrong.
 *
 * The rules are stricter than Hugging Face's own so that nothing a client sends can change the
 * shape of the URL: no `%`, `?`, `#`, `@` or spaces in names, no `.` or `..` segments, and ASCII
 * only.
 */
import { ServiceError, invalidRequest } from '../domain/errors.js';
import { ConfigError } from '../config.js';
import { parseDuration } from '../time.js';
import { modelIdFromPath } from './registry.js';

export const DEFAULT_HF_ENDPOINT = 'https://huggingface.co';

/** What a pull needs from the environment (LMSP 5.1: `LMSP_HF_ENDPOINT`, `HF_TOKEN`). */
export interface PullSettings {
  /** Origin plus optional path prefix, without a trailing slash. */
  hfEndpoint: string;
  /** Sent as `Authorization: Bearer` to the endpoint's origin only. */
  hfToken: string | null;
  /**
   * A connection that sends no byte for this long is dropped (`LMSP_PULL_IDLE_TIMEOUT`); the pull
   * then continues from the bytes on disk, at most three times, before it fails. Default 30 s.
   */
  idleTimeoutMs?: number;
}

/** Hugging Face's own clients drop a silent connection after 10 s; a slow mirror gets more. */
export const DEFAULT_PULL_IDLE_TIMEOUT_MS = 30_000;

export interface HfFileRef {
  owner: string;
  repo: string;
  /** The path of the file in the repository, sub-folders included. */
  file: string;
  revision: string;
}

export interface PullSource {
  kind: 'hf' | 'url';
  /** The URL the download starts from (before redirects). */
  url: string;
  /** The last segment of the file's path, for the default model id. */
  fileName: string;
  hf: HfFileRef | null;
}

const MAX_SOURCE_LENGTH = 2048;
/** Hugging Face limits repository ids to 96 characters; owners and names alike. */
const NAME_PATTERN = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/;
const FILE_SEGMENT_PATTERN = /^[A-Za-z0-9_.+~-]+$/;
const REVISION_SEGMENT_PATTERN = /^[A-Za-z0-9_.-]+$/;
const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

function badSource(message: string): ServiceError {
  return new ServiceError('invalid_request', message, { param: 'source' });
}

function idleTimeoutFrom(env: NodeJS.ProcessEnv): number {
  const text = env.LMSP_PULL_IDLE_TIMEOUT?.trim();
  if (!text) return DEFAULT_PULL_IDLE_TIMEOUT_MS;
  const value = parseDuration(text);
  // At most an hour: beyond it a pull would look hung, and timers overflow past 24 days.
  if (value === null || value <= 0 || value > 3_600_000) {
    throw new ConfigError(`LMSP_PULL_IDLE_TIMEOUT: '${text}' is not a duration from 1ms to 1h, such as 500ms, 30s or 2m`);
  }
  return value;
}

/**
 * Reads `LMSP_HF_ENDPOINT`, `HF_TOKEN` and `LMSP_PULL_IDLE_TIMEOUT`; a malformed value is an
 * operator's mistake.
 */
export function pullSettingsFromEnvironment(env: NodeJS.ProcessEnv = process.env): PullSettings {
  const text = env.LMSP_HF_ENDPOINT?.trim() || DEFAULT_HF_ENDPOINT;
  let endpoint: URL;
  try {
    endpoint = new URL(text);
  } catch {
    throw new ConfigError(`LMSP_HF_ENDPOINT: '${text}' is not a URL`);
  }
  if (endpoint.protocol !== 'https:' && endpoint.protocol !== 'http:') {
    throw new ConfigError('LMSP_HF_ENDPOINT: expected an http:// or https:// URL');
  }
  if (endpoint.username || endpoint.password || endpoint.search || endpoint.hash) {
    throw new ConfigError('LMSP_HF_ENDPOINT: expected an origin and path only (no credentials, query or fragment)');
  }
  const token = env.HF_TOKEN?.trim();
  return {
    hfEndpoint: `${endpoint.origin}${endpoint.pathname.replace(/\/+$/, '')}`, hfToken: token ? token : null, idleTimeoutMs: idleTimeoutFrom(env),
  };
}

/** The origin that may receive `HF_TOKEN`. */
export function hfEndpointOrigin(settings: PullSettings): string {
  return new URL(settings.hfEndpoint).origin;
}

function checkName(what: 'owner' | 'repository', name: string): void {
  if (!NAME_PATTERN.test(name) || name.includes('--') || name.includes('..')) {
    throw badSource(
      `the ${what} name '${name}' is not valid: 1-96 characters of A-Z, a-z, 0-9, '_', '.' and '-', starting and ending ` +
        "with a letter, digit or '_', without '--' or '..'",
    );
  }
  if (what === 'repository' && name.toLowerCase().endsWith('.git')) throw badSource("a repository name may not end in '.git'");
}

function checkFile(file: string): void {
  const segments = file.split('/');
  for (const segment of segments) {
    if (segment === '') throw badSource('the file path has an empty segment (a leading, trailing or doubled "/")');
    if (segment === '.' || segment === '..') throw badSource("the file path may not contain '.' or '..' segments");
    if (!FILE_SEGMENT_PATTERN.test(segment)) {
      throw badSource(`the file path segment '${segment}' is not valid: use A-Z, a-z, 0-9 and '_', '.', '+', '~', '-'`);
    }
  }
  if (!/\.gguf$/i.test(file)) throw badSource('the file must be a .gguf file');
}

/** Branches, tags and commits; `refs/pr/1` style names are allowed and encoded as one segment. */
function checkRevision(revision: string): void {
  if (revision === '') throw badSource("the revision after '@' is empty");
  if (revision.length > 255) throw badSource('the revision is longer than 255 characters');
  for (const segment of revision.split('/')) {
    if (segment === '' || segment === '.' || segment === '..' || segment.startsWith('.') || !REVISION_SEGMENT_PATTERN.test(segment)) {
      throw badSource(`the revision '${revision}' is not a valid branch, tag or commit name`);
    }
  }
  if (revision.startsWith('-') || revision.endsWith('.lock')) throw badSource(`the revision '${revision}' is not a valid branch, tag or commit name`);
}

function parseHfSource(rest: string, settings: PullSettings): PullSource {
  const at = rest.indexOf('@');
  if (at !== rest.lastIndexOf('@')) throw badSource("an hf: source has at most one '@' (before the revision)");
  const path = at === -1 ? rest : rest.slice(0, at);
  const revision = at === -1 ? 'main' : rest.slice(at + 1);
  const parts = path.split('/');
  if (parts.length < 3) throw badSource('expected hf:OWNER/REPO/FILE.gguf, optionally followed by @REVISION');
  const [owner, repo, ...fileParts] = parts as [string, string, ...string[]];
  checkName('owner', owner);
  checkName('repository', repo);
  const file = fileParts.join('/');
  checkFile(file);
  checkRevision(revision);
  const encodedFile = fileParts.map((segment) => encodeURIComponent(segment)).join('/');
  const url = `${settings.hfEndpoint}/${owner}/${repo}/resolve/${encodeURIComponent(revision)}/${encodedFile}`;
  return { kind: 'hf', url, fileName: fileParts[fileParts.length - 1]!, hf: { owner, repo, file, revision } };
}

function parseUrlSource(text: string, settings: PullSettings): PullSource {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badSource('the source is not a valid URL');
  }
  const endpointOrigin = hfEndpointOrigin(settings);
  // LMSP 5.1: https everywhere; plain http only to the configured endpoint (a local mirror).
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && url.origin === endpointOrigin)) {
    throw badSource(`the scheme '${url.protocol}' is not supported: use hf:OWNER/REPO/FILE.gguf or an https:// URL`);
  }
  if (url.username || url.password) throw badSource('credentials in the URL are not accepted');
  if (url.hostname === '') throw badSource('the URL has no host');
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    throw badSource('the URL path is not valid percent-encoding');
  }
  const fileName = path.slice(path.lastIndexOf('/') + 1);
  if (!/\.gguf$/i.test(fileName) || fileName.length <= '.gguf'.length) throw badSource('the URL must name a .gguf file');
  url.hash = '';
  return { kind: 'url', url: url.href, fileName, hf: null };
}

/** Parses and validates a pull source (LMSP 5.1); throws `invalid_request` with `param: 'source'`. */
export function parsePullSource(text: unknown, settings: PullSettings): PullSource {
  if (typeof text !== 'string' || text === '') throw badSource('source must be a non-empty string');
  if (text.length > MAX_SOURCE_LENGTH) throw badSource(`source is longer than ${MAX_SOURCE_LENGTH} characters`);
  // Control characters, spaces and non-ASCII would be silently re-encoded by URL parsing.
  if (!/^[\x21-\x7e]+$/.test(text)) throw badSource('source may contain only visible ASCII characters');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(text)?.[1]?.toLowerCase();
  if (scheme === 'hf') return parseHfSource(text.slice(3), settings);
  if (scheme === 'https' || scheme === 'http') return parseUrlSource(text, settings);
  throw badSource(`${scheme ? `the scheme '${scheme}:'` : 'a source without a scheme'} is not supported: use hf:OWNER/REPO/FILE.gguf or an https:// URL`);
}

/** The model id a pull gets when the client names none: from the file name, as `lmsp models add`. */
export function modelIdFromSource(source: PullSource): string {
  return modelIdFromPath(source.fileName);
}

/** Checks a client's expected digest (`sha256:` and 64 hex digits); returns it in lower case. */
export function parseExpectedDigest(text: unknown): string {
  if (typeof text !== 'string' || !DIGEST_PATTERN.test(text.toLowerCase())) {
    throw invalidRequest('digest', "digest must be 'sha256:' followed by 64 hexadecimal digits");
  }
  return text.toLowerCase();
}
