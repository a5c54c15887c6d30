/**
 * SQL predicates generated from the vocabulary (src/domain/tasks.ts), as pg-boss interpolates
 * its JOB_STATES: a state list or a recovery rule is written once, in the domain, never as
 * literals here. Lists are written as comparisons joined by OR, not `IN (...)`: SQLite builds a
 * temporary index for an IN list of more than two constants on every statement that uses it.
 */
import { changedAtRecovery, RECOVERY, RESTART_POLICIES, UNFINISHED_STATUSES, type RestartPolicy } from '../domain/tasks.js';

/** The values are the vocabulary's own constants, never a client's text. */
function literal(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** `(column = 'a' OR column = 'b' ...)`. */
export function oneOf(column: string, values: readonly string[]): string {
  if (values.length === 0) return '0';
  return `(${values.map((value) => `${column} = ${literal(value)}`).join(' OR ')})`;
}

function statusWithPolicies(prefix: string, status: string, policies: readonly RestartPolicy[]): string {
  const statusTerm = `${prefix}status = ${literal(status)}`;
  return policies.length === RESTART_POLICIES.length ? statusTerm : `(${statusTerm} AND ${oneOf(`${prefix}on_restart`, policies)})`;
}

/** Tasks that recovery changes (LMSP 11.3, 7.5): every unfinished task but those that stay as they are. */
export function changedAtRecoverySql(prefix = ''): string {
  return `(${changedAtRecovery().map(({ status, policies }) => statusWithPolicies(prefix, status, policies)).join(' OR ')})`;
}

/** Unfinished tasks that recovery leaves as they are (a queued task under retry or resume). */
export function unchangedAtRecoverySql(prefix = ''): string {
  const terms = UNFINISHED_STATUSES.map((status) => ({
    status,
    policies: RESTART_POLICIES.filter((policy) => RECOVERY[policy][status] === 'unchanged'),
  })).filter((entry) => entry.policies.length > 0);
  return terms.length === 0 ? '0' : `(${terms.map(({ status, policies }) => statusWithPolicies(prefix, status, policies)).join(' OR ')})`;
}
