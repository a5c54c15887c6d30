/** Footprint: resident memory of the idle service, no model loaded (the process and any children). */
import { log, median, residentMiB, runs, startService, type Figure } from './lib.js';

export async function benchFootprint(): Promise<Figure> {
  const samples: number[] = [];
  for (let run = 0; run < runs(); run++) {
    const service = await startService({ env: { LMSP_LOG_LEVEL: 'warn' } });
    await fetch(`${service.url}/v1/service`);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    samples.push(await residentMiB(service.pid));
    await service.kill();
    log(`footprint run ${run + 1}: ${samples.at(-1)!.toFixed(1)} MiB`);
  }
  const value = median(samples);
  return {
    name: 'Idle resident memory, no model loaded',
    value,
    baseline: 0,
    unit: 'MiB',
    ratio: value,
    target: '<= 100 MB',
    met: value * 1.048576 <= 100,
    how: 'VmRSS of `lmsp serve` and its children, 2 s after start and one request',
    samples: { value: samples, baseline: [] },
  };
}
