/** `lmsp pair`: make a pairing code, with the service running or not (LMSP section 4). */
import type { Command } from 'commander';
import type { PairingCodeObject } from '../../api/types.js';
import { DEFAULT_SCOPES, isScope, MAX_PAIRING_TTL_SECONDS, SCOPES, type Scope } from '../../domain/clients.js';
import { issuePairingCode } from '../../tasks/pairing.js';
import { parseDuration } from '../../time.js';
import { action, CliError, EXIT_USAGE, formatTime, openOffline, printJson, runningService, serviceClient, withCommonOptions, type CommonOptions } from '../context.js';

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

export function registerPair(program: Command): void {
  withCommonOptions(program.command('pair')
    .description('make a single-use pairing code for a new client')
    .option('--name <name>', 'name for the client that pairs with this code')
    .option('--scopes <list...>', `comma-separated scopes (${SCOPES.join(', ')}); default ${DEFAULT_SCOPES.join(',')}`)
    .option('--ttl <duration>', 'how long the code stays valid', '10m'))
    .action(action(async (options: CommonOptions & { name?: string; scopes?: string[]; ttl: string }) => {
      const ttlMs = parseDuration(options.ttl);
      if (ttlMs === null) throw new CliError(`--ttl: expected a duration like 30s, 10m or 1h, got '${options.ttl}'`, EXIT_USAGE);
      // LMSP 12: 500ms is a duration, but codes expire in whole seconds (`expires_at`).
      if (ttlMs < 1000) throw new CliError(`--ttl: a pairing code lives at least 1s, got '${options.ttl}'`, EXIT_USAGE);
      // The same bound as the API's, with the service running or not.
      if (ttlMs > MAX_PAIRING_TTL_SECONDS * 1000) throw new CliError(`--ttl: a pairing code lives at most 7d, got '${options.ttl}'`, EXIT_USAGE);
      const scopes = parseScopes(options.scopes);
      const request = { name: options.name ?? null, ...(scopes ? { scopes } : {}), ttlMs };
      const client = await serviceClient(options);
      let issued: PairingCodeObject;
      if (client) {
        issued = await client.createPairingCode({
          ...(request.name ? { name: request.name } : {}), ...(scopes ? { scopes } : {}), ttl_seconds: Math.round(ttlMs / 1000),
        });
      } else {
        // Works before the first start too: the database is created (and migrated) if need be.
        const offline = openOffline(options, true);
        try {
          const outcome = await issuePairingCode(offline, request, null);
          issued = 'code' in outcome ? outcome.code : outcome.replay.body as PairingCodeObject;
        } finally {
          await offline.close();
        }
      }
      if (options.json) {
        printJson({ code: issued.code, expires_at: issued.expires_at, scopes: issued.scopes });
        return;
      }
      const url = (await runningService(options))?.url ?? 'http://127.0.0.1:5677';
      process.stdout.write([
        `Pairing code: ${issued.code}`,
        `Scopes:       ${issued.scopes.join(', ')}`,
        `Expires:      ${formatTime(issued.expires_at)} (single use)`,
        '',
        'The client exchanges it for its token with:',
        `  curl -s ${url}/v1/pair -H 'content-type: application/json' -d '{"code": "${issued.code}", "client_name": "my-app"}'`,
        '',
      ].join('\n'));
    }));
}
