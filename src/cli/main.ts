/** The `lmsp` command line (LMSP section 12). */
import { Command } from 'commander';
import { SOFTWARE_VERSION } from '../paths.js';
import { registerClients } from './commands/clients.js';
import { registerConfig } from './commands/config.js';
import { registerDoctor } from './commands/doctor.js';
import { registerGc } from './commands/gc.js';
import { registerModels } from './commands/models.js';
import { registerPair } from './commands/pair.js';
import { registerRun } from './commands/run.js';
import { registerServe } from './commands/serve.js';
import { registerTasks } from './commands/tasks.js';
import { registerTop } from './commands/top.js';
import { EXIT_USAGE, printJson, stdoutClosedEndsCommand } from './context.js';

// `lmsp tasks events ID | head`: a reader that stops early is no error; end quietly, as other
// command-line tools do (a streaming `lmsp run` then cancels its task, as on a disconnect).
// Not for `lmsp serve`: exiting there ran the logger's exit-time flush into the same closed
// pipe (`serve --json 2>&1 | head`), which retries forever and left a service that answered nothing.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  if (stdoutClosedEndsCommand()) process.exit(0);
});

const program = new Command();
program
  .name('lmsp')
  .description('Run language models on this machine as a durable HTTP service (LMSP 1.0).')
  // The version, as text or with --json (before or after it) as the one JSON document (LMSP 12).
  .option('-V, --version', 'output the version number')
  .on('option:version', () => {
    if (process.argv.includes('--json')) printJson({ version: SOFTWARE_VERSION });
    else process.stdout.write(`${SOFTWARE_VERSION}\n`);
    process.exit(0);
  })
  .showHelpAfterError()
  // Before any command is added, so that every command inherits it: a command line that
  // commander cannot parse (an unknown command or option, a missing argument, a group without
  // its subcommand) is a usage error, exit 2 like every other one, and with --json the failure
  // is the one JSON document on stdout (LMSP 12). Help and --version still exit 0.
  .exitOverride((error) => {
    if (error.exitCode === 0) process.exit(0);
    // commander has said what is wrong on stderr already.
    // A group without its command (`lmsp models`) gets its usage, which commander calls '(outputHelp)'.
    const message = error.code === 'commander.help' ? 'a command is needed here: its usage is on standard error' : error.message.replace(/^error: /, '');
    if (process.argv.includes('--json')) printJson({ error: { code: 'invalid_usage', message } });
    process.exit(EXIT_USAGE);
  })
  // `lmsp --data-dir D tasks ls` and `lmsp tasks --data-dir D ls` as well as `lmsp tasks ls
  // --data-dir D`: the options every command takes (LMSP 12) are accepted before the command and
  // before its group too, and handed down to it unless it was given its own; the nearest wins.
  // Positional, so that after the command they stay the command's.
  .enablePositionalOptions()
  .option('--data-dir <path>', 'data directory, for any command (also accepted after it)')
  .option('--json', 'one JSON document on stdout, for any command (also accepted after it)')
  .hook('preAction', (_root, command) => {
    for (const name of ['dataDir', 'json']) {
      if (command.getOptionValue(name) !== undefined) continue;
      for (let above = command.parent; above; above = above.parent) {
        const value: unknown = above.getOptionValue(name);
        if (value === undefined) continue;
        command.setOptionValueWithSource(name, value, 'cli');
        break;
      }
    }
  });

registerServe(program);
registerPair(program);
registerGc(program);
registerConfig(program);
registerDoctor(program);
registerModels(program);
registerClients(program);
registerTasks(program);
registerRun(program);
registerTop(program);

await program.parseAsync(process.argv);
