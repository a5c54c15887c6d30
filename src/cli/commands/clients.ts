/** `lmsp clients ls|revoke`: paired clients (LMSP section 4). */
import type { Command } from 'commander';
import { action, formatTime, operatorClient, printJson, table, withCommonOptions, type CommonOptions } from '../context.js';

export function registerClients(program: Command): void {
  const clients = program.command('clients').description('paired clients');

  withCommonOptions(clients.command('ls').description('list clients'))
    .action(action(async (options: CommonOptions) => {
      const list = await operatorClient(options).listClients();
      if (options.json) return printJson({ object: 'list', data: list });
      const rows = list.map((client) => ({
        id: client.id,
        name: client.name,
        scopes: client.scopes.join(','),
        created: formatTime(client.created_at),
        last_used: formatTime(client.last_used_at),
        revoked: client.revoked_at ? formatTime(client.revoked_at) : '-',
      }));
      process.stdout.write(`${table(rows, ['id', 'name', 'scopes', 'created', 'last_used', 'revoked'])}\n`);
    }));

  withCommonOptions(clients.command('revoke <id>').description('revoke a client: its token stops working at once; its records stay'))
    .action(action(async (id: string, options: CommonOptions) => {
      const client = await operatorClient(options).revokeClient(id);
      if (options.json) printJson(client);
      else process.stdout.write(`revoked ${client.id} (${client.name})\n`);
    }));
}
