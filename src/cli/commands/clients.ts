/** `lmsp clients ls|revoke`: paired clients (LMSP section 4), through the service or, when it is stopped, the data directory. */
import type { Command } from 'commander';
import type { ClientObject } from '../../api/types.js';
import { listClients, revokeClient } from '../../tasks/pairing.js';
import { action, formatTime, openOffline, printJson, serviceClient, table, withCommonOptions, type CommonOptions } from '../context.js';

export function registerClients(program: Command): void {
  // The options every command takes parse here too, so `lmsp clients --data-dir D` without a
  // subcommand is told what it lacks, not that --data-dir is unknown.
  const clients = withCommonOptions(program.command('clients').description('paired clients'));

  withCommonOptions(clients.command('ls').description('list clients'))
    .action(action(async (options: CommonOptions) => {
      const client = await serviceClient(options);
      let list: ClientObject[];
      if (client) list = await client.listClients();
      else {
        const offline = openOffline(options);
        list = listClients(offline);
        await offline.close();
      }
      // Newest first, as GET /v1/clients and the dashboard list them.
      list.reverse();
      if (options.json) return printJson({ object: 'list', data: list });
      const rows = list.map((entry) => ({
        id: entry.id,
        name: entry.name,
        scopes: entry.scopes.join(','),
        created: formatTime(entry.created_at),
        last_used: formatTime(entry.last_used_at),
        revoked: entry.revoked_at ? formatTime(entry.revoked_at) : '-',
      }));
      process.stdout.write(`${table(rows, ['id', 'name', 'scopes', 'created', 'last_used', 'revoked'])}\n`);
    }));

  withCommonOptions(clients.command('revoke <id>').description('revoke a client: its token stops working at once; its records stay'))
    .action(action(async (id: string, options: CommonOptions) => {
      const client = await serviceClient(options);
      let revoked: ClientObject;
      if (client) revoked = await client.revokeClient(id);
      else {
        const offline = openOffline(options);
        try {
          revoked = await revokeClient(offline, id, offline.config.dataDir);
        } finally {
          await offline.close();
        }
      }
      if (options.json) printJson(revoked);
      else process.stdout.write(`revoked ${revoked.id} (${revoked.name})\n`);
    }));
}
