import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { affinityForThisMachine, allowedCpus, findExecutable, parseCpuList, planAffinity, tasksetWorks } from '../../src/engine/cpu-affinity.js';
import { childPids, waitFor, withService, type TestService } from '../helpers/service.js';

function cpusOf(pid: number): number[] {
  return parseCpuList(/^Cpus_allowed_list:\s*(.+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!);
}

async function runnerCpus(service: TestService): Promise<number[]> {
  await service.client.createResponse({ model: 'lmsp-tiny', input: 'x', max_output_tokens: 2 });
  const runner = await waitFor(() => childPids(service.pid)[0], { what: 'a runner process' });
  return cpusOf(runner);
}

describe('runner CPU affinity', () => {
  test('CPU lists parse as the kernel writes them', () => {
    assert.deepEqual(parseCpuList('0-3,8,10-11\n'), [0, 1, 2, 3, 8, 10, 11]);
    assert.deepEqual(parseCpuList('5'), [5]);
    assert.throws(() => parseCpuList('0-a'), /not a CPU list/);
  });

  test('runners get CPUs from the end of the list only when the service keeps one', () => {
    assert.deepEqual(planAffinity('auto', 1, 1, [0, 1], '/usr/bin/taskset'), { pinned: true, taskset: '/usr/bin/taskset', runnerCpus: ['1'], serviceCpus: [0] });
    assert.deepEqual(planAffinity('auto', 2, 3, [0, 1, 2, 3, 4, 5, 6, 7], '/usr/bin/taskset'),
      { pinned: true, taskset: '/usr/bin/taskset', runnerCpus: ['5,6,7', '2,3,4'], serviceCpus: [0, 1] });
    assert.equal(planAffinity('auto', 2, 1, [0, 1], '/usr/bin/taskset').pinned, false, 'two runners on two CPUs: nothing left');
    assert.equal(planAffinity('auto', 1, 1, [0], '/usr/bin/taskset').pinned, false);
    assert.equal(planAffinity('auto', 1, 1, [0, 1], null).pinned, false, 'no taskset');
    assert.equal(planAffinity('auto', 1, 1, null, '/usr/bin/taskset').pinned, false, 'CPUs unknown');
    assert.equal(planAffinity('off', 1, 1, [0, 1, 2, 3], '/usr/bin/taskset').pinned, false);
  });

  const taskset = findExecutable('taskset');
  test('taskset is probed before runners depend on it', { skip: !taskset || process.platform !== 'linux' ? 'no taskset' : false }, async () => {
    assert.equal(await tasksetWorks(taskset!, String(allowedCpus()![0])), true);
    assert.equal(await tasksetWorks(taskset!, '100000'), false, 'a CPU that does not exist cannot be set');
  });

  test('the service pins its runner as planned, and not at all with --cpu-affinity off', { timeout: 60_000, skip: process.platform !== 'linux' }, async () => {
    const plan = await affinityForThisMachine('auto', 1, 1);
    const all = allowedCpus()!;
    await withService({ args: ['--threads', '1'] }, async (service) => {
      assert.deepEqual(await runnerCpus(service), plan.pinned ? parseCpuList(plan.runnerCpus[0]!) : all);
      assert.deepEqual(cpusOf(service.pid), all, 'the service itself is not pinned');
    });
    await withService({ args: ['--threads', '1', '--cpu-affinity', 'off'] }, async (service) => {
      assert.deepEqual(await runnerCpus(service), all);
    });
  });
});
