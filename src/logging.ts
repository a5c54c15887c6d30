/**
 * The service's log (LMSP 12): JSON lines (pino) when standard output is not a terminal, readable
 * colored lines on one; `--log-format json|pretty|auto` decides. Values that could hold a secret
 * are redacted whatever logs them: tokens and pairing codes never reach a log line.
 */
import { pino, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import type { ServiceConfig } from './config.js';

/** Field paths removed from every line, in case a secret is ever handed to the logger. */
const REDACT = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'authorization', 'token', '*.token',
  'pairing_code', '*.pairing_code'];

/** Whether a format means readable lines on this output. */
export function isPretty(format: ServiceConfig['logFormat'], output: { isTTY?: boolean } = process.stdout): boolean {
  return format === 'pretty' || (format === 'auto' && output.isTTY === true);
}

export function createLogger(config: Pick<ServiceConfig, 'logLevel' | 'logFormat'>, output: NodeJS.WriteStream & { fd: number } = process.stdout): Logger {
  const options = { level: config.logLevel, base: { pid: process.pid }, redact: { paths: REDACT, censor: '[redacted]' } };
  if (!isPretty(config.logFormat, output)) return pino(options, pino.destination({ dest: output.fd }));
  // One line per entry, its fields after the message; synchronous, so that the last lines
  // before an exit are written.
  return pino(options, pinoPretty({
    colorize: output.isTTY === true,
    singleLine: true,
    sync: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    destination: output,
  }));
}
