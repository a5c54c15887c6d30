/**
 * Pull: the throughput of `downloadModel` against `curl` downloading the same file from the same
 * loopback server (a process of its own), alternated run by run; and what a resume after an
 * abort at 50% saves, with the cost of re-hashing the partial file.
 *
 * Both sides end with the file on stable storage: lmsp fsyncs before it renames, so curl's file
 * is fsynced after curl exits and that time counts for curl too (the figure without it is in
 * `extra`). lmsp also hashes every byte (SHA-256) on the way, which curl does not. A third
 * side, node:http reading the same answer and dropping it, shows the floor of Node's own HTTP
 * client, and CPU time per GiB is reported for all, being less sensitive to a busy machine.
 *
 * The same file is also pulled through the real service (`POST /v1/models/pull` to
 * `model.pull.completed`: download, hash, validation, fsync, rename and registration), alternated
 * with curl too; and the service is killed with SIGKILL once half of a pull is on disk and
 * started again, the file server's own log telling how many bytes the resumed pull fetched.
 *
 * `npm run build && node dist/bench/run.js pull`; `BENCH_PULL_MB` sets the file size (300).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { encodeGgufHeader } from '../src/engine/gguf-writer.js';
import { DownloadAbortedError } from '../src/models/download-errors.js';
import { downloadModel, partialPathOf, type DownloadOptions, type ResumeState } from '../src/models/download.js';
import { hashPrefix } from '../src/models/partial-file.js';
import { parsePullSource, pullSettingsFromEnvironment } from '../src/models/pull-source.js';
import { makeDataDir } from '../test/helpers/data-dir.js';
import { firstJsonLine, log, median, runs, settleDisk, spawnScript, stopChild, type Figure } from './lib.js';
import { ServerLog, ServicePulls } from './pull-service.js';

const MiB = 1 << 20;
const TENSOR_BYTES = 4 * MiB;
/** The size of the served file: the requested size rounded to whole tensors, plus the header. */
let SIZE = Number(process.env.BENCH_PULL_MB ?? 300) * MiB;

/**
 * A valid GGUF file (the service validates what it pulls) of about SIZE bytes: one f32 tensor per
 * 4 MiB, filled with incompressible random bytes. Answers its size.
 */
function writeBenchFile(path: string): number {
  const count = Math.max(1, Math.round(SIZE / TENSOR_BYTES));
  const header = encodeGgufHeader({
    metadata: [['general.architecture', { type: 'string', value: 'llama' }], ['general.name', { type: 'string', value: 'pull benchmark' }]],
    tensors: Array.from({ length: count }, (_, index) => ({
      name: `blk.${index}.weight`, dims: [TENSOR_BYTES / 4], type: 'f32' as const, values: () => new Float32Array(0),
    })),
  });
  const fd = openSync(path, 'w');
  const block = Buffer.alloc(TENSOR_BYTES);
  try {
    writeSync(fd, header);
    for (let index = 0; index < count; index++) {
      randomFillSync(block);
      writeSync(fd, block);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return header.length + count * TENSOR_BYTES;
}

function fsyncFile(path: string): void {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

interface Timing {
  /** Wall time, ms. */
  wall: number;
  /** CPU time of the downloading process (user + system), ms. */
  cpu: number;
}

/** curl's times, with and without an fsync of what it wrote; bash's `times` gives its CPU time. */
async function timeCurl(url: string, out: string): Promise<{ plain: Timing; durable: Timing }> {
  const started = performance.now();
  const shell = spawn('bash', ['-c', 'curl -sS --fail -o "$1" "$2" && times', 'bash', out, url], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  shell.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => shell.once('exit', resolve));
  if (code !== 0) throw new Error(`curl exited with ${code}`);
  const wall = performance.now() - started;
  // `times` prints the shell's own times, then its children's: "0m0.071s 0m0.412s".
  const [user, system] = [...(output.trim().split('\n')[1] ?? '').matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60_000 + Number(m[2]) * 1000);
  const cpu = (user ?? 0) + (system ?? 0);
  fsyncFile(out);
  return { plain: { wall, cpu }, durable: { wall: performance.now() - started, cpu } };
}

function pullOptions(url: string, modelsDir: string, extra: Partial<DownloadOptions> = {}): DownloadOptions {
  const settings = pullSettingsFromEnvironment({ LMSP_HF_ENDPOINT: new URL(url).origin });
  return { source: parsePullSource(url, settings), settings, modelsDir, id: 'bench', ...extra };
}

/** The floor of Node itself: the same GET through node:http, every byte read and dropped. */
async function timeNodeHttp(url: string): Promise<Timing> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  let bytes = 0;
  await new Promise<void>((resolve, reject) => {
    http.get(url, { agent: false }, (response) => {
      response.on('data', (chunk: Buffer) => (bytes += chunk.length));
      response.once('end', resolve);
      response.once('error', reject);
    }).once('error', reject);
  });
  if (bytes !== SIZE) throw new Error(`node:http read ${bytes} bytes, not ${SIZE}`);
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - started, cpu: (used.user + used.system) / 1000 };
}

async function timeLmsp(url: string, modelsDir: string): Promise<Timing> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const result = await downloadModel(pullOptions(url, modelsDir));
  if (result.sizeBytes !== SIZE) throw new Error(`downloaded ${result.sizeBytes} bytes, not ${SIZE}`);
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - started, cpu: (used.user + used.system) / 1000 };
}

