/** `lmsp pair`: make a pairing code, with the service running or not (LMSP section 4). */
import type { Command } from 'commander';
import type { PairingCodeObject } from '../../api/types.js';
import { CLIENT_NAME_PATTERN, DEFAULT_SCOPES, isScope, MAX_CLIENT_NAME_LENGTH, MAX_PAIRING_TTL_SECONDS, SCOPES, type Scope } from '../../domain/clients.js';
import { issuePairingCode } from '../../tasks/pairing.js';
import { parseDuration } from '../../time.js';
import type { ServiceConfig } from '../../config.js';
import { action, CliError, EXIT_USAGE, formatTime, openOffline, printJson, serviceClient, withCommonOptions, type CommonOptions } from '../context.js';

/** LMSP 4, 12: `--scopes S...`: comma-separated, several words, or the option repeated; all of them, once each. */
export function parseScopes(text: string | string[] | undefined): Scope[] | undefined {
  if (text === undefined) return undefined;
  const scopes = [...new Set((Array.isArray(text) ? text : [text]).flatMap((part) => part.split(/[\s,]+/)).filter(Boolean))];
  const unknown = scopes.filter((scope) => !isScope(scope));
  if (unknown.length > 0 || scopes.length === 0) {
    throw new CliError(`unknown scope ${unknown.join(', ') || '(none)'}; scopes are ${SCOPES.join(', ')}`, EXIT_USAGE);
  }
  return scopes as Scope[];
}

/** Where a stopped service will listen once started with its stored settings, as a client on this machine reaches it. */
function addressOf(config: ServiceConfig): string {
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
}

/** A word for a POSIX shell, in single quotes. */
function shellQuoted(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function registerPair(program: Command): void {
  withCommonOptions(program.command('pair')
    .description('make a single-use pairing code for a new client')
    .option('--name <name>', 'name for the client that pairs with this code, as client_name in the printed curl command')
    .option('--scopes <list...>', `comma-separated scopes (${SCOPES.join(', ')}); default ${DEFAULT_SCOPES.join(',')}`)
    .option('--ttl <duration>', 'how long the code stays valid', '10m'))
    .action(action(async (options: CommonOptions & { name?: string; scopes?: string[]; ttl: string }) => {
      const ttlMs = parseDuration(options.ttl);
      if (ttlMs === null) throw new CliError(`--ttl: expected a duration like 30s, 10m or 1h, got '${options.ttl}'`, EXIT_USAGE);
      // LMSP 12: 500ms is a duration, but codes expire in whole seconds (`expires_at`).
      if (ttlMs < 1000) throw new CliError(`--ttl: a pairing code lives at least 1s, got '${options.ttl}'`, EXIT_USAGE);
      // The same bound as the API's, with the service running or not.
      if (ttlMs > MAX_PAIRING_TTL_SECONDS * 1000) throw new CliError(`--ttl: a pairing code lives at most 7d, got '${options.ttl}'`, EXIT_USAGE);
      // The name is the client_name of the printed command: one that /v1/pair refuses is refused
      // here, with the service running or not.
      if (options.name !== undefined && (options.name === '' || [...options.name].length > MAX_CLIENT_NAME_LENGTH)) {
        throw new CliError(`--name: a client's name is 1 to ${MAX_CLIENT_NAME_LENGTH} characters`, EXIT_USAGE);
      }
      if (options.name !== undefined && !new RegExp(CLIENT_NAME_PATTERN, 'u').test(options.name)) {
        throw new CliError("--name: a client's name holds no control characters (U+0000-U+001F, U+007F-U+009F)", EXIT_USAGE);
      }
      const scopes = parseScopes(options.scopes);
      const request = { name: options.name ?? null, ...(scopes ? { scopes } : {}), ttlMs };
      const client = await serviceClient(options);
      let issued: PairingCodeObject;
      let url: string;
      if (client) {
        url = client.baseUrl;
        issued = await client.createPairingCode({
          ...(request.name ? { name: request.name } : {}), ...(scopes ? { scopes } : {}), ttl_seconds: Math.round(ttlMs / 1000),
        });
      } else {
        // Works before the first start too: the database is created (and migrated) if need be.
        const offline = openOffline(options, true);
        url = addressOf(offline.config);
        try {
          const outcome = await issuePairingCode(offline, request, null);
          issued = 'code' in outcome ? outcome.code : outcome.replay.body as PairingCodeObject;
        } finally {
          await offline.close();
        }
      }
      if (options.json) {
        printJson({ object: 'pairing_code', code: issued.code, name: issued.name, scopes: issued.scopes, expires_at: issued.expires_at });
        return;
      }
      // The client's name is what it sends as client_name: the hint uses --name, so that the
      // client shows up under the name the operator chose.
      const pairBody = JSON.stringify({ code: issued.code, client_name: options.name ?? 'my-app' });
      process.stdout.write([
        `Pairing code: ${issued.code}`,
        `Scopes:       ${issued.scopes.join(', ')}`,
        `Expires:      ${formatTime(issued.expires_at)} (single use)`,
        '',
        'The client exchanges it for its token with:',
        `  curl -s ${url}/v1/pair -H 'content-type: application/json' -d ${shellQuoted(pairBody)}`,
        '',
      ].join('\n'));
    }));
}
