/** The `lmsp` command line (LMSP section 12). */
import { Command } from 'commander';
import { SOFTWARE_VERSION } from '../paths.js';
import { registerGc } from './commands/gc.js';
import { registerPair } from './commands/pair.js';
import { registerServe } from './commands/serve.js';

const program = new Command();
program
  .name('lmsp')
  .description('Run language models on this machine as a durable HTTP service (LMSP 1.0).')
  .version(SOFTWARE_VERSION)
  .showHelpAfterError();

registerServe(program);
registerPair(program);
registerGc(program);

await program.parseAsync(process.argv);
