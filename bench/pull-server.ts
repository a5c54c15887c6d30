/**
 * The server of the pull benchmark, in a process of its own so that serving does not share an
 * event loop with the download being measured: serves the file named on the command line at
 * `/model.gguf` and prints `{"url": ...}` once listening; on SIGUSR2 it prints its request log
 * as `{"requests": [...]}` (what a resume really fetched).
 */
import { statSync } from 'node:fs';
import { startModelServer } from '../test/helpers/model-server.js';

const [path] = process.argv.slice(2);
if (!path) throw new Error('usage: pull-server FILE');
const server = await startModelServer();
const url = server.serve('/model.gguf', { path, size: statSync(path).size }, { etag: '"bench"' });
console.log(JSON.stringify({ url }));
process.on('SIGUSR2', () => console.log(JSON.stringify({ requests: server.requests })));
