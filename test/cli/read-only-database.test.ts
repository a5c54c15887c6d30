/**
 * A database this user may not write (a backup restored read-only, a leftover log file) is
 * refused at the start with the database's exit code and the file to fix, before SQLite creates
 * anything beside it; `lmsp doctor` says so too. Root may write any file, so as root the commands
 * run as `nobody`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { withDataDir } from '../helpers/data-dir.js';
import { LMSP_BIN } from '../helpers/service.js';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const user = asRoot ? { uid: NOBODY, gid: NOBODY } : {};

/** Whether the commands can run as that user here (as root, `nobody` must be able to read the project). */
function runnable(): boolean {
  if (process.platform === 'win32') return false;
  if (!asRoot) return true;
  return spawnSync(process.execPath, ['-e', `require('node:fs').accessSync(${JSON.stringify(LMSP_BIN)}, 4)`], user).status === 0;
}

function lmsp(dataDir: string, args: string[]): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [LMSP_BIN, ...args, '--data-dir', dataDir], {
    ...user, encoding: 'utf8', timeout: 60_000, env: { ...process.env, HOME: dataDir, LMSP_LOG_LEVEL: 'warn' },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('a database this user may not write', { skip: runnable() ? false : 'the project cannot be read by the user nobody here' }, () => {
  test('the start is refused with exit 74 naming the file, nothing is created beside it, and doctor fails', { timeout: 120_000 }, () =>
    withDataDir((home) => {
      if (asRoot) chownSync(home, NOBODY, NOBODY);
      const dataDir = join(home, 'data');
      assert.equal(lmsp(dataDir, ['pair', '--json']).code, 0, 'the data directory is made');
      const database = join(dataDir, 'lmsp.db');
      chmodSync(database, 0o400);

      const refused = lmsp(dataDir, ['serve', '--port', '0', '--json']);
      assert.equal(refused.code, 74, refused.stderr);
      const { error } = JSON.parse(refused.stdout) as { error: { code: string; message: string } };
      assert.equal(error.code, 'database_unavailable');
      assert.match(error.message, new RegExp(`cannot write ${database}: this user may not write it \\(mode 400\\); make it writable: chmod 600 `));
      for (const side of ['lmsp.db-wal', 'lmsp.db-shm', 'lmsp.lock-journal']) assert.equal(existsSync(join(dataDir, side)), false, `${side} was not made`);
      assert.equal(lmsp(dataDir, ['pair']).code, 74, 'every command that writes says the same');

      const doctor = lmsp(dataDir, ['doctor', '--json']);
      assert.equal(doctor.code, 1);
      const checks = (JSON.parse(doctor.stdout) as { checks: { check: string; status: string; detail: string }[] }).checks;
      assert.deepEqual(checks.filter((check) => check.check === 'database').map((check) => [check.status, check.detail.startsWith(`cannot write ${database}`)]), [['fail', true]]);

      // Writable again, and a log file left read-only beside it: that file is named.
      chmodSync(database, 0o600);
      const shm = join(dataDir, 'lmsp.db-shm');
      writeFileSync(shm, '');
      if (asRoot) chownSync(shm, NOBODY, NOBODY);
      chmodSync(shm, 0o400);
      const again = lmsp(dataDir, ['pair', '--json']);
      assert.equal(again.code, 74);
      assert.match((JSON.parse(again.stdout) as { error: { message: string } }).error.message, new RegExp(`cannot write ${shm}:`));
      chmodSync(shm, 0o600);
      assert.equal(lmsp(dataDir, ['pair', '--json']).code, 0, 'once writable, the database is used again');

      if (asRoot) {
        // Another user's file, which chmod cannot give to this one.
        chownSync(database, 0, 0);
        chmodSync(database, 0o644);
        const owned = lmsp(dataDir, ['pair', '--json']);
        assert.equal(owned.code, 74);
        assert.match((JSON.parse(owned.stdout) as { error: { message: string } }).error.message,
          new RegExp(`cannot write ${database}: it belongs to another user \\(uid 0, mode 644\\); give it to this one \\(chown ${NOBODY} `));
        // Made as lmsp makes it, private to that user: not even readable.
        chmodSync(database, 0o600);
        const unreadable = lmsp(dataDir, ['pair', '--json']);
        assert.equal(unreadable.code, 74);
        assert.match((JSON.parse(unreadable.stdout) as { error: { message: string } }).error.message,
          new RegExp(`cannot read ${database}: it belongs to another user \\(uid 0, mode 600\\); give it to this one \\(chown ${NOBODY} `));
      }
    }));
});