/** Aborts a download at half, then resumes it; answers what the resume cost. */
async function measureResume(url: string, modelsDir: string): Promise<{ partial: number; transferred: number; rehashMs: number; resumeMs: number }> {
  const controller = new AbortController();
  let state: ResumeState | null = null;
  const aborted = await downloadModel(pullOptions(url, modelsDir, {
    signal: controller.signal,
    progressIntervalMs: 0,
    onResumeState: (recorded) => void (state = recorded),
    onProgress: ({ downloadedBytes }) => downloadedBytes >= SIZE / 2 && controller.abort(),
  })).catch((error: unknown) => error);
  if (!(aborted instanceof DownloadAbortedError)) throw new Error(`expected an abort, got ${String(aborted)}`);
  const partial = aborted.partialBytes;
  settleDisk();
  const hashStarted = performance.now();
  await hashPrefix(partialPathOf(modelsDir, 'bench'), partial, new AbortController().signal);
  const rehashMs = performance.now() - hashStarted;
  const started = performance.now();
  const result = await downloadModel(pullOptions(url, modelsDir, { resume: state }));
  const resumeMs = performance.now() - started;
  rmSync(result.path);
  return { partial, transferred: result.transferredBytes, rehashMs, resumeMs };
}

export async function benchPull(): Promise<Figure[]> {
  if (spawnSync('curl', ['--version']).status !== 0) throw new Error('the pull benchmark needs curl');
  const folder = makeDataDir('bench-pull');
  const file = join(folder, 'served.gguf');
  const modelsDir = join(folder, 'models');
  mkdirSync(modelsDir);
  log(`writing a ${SIZE / MiB} MiB file`);
  SIZE = writeBenchFile(file);
  const server = spawnScript('pull-server', [file]);
  const serverLog = new ServerLog(server);
  let service: ServicePulls | null = null;
  try {
    const { url } = await firstJsonLine<{ url: string }>(server);
    service = await ServicePulls.start(join(folder, 'service'), url);
    const pulls = service;
    const throughService: number[] = [];
    const lmsp: Timing[] = [];
    const curl: Timing[] = [];
    const curlPlain: Timing[] = [];
    const nodeHttp: Timing[] = [];
    const one = {
      service: async () => {
        settleDisk();
        throughService.push(await pulls.timeOne());
      },
      node: async () => {
        settleDisk();
        nodeHttp.push(await timeNodeHttp(url));
      },
      lmsp: async () => {
        settleDisk();
        lmsp.push(await timeLmsp(url, modelsDir));
        rmSync(join(modelsDir, 'bench.gguf'));
      },
      curl: async () => {
        settleDisk();
        const out = join(folder, 'curl.gguf');
        const time = await timeCurl(url, out);
        curl.push(time.durable);
        curlPlain.push(time.plain);
        rmSync(out);
      },
    };
    await one.lmsp(); // warm-up: the served file into the page cache, the code paths compiled
    lmsp.length = 0;
    for (let run = 0; run < runs(); run++) {
      // Rotate which goes first, so that none always inherits another's dirty pages.
      const order = (['curl', 'lmsp', 'node', 'service'] as const).map((_, i, sides) => sides[(i + run) % sides.length]!);
      for (const side of order) await one[side]();
      log(`pull run ${run + 1}: lmsp ${lmsp.at(-1)!.wall.toFixed(0)} ms (cpu ${lmsp.at(-1)!.cpu.toFixed(0)} ms), curl ${curl.at(-1)!.wall.toFixed(0)} ms ` +
        `(${curlPlain.at(-1)!.wall.toFixed(0)} ms before its fsync; cpu ${curl.at(-1)!.cpu.toFixed(0)} ms), ` +
        `node:http reading alone ${nodeHttp.at(-1)!.wall.toFixed(0)} ms (cpu ${nodeHttp.at(-1)!.cpu.toFixed(0)} ms), ` +
        `through the service ${throughService.at(-1)!.toFixed(0)} ms`);
    }
    const mbps = (ms: number) => SIZE / MiB / (ms / 1000);
    const walls = (timings: Timing[]) => timings.map((timing) => timing.wall);
    const cpuPerGiB = (timings: Timing[]) => Math.round(median(timings.map((timing) => timing.cpu)) / (SIZE / 1024 ** 3));
    const value = mbps(median(walls(lmsp)));
    const baseline = mbps(median(walls(curl)));
    const resume = await measureResume(url, modelsDir);
    log(`resume: ${resume.partial} bytes kept, ${resume.transferred} fetched; re-hash ${resume.rehashMs.toFixed(0)} ms`);
    const viaService = mbps(median(throughService));
    const killed = await pulls.killAtHalf(SIZE, serverLog);
    log(`service killed at ${killed.onDisk} bytes on disk; the restarted pull asked ${killed.range ?? 'for everything'} and fetched ${killed.fetchedAfter} bytes`);
    return [
      {
        name: `pull of a ${Math.round(SIZE / MiB)} MiB file through the service (POST to model.pull.completed) vs curl`,
        value: viaService,
        baseline,
        unit: 'MiB/s',
        ratio: viaService / baseline,
        target: '>= 0.9x',
        met: viaService / baseline >= 0.9,
        how: 'POST /v1/models/pull, then its event stream to model.pull.completed (hash, validation, fsync, rename, registration) vs curl -o then fsync, same server process, alternated',
        samples: { value: throughService.map(mbps), baseline: walls(curl).map(mbps) },
        extra: { ratio_to_download_engine_alone: Math.round((viaService / value) * 100) / 100 },
      },
      {
        name: 'bytes fetched after a SIGKILL of the service at 50% of a pull',
        value: killed.fetchedAfter / MiB,
        baseline: SIZE / MiB,
        unit: 'MiB',
        ratio: killed.fetchedAfter / SIZE,
        target: 'only the bytes not on disk',
        met: killed.fetchedAfter === SIZE - killed.onDisk && killed.range === `bytes=${killed.onDisk}-`,
        how: 'kill -9 the service once half of the partial file is on disk, start it again; the file server logs the resumed request',
        samples: { value: [killed.fetchedAfter / MiB], baseline: [SIZE / MiB] },
        extra: { kept_mib: Math.round(killed.onDisk / MiB), requests_for_the_pull: killed.requests },
      },
      {
        name: `pull of a ${Math.round(SIZE / MiB)} MiB file over loopback vs curl`,
        value,
        baseline,
        unit: 'MiB/s',
        ratio: value / baseline,
        target: '>= 0.9x',
        met: value / baseline >= 0.9,
        how: 'downloadModel (hash, write, fsync, rename) vs curl -o then fsync of its file, same server process, alternated',
        samples: { value: walls(lmsp).map(mbps), baseline: walls(curl).map(mbps) },
        extra: {
          curl_without_fsync_mib_s: Math.round(mbps(median(walls(curlPlain)))),
          ratio_to_curl_without_fsync: Math.round((value / mbps(median(walls(curlPlain)))) * 100) / 100,
          lmsp_cpu_ms_per_gib: cpuPerGiB(lmsp),
          curl_cpu_ms_per_gib: cpuPerGiB(curl),
          node_http_alone_mib_s: Math.round(mbps(median(walls(nodeHttp)))),
          node_http_alone_cpu_ms_per_gib: cpuPerGiB(nodeHttp),
        },
      },
      {
        name: 'bytes fetched by a resume after an abort at 50%',
        value: resume.transferred / MiB,
        baseline: SIZE / MiB,
        unit: 'MiB',
        ratio: resume.transferred / SIZE,
        target: 'only the missing bytes',
        met: resume.transferred === SIZE - resume.partial,
        how: 'abort once half is on disk, then downloadModel with the recorded resume state; the partial file is re-hashed first',
        samples: { value: [resume.transferred / MiB], baseline: [SIZE / MiB] },
        extra: {
          kept_mib: Math.round(resume.partial / MiB),
          rehash_mib_s: Math.round(resume.partial / MiB / (resume.rehashMs / 1000)),
          resume_seconds: Math.round(resume.resumeMs) / 1000,
          full_pull_seconds: Math.round(median(walls(lmsp))) / 1000,
        },
      },
    ];
  } finally {
    await service?.stop();
    await stopChild(server);
    rmSync(folder, { recursive: true, force: true });
  }
}
